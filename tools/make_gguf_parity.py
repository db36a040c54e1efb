#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write what transformers does with SmolLM2-135M-Instruct's GGUF, for servelab's parity tests.

transformers loads the same file that scripts/get-model.sh fetches (its GGUF
loader dequantizes every tensor to f32) and records, for a few plain and chat
prompts, the prompt ids and the greedy continuation, with the smallest gap
between the top two logits over the steps (a near-tie would make a one-ulp
difference flip a token); and the token ids of strings that hold bytes the
vocabulary has no token for. tests/engine/model/gguf_smollm2_test.cpp compares
servelab's f32-from-GGUF path with these ids and skips when the model is absent.

Usage (versions in tools/requirements-fixtures.txt, plus gguf):
  bash scripts/get-model.sh
  /tmp/hfenv/bin/python tools/make_gguf_parity.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --out tests/fixtures/gguf/smollm2-parity.json
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

PLAIN = ["The capital of France is", "A KV cache stores", "def fibonacci(n):", "1, 2, 3, 4, 5,"]
CHATS = [[{"role": "user", "content": "What is a KV cache?"}],
         [{"role": "user", "content": "Name three colors."}],
         [{"role": "system", "content": "You answer in one sentence."}, {"role": "user", "content": "Why is decode slow?"}]]
# Bytes 0x04, 0x14 and 0x1D have no token in SmolLM2's vocabulary.
TOKENIZER_TEXTS = ["Hello, world!", "12345 and 3.14", "a\x04b", "the\x14 KV\x1d cache", "\x04", "안녕하세요 KV 캐시",
                   "<|im_start|>user\nhi<|im_end|>\n", "  two spaces\tand a tab\n\n", "emoji 😀 and é"]
NEW_TOKENS = 24


def greedy(model, prompt_ids, eos):
    ids, margin = list(prompt_ids), float("inf")
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            top = torch.topk(logits, 2).values
            margin = min(margin, float(top[0] - top[1]))
            ids.append(int(torch.argmax(logits)))
            if ids[-1] in eos:
                break
    return ids[len(prompt_ids):], margin


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the .gguf file")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    folder, name = os.path.split(os.path.abspath(args.model))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    eos = {tok.eos_token_id}
    cases = []
    for text in PLAIN:
        prompt = tok(text, add_special_tokens=True)["input_ids"]
        out, margin = greedy(model, prompt, eos)
        cases.append({"kind": "plain", "text": text, "prompt_ids": prompt, "output_ids": out, "min_margin": margin})
        print(f"plain {text!r}: {tok.decode(out)!r} (margin {margin:.4f})", file=sys.stderr)
    for messages in CHATS:
        prompt_text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt = tok(prompt_text, add_special_tokens=False)["input_ids"]
        out, margin = greedy(model, prompt, eos)
        cases.append({"kind": "chat", "messages": messages, "prompt_text": prompt_text, "prompt_ids": prompt,
                      "output_ids": out, "min_margin": margin})
        print(f"chat {messages[-1]['content']!r}: {tok.decode(out)!r} (margin {margin:.4f})", file=sys.stderr)
    texts = [{"text": t, "ids": tok(t, add_special_tokens=False)["input_ids"]} for t in TOKENIZER_TEXTS]
    doc = {"generated_by": "tools/make_gguf_parity.py", "model": name, "transformers": transformers.__version__,
           "torch": torch.__version__, "eos_token_id": tok.eos_token_id, "new_tokens": NEW_TOKENS,
           "greedy": cases, "tokenizer": texts}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
