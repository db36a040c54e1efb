#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json)
from the byte-level BPE vocabulary a GGUF carries, with no network and no torch.

An outside benchmark client (aiperf) counts and synthesises prompt tokens with a
Hugging Face tokenizer; on a machine that cannot reach the Hub, this gives it the
model's own vocabulary, merges and chat template from the same file both servers
load (tools/serving_side_by_side.sh). transformers' own GGUF loader would do the
same but imports torch.

Only GPT-2-style byte-level BPE (tokenizer.ggml.model = "gpt2", as SmolLM2,
Qwen2 and Llama 3 ship) is written; anything else is refused by name.

Usage: gguf_tokenizer_json.py FILE.gguf OUT_DIR   (needs the gguf and tokenizers packages)
"""
import json
import pathlib
import sys

import gguf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    if len(f.types) and f.types[0] == gguf.GGUFValueType.ARRAY:
        return [f.contents(i) for i in range(len(f.data))]
    return f.contents()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_tokenizer_json.py FILE.gguf OUT_DIR")
    path, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    reader = gguf.GGUFReader(path)
    kind = field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        sys.exit(f"gguf_tokenizer_json.py: {path}: tokenizer.ggml.model is {kind!r}, expected 'gpt2' (byte-level BPE)")
    tokens = field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges") or []]
    types = field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    # Control tokens (type 3) match whole, as in the original tokenizer.json.
    tok.add_special_tokens([t for t, ty in zip(tokens, types) if ty == 3])
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))

    def text(key):
        i = field(reader, key)
        return tokens[i] if i is not None and 0 <= i < len(tokens) else None

    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1 << 30}
    for name, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"), ("pad_token", "padding")):
        if text(f"tokenizer.ggml.{key}_token_id") is not None:
            config[name] = text(f"tokenizer.ggml.{key}_token_id")
    template = field(reader, "tokenizer.chat_template")
    if template:
        config["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    print(f"gguf_tokenizer_json.py: wrote {out}/tokenizer.json ({len(tokens)} tokens, {len(merges)} merges)")


if __name__ == "__main__":
    main()
