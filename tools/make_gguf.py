#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write a GGUF file with random weights in Qwen2.5-0.5B's shape, for llama.cpp's llama-bench.

The side-by-side with llama.cpp (tools/llamacpp_side_by_side.sh) needs the same
model shape on both sides, and no download: servelab's `qwen2.5-0.5b` preset
makes synthetic weights, and this writes the same shape (from the model's
config.json: 24 layers, hidden 896, 14 query and 2 KV heads, FFN 4864, vocab
151936, tied embeddings, q/k/v biases) into GGUF, f32 or bf16. Speed does not
depend on the values, so they are random (seeded).

The tokenizer is a stand-in that llama.cpp accepts: a byte-level BPE vocab
whose first 256 tokens are GPT-2's byte alphabet, then one merged token and
placeholders. llama-bench feeds random token ids and never decodes text.

Needs gguf-py from the llama.cpp tree and its dependencies (pip install <llama.cpp>/gguf-py, as
tools/llamacpp_side_by_side.sh does).

Usage: make_gguf.py --out FILE [--dtype f32|bf16] [--layers N]
"""
import argparse
import sys

import numpy as np

from byte_level import bytes_to_unicode

try:
    import gguf
except ImportError:
    sys.exit("make_gguf.py: error: the gguf package is missing or incomplete (pip install <llama.cpp>/gguf-py)")

# Qwen2.5-0.5B-Instruct's config.json, the articles' model.
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 896, 24, 14, 2, 4864, 151936
ROPE_THETA, RMS_EPS, CONTEXT = 1e6, 1e-6, 32768


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="GGUF file to write")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32", help="type of the 2-D weights (norms and biases stay f32)")
    ap.add_argument("--layers", type=int, default=LAYERS, help="decoder layers (default: the model's 24)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not 1 <= args.layers <= 1000:
        sys.exit(f"make_gguf.py: error: --layers must be between 1 and 1000, got {args.layers}")

    rng = np.random.default_rng(args.seed)
    head_dim = HIDDEN // HEADS
    w = gguf.GGUFWriter(args.out, "qwen2")
    w.add_name("servelab random qwen2.5-0.5b shape")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(args.layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if args.dtype == "f32" else gguf.LlamaFileType.MOSTLY_BF16)

    # llama.cpp refuses a BPE vocab without merges, so there is one: two spaces ("Ġ" is GPT-2's space).
    tokens = [bytes_to_unicode()[b] for b in range(256)] + ["\u0120\u0120"] + [f"<servelab_{i}>" for i in range(VOCAB - 257)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * VOCAB)
    w.add_token_merges(["\u0120 \u0120"])
    w.add_bos_token_id(VOCAB - 1)
    w.add_eos_token_id(VOCAB - 1)
    w.add_add_bos_token(False)

    def matrix(name, rows, cols):
        data = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
        if args.dtype == "bf16":
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.BF16)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(name, data)

    def vector(name, n, value=None):
        w.add_tensor(name, np.full(n, value, np.float32) if value is not None
                     else (rng.standard_normal(n, dtype=np.float32) * 0.02).astype(np.float32))

    matrix("token_embd.weight", VOCAB, HIDDEN)  # tied: llama.cpp reuses it as the output projection
    vector("output_norm.weight", HIDDEN, 1.0)
    kv = KV_HEADS * head_dim
    for l in range(args.layers):
        p = f"blk.{l}."
        vector(p + "attn_norm.weight", HIDDEN, 1.0)
        matrix(p + "attn_q.weight", HIDDEN, HIDDEN)
        vector(p + "attn_q.bias", HIDDEN)
        matrix(p + "attn_k.weight", kv, HIDDEN)
        vector(p + "attn_k.bias", kv)
        matrix(p + "attn_v.weight", kv, HIDDEN)
        vector(p + "attn_v.bias", kv)
        matrix(p + "attn_output.weight", HIDDEN, HIDDEN)
        vector(p + "ffn_norm.weight", HIDDEN, 1.0)
        matrix(p + "ffn_gate.weight", FFN, HIDDEN)
        matrix(p + "ffn_up.weight", FFN, HIDDEN)
        matrix(p + "ffn_down.weight", HIDDEN, FFN)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"make_gguf.py: wrote {args.out} ({args.dtype}, {args.layers} layers)", file=sys.stderr)


if __name__ == "__main__":
    main()
