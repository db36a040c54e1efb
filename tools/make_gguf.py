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

With --from DIR it converts a Hugging Face folder instead (config.json,
safetensors, and tokenizer.json with its chat template when the folder has
them), as llama.cpp's converter lays it out: its tensor names, Q/K rows of
`llama` permuted for its RoPE, ggml dimension order. --types picks each
matrix's ggml type (all matrices one type, or "mixed": a different type per
projection, so that one small file exercises every reader). servelab's tests
compare what they read from such files with the safetensors originals.

Usage: make_gguf.py --out FILE [--dtype f32|bf16] [--layers N]
       make_gguf.py --from DIR --out FILE [--types f32|f16|bf16|q8_0|q4_0|q4_1|mixed]
"""
import json
import os
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


# llama.cpp's tensor names for Hugging Face's (layer tensors after "model.layers.N.").
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}
# --types mixed: one ggml type per projection, every type servelab reads.
MIXED = {"attn_q.weight": "f32", "attn_k.weight": "f32", "attn_v.weight": "f16", "attn_output.weight": "bf16",
         "ffn_gate.weight": "q8_0", "ffn_up.weight": "q4_0", "ffn_down.weight": "q4_1", "token_embd.weight": "q8_0",
         "output.weight": "f16"}
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4


def permute(w, heads):
    """llama.cpp's convert_hf_to_gguf.py permutation of q/k rows: each head's two halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_safetensors(folder):
    from safetensors.numpy import load_file
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(load_file(os.path.join(folder, f)))
    return {k: v.astype(np.float32) for k, v in tensors.items()}


def add_tokenizer(w, folder):
    """tokenizer.ggml.* from tokenizer.json (ids in order, added tokens typed), and the chat template."""
    tok = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
    vocab = dict(tok["model"]["vocab"])
    types = {}
    for t in tok.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        types[t["id"]] = TOKEN_CONTROL if t.get("special") else TOKEN_USER_DEFINED
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    assert [i for _, i in by_id] == list(range(len(by_id))), "token ids must be 0..n-1"
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list([t for t, _ in by_id])
    w.add_token_types([types.get(i, TOKEN_NORMAL) for _, i in by_id])
    w.add_token_merges(merges)
    gen_path = os.path.join(folder, "generation_config.json")
    eos = json.load(open(gen_path)).get("eos_token_id") if os.path.exists(gen_path) else None
    eos = [eos] if isinstance(eos, int) else (eos or [])
    if eos:
        w.add_eos_token_id(eos[0])
    if len(eos) > 1:
        w.add_eot_token_id(eos[1])
    w.add_add_bos_token(False)
    template = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(template):
        w.add_chat_template(open(template, encoding="utf-8").read())
    return len(by_id)


def convert(args):
    cfg = json.load(open(os.path.join(args.from_dir, "config.json")))
    arch = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}[cfg["architectures"][0]]
    heads, kv_heads = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    rope = cfg.get("rope_parameters") or {}
    tensors = read_safetensors(args.from_dir)
    w = gguf.GGUFWriter(args.out, arch)
    w.add_name(os.path.basename(os.path.normpath(args.from_dir)))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(cfg.get("head_dim", cfg["hidden_size"] // heads))
    w.add_value_length(cfg.get("head_dim", cfg["hidden_size"] // heads))
    w.add_rope_freq_base(cfg.get("rope_theta", rope.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    if os.path.exists(os.path.join(args.from_dir, "tokenizer.json")):
        add_tokenizer(w, args.from_dir)

    def add(name, data):
        kind = "f32" if data.ndim == 1 else (MIXED.get(name.split(".", 2)[-1] if name.startswith("blk.") else name, "f32")
                                             if args.types == "mixed" else args.types)
        if kind == "f32":
            w.add_tensor(name, np.ascontiguousarray(data))
        elif kind == "f16":
            w.add_tensor(name, data.astype(np.float16))
        else:
            qtype = {"bf16": gguf.GGMLQuantizationType.BF16, "q8_0": gguf.GGMLQuantizationType.Q8_0,
                     "q4_0": gguf.GGMLQuantizationType.Q4_0, "q4_1": gguf.GGMLQuantizationType.Q4_1}[kind]
            q = gguf.quants.quantize(np.ascontiguousarray(data), qtype)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)

    add("token_embd.weight", tensors["model.embed_tokens.weight"])
    for l in range(cfg["num_hidden_layers"]):
        for hf, ll in LAYER_NAMES.items():
            key = f"model.layers.{l}.{hf}"
            if key not in tensors:
                continue
            data = tensors[key]
            if arch == "llama" and ll == "attn_q.weight":
                data = permute(data, heads)
            elif arch == "llama" and ll == "attn_k.weight":
                data = permute(data, kv_heads)
            add(f"blk.{l}.{ll}", data)
    add("output_norm.weight", tensors["model.norm.weight"])
    if not cfg.get("tie_word_embeddings", False):
        add("output.weight", tensors["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"make_gguf.py: wrote {args.out} ({arch}, {args.types}) from {args.from_dir}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="GGUF file to write")
    ap.add_argument("--from", dest="from_dir", help="Hugging Face model folder to convert (instead of random weights)")
    ap.add_argument("--types", choices=["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "mixed"], default="f32",
                    help="with --from: ggml type of the matrices (norms and biases stay f32)")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32", help="type of the 2-D weights (norms and biases stay f32)")
    ap.add_argument("--layers", type=int, default=LAYERS, help="decoder layers (default: the model's 24)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.from_dir:
        return convert(args)
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
