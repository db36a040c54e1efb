#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Build the tiny Hugging Face test checkpoints and reference outputs under tests/fixtures/.

Why this exists: the C++ engine (engine/) loads real Hugging Face checkpoints
(config.json + safetensors) and must reproduce what `transformers` computes. We
cannot ship or download real models in tests, so this script builds tiny
random-weight Qwen2 / Llama models from config objects only (no network), saves
them exactly the way `transformers` does, and records reference outputs
(full-prompt logits and greedy continuations) that the C++ tests compare
against.

The random weights are deliberately larger than the transformers default init
(std 0.02 gives almost uniform logits and near-ties in greedy decoding, which
would make token-equality tests flaky). For every model we check that each
greedy step has a top-1 / top-2 logit gap of at least MIN_MARGIN; if not, the
next seed is tried (deterministically) and the seed actually used is recorded.

Fixtures:
  qwen2-tiny       Qwen2ForCausalLM, f32, GQA, q/k/v bias, tied embeddings, one file
  llama-tiny       LlamaForCausalLM, f32, GQA, head_dim*heads != hidden, llama3 rope
                   scaling, untied lm_head, sharded safetensors + index
  qwen2-tiny-bf16  qwen2-tiny weights stored as bf16; references computed in f32
                   from the bf16-rounded weights
  llama-tiny-f16   llama-tiny weights stored as f16 in one file; references computed
                   in f32 from the f16-rounded weights

Usage (rerunnable, regenerates byte-identical files for the same package versions):
  HF_HUB_OFFLINE=1 /tmp/hfenv/bin/python tools/make_fixtures.py --out tests/fixtures
"""

import argparse
import inspect
import json
import math
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

PROMPT_LENGTHS = (1, 7, 13)
MAX_NEW_TOKENS = 16
MIN_MARGIN = 1e-3
FIRST_SEED = 1234
MAX_SEED_TRIES = 200

# Random re-initialisation scales (see module docstring).
MATRIX_STD = 0.4
EMBED_STD = 0.3
BIAS_STD = 0.1
NORM_NOISE_STD = 0.1

LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 40,  # pair 0 kept, pair 1 in the smoothed band, pairs 2-7 scaled
}


def setup_torch():
    torch.set_default_dtype(torch.float32)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # fixed reduction order -> byte-identical reruns


# What both tiny fixture models share: a byte-sized vocabulary, two layers, GQA 2 KV heads, no special
# tokens (the tests pass ids directly), f32 weights.
TINY_COMMON = dict(vocab_size=256, num_hidden_layers=2, num_key_value_heads=2, max_position_embeddings=128,
                   bos_token_id=None, eos_token_id=None, pad_token_id=None, dtype="float32")


def qwen2_config():
    return Qwen2Config(**TINY_COMMON, hidden_size=64, intermediate_size=160, num_attention_heads=4,
                       rms_norm_eps=1e-6, tie_word_embeddings=True,
                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, use_sliding_window=False)


def llama_config():
    return LlamaConfig(**TINY_COMMON, hidden_size=96, intermediate_size=192, num_attention_heads=8, head_dim=16,
                       rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                       rope_parameters=dict(LLAMA3_ROPE))


def build_model(cls, config, gen):
    """Construct a model from its config and re-initialise every parameter from `gen`."""
    config = type(config).from_dict(config.to_dict())
    config._attn_implementation = "eager"
    model = cls(config).to(torch.float32).eval()
    with torch.no_grad():
        # named_parameters() de-duplicates tied tensors; sorted for a fixed order.
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight"):
                noise = torch.randn(p.shape, generator=gen) * NORM_NOISE_STD
                p.copy_(1.0 + noise)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * BIAS_STD)
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) * EMBED_STD)
            elif p.dim() == 2:
                # scale by fan-in so activations stay O(1) through the layers
                std = MATRIX_STD * math.sqrt(64.0 / p.shape[1])
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
    if config.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def make_prompts(gen, vocab):
    return [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]


def top2_margin(logits_row):
    top = torch.topk(logits_row, 2).values
    return float(top[0] - top[1])


def gen_config(use_cache):
    return GenerationConfig(
        do_sample=False,
        num_beams=1,
        max_new_tokens=MAX_NEW_TOKENS,
        min_new_tokens=MAX_NEW_TOKENS,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=0,
        use_cache=use_cache,
        output_scores=True,
        return_dict_in_generate=True,
        temperature=None,
        top_p=None,
        top_k=None,
    )


@torch.no_grad()
def compute_reference(model, prompts):
    """Full-prompt logits, greedy continuations (cached, uncached, manual) and min margin."""
    logits_all, greedy, greedy_nc = [], [], []
    margin = math.inf
    for prompt in prompts:
        ids = torch.tensor([prompt], dtype=torch.long)
        logits = model(input_ids=ids, use_cache=False).logits[0].float()
        logits_all.append(logits)

        # Manual greedy loop: full forward pass over the whole sequence each step.
        seq = list(prompt)
        manual = []
        for _ in range(MAX_NEW_TOKENS):
            step = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].float()
            margin = min(margin, top2_margin(step))
            tok = int(torch.argmax(step))
            manual.append(tok)
            seq.append(tok)

        outs = {}
        for use_cache in (True, False):
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                generation_config=gen_config(use_cache),
            )
            new = out.sequences[0, ids.shape[1]:].tolist()
            assert len(new) == MAX_NEW_TOKENS, (use_cache, new)
            for s in out.scores:
                margin = min(margin, top2_margin(s[0].float()))
            outs[use_cache] = new
        assert outs[True] == outs[False], ("cache / no-cache greedy mismatch", outs)
        assert outs[True] == manual, ("generate / manual greedy mismatch", outs[True], manual)
        greedy.append(outs[True])
        greedy_nc.append(outs[False])
    return logits_all, greedy, greedy_nc, margin


def round_through(model, dtype):
    """f32 copy of `model` whose weights are rounded to `dtype` (what the engine computes with)."""
    # Only parameters are rounded: module.to(dtype) would also round non-persistent
    # buffers such as rotary inv_freq, which the engine computes in f32 from rope_theta.
    m = type(model)(model.config).eval()
    m.load_state_dict(model.state_dict())
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(dtype).float())
    return m


@torch.no_grad()
def check_llama3_rope_changes_freqs(model, prompts):
    cfg = model.config
    head_dim = cfg.head_dim
    theta = cfg.rope_parameters["rope_theta"]
    plain = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    used = model.model.rotary_emb.inv_freq.float()
    changed = (~torch.isclose(plain, used, rtol=1e-6, atol=0)).sum().item()
    assert changed > 0, "llama3 rope scaling did not change any frequency"
    rp = cfg.rope_parameters
    low_wl = rp["original_max_position_embeddings"] / rp["low_freq_factor"]
    high_wl = rp["original_max_position_embeddings"] / rp["high_freq_factor"]
    wavelen = 2 * math.pi / plain
    kinds = []
    for w in wavelen.tolist():
        kinds.append("kept" if w < high_wl else ("scaled" if w > low_wl else "smoothed"))
    print(f"  llama3 rope: {changed}/{len(plain)} inv_freq changed; per-pair: {kinds}")
    print(f"    plain inv_freq  = {[float(x) for x in plain]}")
    print(f"    scaled inv_freq = {[float(x) for x in used]}")
    # The scaling must also change the logits at these short prompt lengths.
    plain_cfg = type(cfg).from_dict(cfg.to_dict())
    plain_cfg.rope_parameters = {"rope_type": "default", "rope_theta": theta}
    plain_cfg._attn_implementation = "eager"
    plain_model = type(model)(plain_cfg).eval()
    plain_model.load_state_dict(model.state_dict())
    ids = torch.tensor([max(prompts, key=len)])
    diff = (model(input_ids=ids).logits - plain_model(input_ids=ids).logits).abs().max().item()
    print(f"    max |logits(llama3) - logits(default rope)| on longest prompt = {diff:.4g}")
    assert diff > 1e-2, "llama3 rope scaling does not affect the logits"


def save_model(model, out_dir, **kw):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kw["safe_serialization"] = True  # transformers 4.x; 5.x always writes safetensors
    model.save_pretrained(out_dir, **kw)
    for fn in os.listdir(out_dir):  # safetensors are written 0600; make them plain 0644
        os.chmod(os.path.join(out_dir, fn), 0o644)


def f32_json(x):
    # float(np.float32) -> exact double; repr round-trips exactly to the same float32.
    return float(x)


def write_reference(out_dir, name, prompts, ref, seed):
    logits, greedy, greedy_nc, margin = ref
    doc = {
        "model": name,
        "prompts": prompts,
        "logits": [[[f32_json(v) for v in row] for row in lg.tolist()] for lg in logits],
        "greedy": greedy,
        "greedy_no_cache": greedy_nc,
        "min_greedy_margin": f32_json(margin),
        "seed": seed,
    }
    path = os.path.join(out_dir, "reference.json")
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    return path


@torch.no_grad()
def reload_and_check(cls, out_dir, expected_model, prompts, expected_logits, load_dtype):
    """Load the saved checkpoint back and confirm it reproduces the reference logits."""
    loaded = cls.from_pretrained(out_dir, dtype=load_dtype, attn_implementation="eager")
    sd_a, sd_b = loaded.state_dict(), expected_model.state_dict()
    assert sorted(sd_a) == sorted(sd_b)
    for k in sd_b:
        assert sd_a[k].dtype == load_dtype, (k, sd_a[k].dtype)
        assert torch.equal(sd_a[k].float(), sd_b[k]), f"weight mismatch after reload: {k}"
    # Upcast the loaded weights into a fresh f32 model (buffers such as inv_freq stay f32).
    m = type(expected_model)(expected_model.config).eval()
    m.load_state_dict({k: v.float() for k, v in sd_a.items()})
    for p, lg in zip(prompts, expected_logits):
        got = m(input_ids=torch.tensor([p]), use_cache=False).logits[0].float()
        assert torch.equal(got, lg), "logits mismatch after reload"


def make_family(out_root, base_name, cls, config, low_name, low_dtype, base_save_kw, low_save_kw):
    for attempt in range(MAX_SEED_TRIES):
        seed = FIRST_SEED + attempt
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        prompts = make_prompts(gen, config.vocab_size)
        model = build_model(cls, config, gen)
        ref = compute_reference(model, prompts)
        low = round_through(model, low_dtype)
        ref_low = compute_reference(low, prompts)
        print(f"{base_name}: seed {seed} margins f32={ref[3]:.6g} {low_name}={ref_low[3]:.6g}")
        if ref[3] >= MIN_MARGIN and ref_low[3] >= MIN_MARGIN:
            break
    else:
        sys.exit(f"no seed with margin >= {MIN_MARGIN} for {base_name}")

    if config.rope_parameters.get("rope_type") == "llama3":
        check_llama3_rope_changes_freqs(model, prompts)

    base_dir = os.path.join(out_root, base_name)
    save_model(model, base_dir, **base_save_kw)
    write_reference(base_dir, base_name, prompts, ref, seed)
    reload_and_check(cls, base_dir, model, prompts, ref[0], torch.float32)

    low_dir = os.path.join(out_root, low_name)
    low_model = type(model)(model.config).eval()
    low_model.load_state_dict(model.state_dict())
    low_model = low_model.to(low_dtype)
    save_model(low_model, low_dir, **low_save_kw)
    write_reference(low_dir, low_name, prompts, ref_low, seed)
    reload_and_check(cls, low_dir, low, prompts, ref_low[0], low_dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures", help="output root directory")
    args = ap.parse_args()
    setup_torch()
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    os.makedirs(args.out, exist_ok=True)
    make_family(args.out, "qwen2-tiny", Qwen2ForCausalLM, qwen2_config(),
                "qwen2-tiny-bf16", torch.bfloat16, {}, {})
    make_family(args.out, "llama-tiny", LlamaForCausalLM, llama_config(),
                "llama-tiny-f16", torch.float16, {"max_shard_size": "100KB"}, {})


if __name__ == "__main__":
    main()
