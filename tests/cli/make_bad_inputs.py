#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the broken model folders and files the CLI bad-input tests feed to servelab.

Usage: make_bad_inputs.py FIXTURES_DIR OUT_DIR

Each case starts from a committed fixture (tests/fixtures) and breaks one
thing, so the test that uses it shows exactly one error. Standard library
only; large inputs (100 000 levels of nesting) are made here rather than
committed.
"""
import json
import os
import shutil
import struct
import sys

fixtures, out = sys.argv[1], sys.argv[2]
DEEP = 100_000  # levels of nesting: enough to overflow any recursive walk of the parsed JSON


def fresh(name):
    path = os.path.join(out, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def model_copy(name, fixture):
    """A copy of a fixture model folder (weights as symlinks, the small files copied)."""
    path = fresh(name)
    src = os.path.join(fixtures, fixture)
    for f in os.listdir(src):
        if f.endswith(".safetensors"):
            os.symlink(os.path.join(src, f), os.path.join(path, f))
        else:
            shutil.copy(os.path.join(src, f), path)
    return path


def edit_json(path, change):
    with open(path) as f:
        j = json.load(f)
    change(j)
    with open(path, "w") as f:
        json.dump(j, f, indent=1)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_safetensors(path, header_text, data):
    header_text = header_text.encode() if isinstance(header_text, str) else header_text
    if os.path.islink(path):
        os.unlink(path)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_text)) + header_text + data)


def broken_config(name, change):
    path = model_copy(name, "qwen2-tiny")
    edit_json(os.path.join(path, "config.json"), change)


# config.json
deep = model_copy("config-deep", "qwen2-tiny")
with open(os.path.join(deep, "config.json"), "w") as f:
    f.write("[" * DEEP + "]" * DEEP)
broken_config("config-hidden-2p32", lambda j: j.update(hidden_size=2**32 + 64))
broken_config("config-vocab-1e12", lambda j: j.update(vocab_size=10**12))
broken_config("config-qdim-overflow", lambda j: j.update(num_attention_heads=65536, num_key_value_heads=1, head_dim=65536))
broken_config("config-sliding-window", lambda j: j.update(use_sliding_window=True, sliding_window=64))
broken_config("config-gelu", lambda j: j.update(hidden_act="gelu_pytorch_tanh"))
llama = model_copy("llama-attention-bias", "llama-tiny")
edit_json(os.path.join(llama, "config.json"), lambda j: j.update(attention_bias=True))
llama = model_copy("llama-mlp-bias", "llama-tiny")
edit_json(os.path.join(llama, "config.json"), lambda j: j.update(mlp_bias=True))

# safetensors files
st_name = "model.safetensors"
header, data = read_safetensors(os.path.join(fixtures, "qwen2-tiny", st_name))

path = model_copy("st-deep-shape", "qwen2-tiny")
write_safetensors(os.path.join(path, st_name),
                  '{"x": {"dtype": "F32", "shape": ' + "[" * DEEP + "]" * DEEP + ', "data_offsets": [0, 0]}}', b"")

path = model_copy("st-shape-overflow", "qwen2-tiny")
h = dict(header)
h["model.norm.weight"] = dict(h["model.norm.weight"], shape=[2**62, 4], data_offsets=[0, 0])  # 2^64 floats: 0 bytes mod 2^64
write_safetensors(os.path.join(path, st_name), json.dumps(h), data)

path = model_copy("st-overlap", "qwen2-tiny")
h = json.loads(json.dumps(header))
h["model.layers.1.input_layernorm.weight"]["data_offsets"] = h["model.layers.0.input_layernorm.weight"]["data_offsets"]
write_safetensors(os.path.join(path, st_name), json.dumps(h), data)

path = model_copy("st-nan", "qwen2-tiny")
begin = header["model.norm.weight"]["data_offsets"][0]
nan_data = bytearray(data)
nan_data[begin + 4 * 3:begin + 4 * 4] = struct.pack("<f", float("nan"))
write_safetensors(os.path.join(path, st_name), json.dumps(header), bytes(nan_data))

path = model_copy("st-unused-tensor", "qwen2-tiny")
h = dict(header)
h["model.layers.0.self_attn.o_proj.bias"] = {"dtype": "F32", "shape": [64], "data_offsets": [len(data), len(data) + 256]}
write_safetensors(os.path.join(path, st_name), json.dumps(h), data + bytes(256))

for name, shard in (("index-parent-dir", "../qwen2-tiny/model.safetensors"), ("index-absolute", "/etc/passwd")):
    path = model_copy(name, "llama-tiny")
    edit_json(os.path.join(path, "model.safetensors.index.json"),
              lambda j: j["weight_map"].update({"model.norm.weight": shard}))

# tokenizer.json files (used with --tokenizer)
def broken_tokenizer(name, fixture, change):
    path = fresh(name)
    src = os.path.join(fixtures, "tokenizer", fixture, "tokenizer.json")
    shutil.copy(src, path)
    edit_json(os.path.join(path, "tokenizer.json"), change)


def set_added_id(new_id):
    return lambda j: j["added_tokens"][-1].update(id=new_id)


broken_tokenizer("tok-added-id-2p31", "qwen2-style", set_added_id(2**31))
broken_tokenizer("tok-added-id-2p31m1", "qwen2-style", set_added_id(2**31 - 1))
broken_tokenizer("tok-post-processor-id-2p32", "llama3-style",
                 lambda j: j["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"].update(ids=[2**32]))
path = fresh("tok-deep-merges")
with open(os.path.join(fixtures, "tokenizer", "qwen2-style", "tokenizer.json")) as f:
    j = json.load(f)
j["model"]["merges"] = "@@DEEP@@"
with open(os.path.join(path, "tokenizer.json"), "w") as f:
    f.write(json.dumps(j).replace('"@@DEEP@@"', "[" * DEEP + "]" * DEEP))

# a folder where a text file is expected
os.makedirs(os.path.join(out, "a-folder"), exist_ok=True)
