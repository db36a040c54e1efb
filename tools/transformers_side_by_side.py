#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generation without a KV cache, servelab beside Hugging Face transformers on this CPU.

Lab 02 times generation with the cache off (every step recomputes the whole
sequence, transformers' use_cache=False) and on. This runs the same
experiment on both engines with the same checkpoint: a random-weight
Qwen2.5-0.5B-shaped Qwen2ForCausalLM saved by transformers (f32 safetensors
and config.json, no download), loaded by `servelab generate --model DIR`.
Both get the same prompt ids and generate the same number of tokens
greedily; both sides' threads are set to the same count. Rounds alternate
between the engines so that both see the same machine, and the table gives
medians, the min-max spread and the ratio. Greedy tokens are compared too
(random weights give near-ties, so a mismatch is reported, not fatal).

Usage: transformers_side_by_side.py [--tokens 100] [--prompt-len 29] [--threads 2] [--rounds 2] [--cache]
Needs torch and transformers (tools/requirements-fixtures.txt) and a built servelab.
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import transformers
except ImportError:
    sys.exit("transformers_side_by_side.py: error: torch and transformers are needed "
             "(pip install -r tools/requirements-fixtures.txt)")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def qwen25_05b_config():
    """Qwen2.5-0.5B-Instruct's config.json, the articles' model."""
    return transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu",
        bos_token_id=151643, eos_token_id=151645)


def run_transformers(model, prompt, tokens, cache):
    ids = torch.tensor([prompt])
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                             use_cache=cache, pad_token_id=0)
    return time.perf_counter() - start, out[0, len(prompt):].tolist()


def run_servelab(exe, model_dir, prompt, tokens, threads, cache):
    cmd = [str(exe), "generate", "--model", str(model_dir), "--prompt-ids", ",".join(map(str, prompt)),
           "--max-new-tokens", str(tokens), "--threads", str(threads)] + ([] if cache else ["--no-kv-cache"])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"transformers_side_by_side.py: error: servelab failed: {done.stderr.strip()}")
    # Timed from the phase table, as transformers' time excludes loading.
    phase = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\| (prefill|decode)\s*\|\s*\d+ \|\s*([\d.]+) \|", done.stdout, re.M)}
    ids = re.search(r"^output ids\s+(.*)$", done.stdout, re.M)
    if len(phase) != 2 or not ids:
        sys.exit(f"transformers_side_by_side.py: error: unexpected servelab output:\n{done.stdout}")
    return (phase["prefill"] + phase["decode"]) / 1e3, [int(t) for t in ids.group(1).split()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=100, help="tokens to generate (default 100)")
    ap.add_argument("--prompt-len", type=int, default=29, help="prompt tokens (default 29, the articles' prompt)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache", action="store_true", help="with the KV cache (default: without, as lab 02's slow path)")
    ap.add_argument("--servelab", default=str(ROOT / "build/apps/servelab"))
    args = ap.parse_args()
    for name in ("tokens", "prompt_len", "threads", "rounds"):
        if not 1 <= getattr(args, name) <= 4096:
            sys.exit(f"transformers_side_by_side.py: error: --{name.replace('_', '-')} must be 1-4096")

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = transformers.Qwen2ForCausalLM(qwen25_05b_config()).eval()
    prompt = [int(t) for t in torch.randint(0, 151936, (args.prompt_len,), generator=torch.Generator().manual_seed(1))]
    hf, ours, same = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        run_transformers(model, prompt[:4], 2, args.cache)  # warm-up: the first call initialises lazily
        for r in range(args.rounds):
            t_hf, ids_hf = run_transformers(model, prompt, args.tokens, args.cache)
            t_ours, ids_ours = run_servelab(args.servelab, tmp, prompt, args.tokens, args.threads, args.cache)
            hf.append(t_hf)
            ours.append(t_ours)
            same.append(next((i for i, (a, b) in enumerate(zip(ids_hf, ids_ours)) if a != b), min(len(ids_hf), len(ids_ours))))
            print(f"round {r + 1}: transformers {t_hf:.2f} s, servelab {t_ours:.2f} s", file=sys.stderr)
    fmt = lambda v: f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]"
    mode = "with the KV cache" if args.cache else "without a KV cache (use_cache=False / --no-kv-cache)"
    print(f"\n## servelab beside transformers {transformers.__version__} (torch {torch.__version__}), "
          f"{mode}\n")
    print(f"qwen2.5-0.5b shape, random f32 weights, {args.prompt_len}-token prompt, {args.tokens} tokens generated "
          f"greedily, {args.threads} threads; median seconds over {args.rounds} alternating rounds [min-max].\n")
    print("| engine | generation [s] | tok/s | speedup |")
    print("|---|---:|---:|---:|")
    print(f"| transformers | {fmt(hf)} | {args.tokens / statistics.median(hf):.2f} | 1.00 |")
    print(f"| servelab | {fmt(ours)} | {args.tokens / statistics.median(ours):.2f} | "
          f"{statistics.median(hf) / statistics.median(ours):.2f} |")
    print(f"\nGreedy tokens equal up to the first difference: {min(same)} of {args.tokens} "
          "(random weights give near-ties; f32 sums in another order may pick the other token).")


if __name__ == "__main__":
    main()
