#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Build the tokenizer fixtures under tests/fixtures/tokenizer/ with Hugging Face tokenizers.

Why this exists: servelab's C++ tokenizer (engine/tokenizer/) reads a Hugging
Face tokenizer.json and must produce exactly the ids that `tokenizers` produces,
decode them to the same text, and render chat templates the way transformers'
`apply_chat_template` does. Real tokenizers cannot be downloaded here, so this
script trains small byte-level BPE tokenizers, each configured the way a real
family is (pre-tokenizer regex, normalizer, post-processor, special tokens,
chat template), and records what the Python libraries do with them.

Outputs (all rewritten on every run):
  training_text.txt    the text the tokenizers are trained on (also the benchmark text);
                       built from --seeds and README.md only with --rebuild-text
  qwen2-style/         NFC + Qwen2 split regex, merges in the legacy "a b" string form,
                       ChatML template (Qwen2.5-Instruct style) inline in tokenizer_config.json
  llama3-style/        Llama 3 split regex (digits in groups of 3), ignore_merges,
                       TemplateProcessing that adds <|begin_of_text|>, Llama 3 chat template
  gpt2-style/          ByteLevel pre-tokenizer with its built-in GPT-2 regex and
                       add_prefix_space=true, merges in the ["a", "b"] list form
  missing-bytes/       SmolLM2's pipeline (digits one by one, then GPT-2's regex) with the 21
                       single-byte tokens SmolLM2's vocabulary lacks removed, and its own
                       reference.json: ids and decoded text of strings that hold those bytes
                       (--missing-bytes-only rewrites just this folder; it needs tokenizers only)
  qwen2-tiny-chat/     a tiny random-weight Qwen2 checkpoint (vocab 320) with a 320-token
                       tokenizer whose special tokens fit the model, a ChatML template
                       written by transformers' save_pretrained, eos ids in
                       generation_config.json, and reference.json: chat -> prompt ids ->
                       greedy output ids -> output text, all computed by transformers
  reference.json       per tokenizer: ids of every corpus string (with and without
                       special tokens), decoded text, pieces, hand-written decode cases,
                       and rendered chat conversations

Usage (deterministic: rerunning with the same package versions rewrites identical files):
  HF_HUB_OFFLINE=1 /tmp/hfenv/bin/python tools/make_tokenizer_fixtures.py --out tests/fixtures/tokenizer
"""

import argparse
import glob
import json
import os
import random
import shutil
import sys
import unicodedata

from byte_level import bytes_to_unicode

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import AutoTokenizer, GenerationConfig, Qwen2ForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (weight init shared with the model fixtures)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The split regexes of the released tokenizer.json files, verbatim.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# ChatML as Qwen2.5-Instruct writes it: a default system prompt, and a tools branch
# (servelab does not render tools; it is here so the template looks like the real one).
QWEN25_STYLE_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first)"
    " or (message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)

# ChatML as Qwen2-Instruct writes it: a different default system prompt, one line.
QWEN2_STYLE_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Meta-Llama-3-8B-Instruct's template.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]

CONVERSATIONS = [
    {"messages": [{"role": "user", "content": "안녕하세요! KV cache가 뭐예요?"}], "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "You are a terse assistant."},
                  {"role": "user", "content": "What is TTFT?"}], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello! 👋 무엇을 도와드릴까요?"},
                  {"role": "user", "content": "  Explain prefill vs decode.  \n"}], "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "Answer in Korean."},
                  {"role": "user", "content": "Why is decode memory-bound?"},
                  {"role": "assistant", "content": "디코드는 토큰마다 모든 가중치를 읽기 때문입니다."}],
     "add_generation_prompt": False},
    {"messages": [{"role": "user", "content": "print('<|im_end|>') and <|eot_id|> are just text here?"}],
     "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "first"},
                  {"role": "system", "content": "a late system message"},
                  {"role": "user", "content": "second\n\nwith blank lines"}], "add_generation_prompt": True},
]

HANDWRITTEN = [
    "", " ", "Hello, world!", "Hello world", "  leading spaces", "trailing spaces   ",
    "multiple   spaces   between words", "tabs\tand\nnewlines\r\nand CRLF", "\n\n\n", " \n \n",
    "I'M don't you'll we've THEY'RE it's she'd", "numbers 1234567890 3.14159 1,000,000 0x1F",
    "Korean 안녕하세요 KV 캐시는 메모리를 많이 사용합니다.", "emoji 😀👍🏽👨‍👩‍👧‍👦 🇰🇷 ❤️",
    "CJK 中文字符 日本語のテキスト", "code: for (int i = 0; i < n; ++i) { x[i] += y[i]; }",
    "decomposed Hangul " + unicodedata.normalize("NFD", "한국어 토큰"), "e\u0301 cafe\u0301 naïve Å",
    "nbsp\u00a0and\u3000ideographic\u2003em\u2009thin", "zero\u200bwidth\u200djoiner", "next\u0085line",
    "line\u2028separator\u2029para", "<|im_start|>user\nhi<|im_end|>\n", "<|endoftext|><|endoftext|>x",
    "partial <|im_start special", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "math ∑ ∫ ≈ √ π ² ½ Ⅻ", "Arabic مرحبا ١٢٣ Hebrew שלום", "Thai สวัสดี Devanagari नमस्ते",
    "astral 𝕏 𝒜 🀄 𐍈", "mixed 한글English123한글", "a" * 300, " " * 50 + "x", "1" * 40,
    "\t\t\tindented\n    four spaces", "'s 's 'S 'll 'LL", "ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ",
    "trailing newline\n", "\r\r\n\n\r", "!!!???...", " ?! ,. ;:",
]

# Code points drawn for the random strings: chosen to hit every branch of the split
# regexes (letters, numbers, punctuation, each kind of whitespace) and of UTF-8 (1-4 bytes).
RANDOM_POOL = (
    [chr(c) for c in range(0x20, 0x7F)] * 3
    + list(" \t\n\r\u000b\u000c\u001c\u001f\u0085\u00a0\u1680\u180e\u2000\u2009\u200b\u2028\u2029\u202f\u205f\u3000")
    + [chr(c) for c in range(0xAC00, 0xAC00 + 64)] + [chr(c) for c in range(0x1100, 0x1100 + 19)]
    + [chr(c) for c in range(0x1161, 0x1161 + 21)] + [chr(c) for c in range(0x0300, 0x0310)]
    + list("éüßñçØłŒ中文字日本語カタカナ١٢٣٤²³½¼ⅫⅣ①⑵") + ["😀", "👍", "🏽", "\u200d", "🇰", "🇷", "𝕏", "🀄", "𐍈"]
    + list("'''sStTdDmMlLvVrReE")
)

CORPUS_PARAGRAPHS = 60  # paragraphs of the training text added to the corpus
RANDOM_STRINGS = 80


def byte_level_bpe(pattern, normalizer, vocab_size, specials, ignore_merges, text_files, use_builtin_regex=False):
    """Train a byte-level BPE on `text_files`; special tokens are added after training (ids at the end, as in Qwen2)."""
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    if use_builtin_regex:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, min_frequency=2)
    tok.train(text_files, trainer)
    tok.add_special_tokens(specials)
    return tok


def write_tokenizer_json(tok, path, legacy_merges):
    """Write tokenizer.json; with legacy_merges the merges become "a b" strings, as in older releases."""
    doc = json.loads(tok.to_str())
    if legacy_merges:
        doc["model"]["merges"] = [" ".join(pair) for pair in doc["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=2)
        f.write("\n")
    reloaded = Tokenizer.from_file(path)
    assert reloaded.to_str() == tok.to_str(), f"{path}: does not reload to the same tokenizer"
    return reloaded


def write_tokenizer_config(out_dir, template, bos, eos):
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 32768,
           "clean_up_tokenization_spaces": False, "eos_token": eos}
    if bos is not None:
        cfg["bos_token"] = bos
    if template is not None:
        cfg["chat_template"] = template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")


def random_strings(seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(RANDOM_POOL) for _ in range(rng.randint(1, 40))) for _ in range(RANDOM_STRINGS)]


def corpus(training_text):
    paragraphs = [p for p in training_text.split("\n\n") if p.strip()]
    step = max(1, len(paragraphs) // CORPUS_PARAGRAPHS)
    return HANDWRITTEN + paragraphs[::step][:CORPUS_PARAGRAPHS] + random_strings(4)


def byte_token_ids(tok, data):
    table = bytes_to_unicode()
    return [tok.token_to_id(table[b]) for b in data]


def decode_cases(tok, specials):
    """Id sequences of single-byte tokens whose decoding has edge cases: characters cut short, or cut by a special token."""
    han = byte_token_ids(tok, "한".encode())  # 3 bytes
    emoji = byte_token_ids(tok, "😀".encode())  # 4 bytes
    special = tok.token_to_id(specials[-1])
    zero = byte_token_ids(tok, b"\x00")
    invalid = byte_token_ids(tok, b"\xff\xc0\xed\xa0\x80")  # never valid UTF-8; a surrogate's encoding
    cases = [han, han[:2], emoji[:3] + han, han[:2] + [special] + han[2:], [special] + han, emoji[:1] + emoji[:1] + zero,
             invalid + han, emoji[:2] + emoji]
    return [{"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
             "text_skip_special": tok.decode(ids, skip_special_tokens=True)} for ids in cases]


def record(tok, strings, specials):
    entries = []
    for s in strings:
        plain = tok.encode(s, add_special_tokens=False)
        with_special = tok.encode(s, add_special_tokens=True)
        entries.append({"text": s, "nfc": unicodedata.normalize("NFC", s), "ids": plain.ids, "tokens": plain.tokens, "ids_with_special": with_special.ids,
                        "decoded": tok.decode(plain.ids, skip_special_tokens=False),
                        "decoded_skip_special": tok.decode(plain.ids, skip_special_tokens=True)})
    return {"vocab_size": tok.get_vocab_size(), "corpus": entries, "decode_cases": decode_cases(tok, specials)}


def record_chat(out_dir):
    hf = AutoTokenizer.from_pretrained(out_dir)
    rendered = []
    for conv in CONVERSATIONS:
        text = hf.apply_chat_template(conv["messages"], tokenize=False,
                                      add_generation_prompt=conv["add_generation_prompt"])
        ids = hf.apply_chat_template(conv["messages"], tokenize=True, return_dict=False,
                                     add_generation_prompt=conv["add_generation_prompt"])
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        rendered.append(dict(conv, text=text, ids=list(ids)))
    return rendered


def make_tiny_chat_model(out_root, training_files):
    """A tiny Qwen2 whose vocabulary (320) holds a byte-level tokenizer with its special tokens."""
    vocab = 320
    name = "qwen2-tiny-chat"
    out_dir = os.path.join(out_root, name)
    tok = byte_level_bpe(QWEN2_PATTERN, normalizers.NFC(), vocab - len(CHATML_SPECIALS), CHATML_SPECIALS, False,
                         training_files)
    assert tok.get_vocab_size() == vocab, tok.get_vocab_size()
    eos = [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")]
    messages = [{"role": "user", "content": "KV 캐시가 뭐예요?"}]

    config = make_fixtures.qwen2_config()
    config.vocab_size = vocab
    config.max_position_embeddings = 256
    for attempt in range(make_fixtures.MAX_SEED_TRIES):
        seed = make_fixtures.FIRST_SEED + attempt
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        model = make_fixtures.build_model(Qwen2ForCausalLM, config, gen)
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        make_fixtures.save_model(model, out_dir)
        write_tokenizer_json(tok, os.path.join(out_dir, "tokenizer.json"), legacy_merges=False)
        write_tokenizer_config(out_dir, QWEN2_STYLE_TEMPLATE, None, "<|im_end|>")
        hf = AutoTokenizer.from_pretrained(out_dir)
        hf.save_pretrained(out_dir)  # transformers' own layout (the template may move to chat_template.jinja)
        hf = AutoTokenizer.from_pretrained(out_dir)
        prompt_text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = hf(prompt_text, add_special_tokens=False)["input_ids"]
        # Greedy with a margin check at every step, then the same run through generate().
        ids, margin = list(prompt_ids), float("inf")
        with torch.no_grad():
            for _ in range(16):
                logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
                margin = min(margin, make_fixtures.top2_margin(logits))
                ids.append(int(torch.argmax(logits)))
                if ids[-1] in eos:
                    break
            gcfg = GenerationConfig(do_sample=False, max_new_tokens=16, eos_token_id=eos, pad_token_id=eos[0])
            out = model.generate(torch.tensor([prompt_ids]), generation_config=gcfg)[0, len(prompt_ids):].tolist()
        print(f"{name}: seed {seed} margin {margin:.6g}, {len(out)} new tokens")
        if margin >= make_fixtures.MIN_MARGIN and out == ids[len(prompt_ids):] and len(out) >= 8:
            break
    else:
        sys.exit(f"no seed with margin >= {make_fixtures.MIN_MARGIN} for {name}")
    model.generation_config = GenerationConfig(eos_token_id=eos)
    model.generation_config.save_pretrained(out_dir)
    doc = {"model": name, "seed": seed, "messages": messages, "prompt_text": prompt_text, "prompt_ids": prompt_ids,
           "output_ids": out, "output_text": hf.decode(out, skip_special_tokens=True), "eos_token_ids": eos,
           "min_greedy_margin": margin}
    with open(os.path.join(out_dir, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for fn in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, fn), 0o644)


# The bytes SmolLM2-135M's vocabulary has no single-byte token for; 0xC0, 0xC1 and 0xF5-0xFF never occur in UTF-8.
SMOLLM2_MISSING_BYTES = [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1] + list(range(0xF5, 0x100))
# Strings that hold the missing bytes (alone, between letters that merge, inside words and numbers) and ones that do not.
MISSING_BYTE_STRINGS = [
    "\x04", "a\x04b", "ab\x04ab", "\x06\x13\x14\x16\x1d", "the\x14 KV cache", "12\x1d34", " \x04 ", "\x04\x04x",
    "<|im_start|>\x06<|im_end|>", "plain text with no missing byte", "tabs\tand\nnewlines", "\x1dHello\x1d",
    "prefill\x13decode\x16", "Korean 안녕\x04하세요", "x\x05y\x07z",
]


def make_missing_bytes(out_root, training_files):
    """A tokenizer whose vocabulary lacks SmolLM2's 21 byte tokens: such a byte is dropped from the text."""
    tok = byte_level_bpe(None, None, 600, [], False, training_files, use_builtin_regex=True)
    doc = json.loads(tok.to_str())
    table = bytes_to_unicode()
    missing = {table[b] for b in SMOLLM2_MISSING_BYTES}
    # A token that holds a missing byte goes too, and so does every merge that makes or uses one.
    kept = [t for t, _ in sorted(doc["model"]["vocab"].items(), key=lambda kv: kv[1]) if not (set(t) & missing)]
    doc["model"]["vocab"] = {t: i for i, t in enumerate(kept)}
    doc["model"]["merges"] = [m for m in doc["model"]["merges"] if not (set(m[0] + m[1]) & missing)]
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    tok = Tokenizer.from_str(json.dumps(doc))
    tok.add_special_tokens(CHATML_SPECIALS)
    out_dir = os.path.join(out_root, "missing-bytes")
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    tok = write_tokenizer_json(tok, os.path.join(out_dir, "tokenizer.json"), legacy_merges=False)
    assert all(tok.token_to_id(c) is None for c in missing)
    entries = []
    for s in MISSING_BYTE_STRINGS:
        ids = tok.encode(s, add_special_tokens=False).ids
        entries.append({"text": s, "ids": ids, "tokens": [tok.id_to_token(i) for i in ids],
                        "decoded": tok.decode(ids, skip_special_tokens=False)})
    ref = {"generated_by": "tools/make_tokenizer_fixtures.py", "tokenizers": tokenizers.__version__,
           "missing_bytes": SMOLLM2_MISSING_BYTES, "vocab_size": tok.get_vocab_size(), "corpus": entries}
    with open(os.path.join(out_dir, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"missing-bytes: vocab {tok.get_vocab_size()}, {len(entries)} strings")


def build_training_text(seeds_dir):
    parts = []
    for path in sorted(glob.glob(os.path.join(seeds_dir, "*.txt"))) + [os.path.join(REPO, "README.md")]:
        with open(path, encoding="utf-8") as f:
            parts.append(f.read().strip())
    if len(parts) < 2:
        sys.exit(f"no seed texts found in {seeds_dir}")
    return "\n\n".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "tokenizer"))
    ap.add_argument("--seeds", default=os.path.join(os.path.dirname(REPO), "shared", "seeds"),
                    help="folder of seed articles (*.txt), read only with --rebuild-text")
    ap.add_argument("--rebuild-text", action="store_true",
                    help="rebuild training_text.txt from --seeds and README.md instead of reusing it")
    ap.add_argument("--missing-bytes-only", action="store_true",
                    help="rewrite only missing-bytes/ (from the committed training_text.txt)")
    args = ap.parse_args()
    if args.missing_bytes_only:
        make_missing_bytes(args.out, [os.path.join(args.out, "training_text.txt")])
        return
    make_fixtures.setup_torch()
    print(f"python {sys.version.split()[0]}, tokenizers {tokenizers.__version__}, "
          f"transformers {transformers.__version__}, torch {torch.__version__}")
    os.makedirs(args.out, exist_ok=True)
    text_path = os.path.join(args.out, "training_text.txt")
    if args.rebuild_text or not os.path.exists(text_path):
        with open(text_path, "w", encoding="utf-8") as f:
            f.write(build_training_text(args.seeds))
    with open(text_path, encoding="utf-8") as f:
        training_text = f.read()
    files = [text_path]
    strings = corpus(training_text)

    families = {
        "qwen2-style": dict(tok=byte_level_bpe(QWEN2_PATTERN, normalizers.NFC(), 1024, CHATML_SPECIALS, False, files),
                            legacy=True, template=QWEN25_STYLE_TEMPLATE, bos=None, eos="<|im_end|>",
                            specials=CHATML_SPECIALS),
        "llama3-style": dict(tok=byte_level_bpe(LLAMA3_PATTERN, None, 1024, LLAMA3_SPECIALS, True, files),
                             legacy=False, template=LLAMA3_TEMPLATE, bos="<|begin_of_text|>", eos="<|eot_id|>",
                             specials=LLAMA3_SPECIALS),
        "gpt2-style": dict(tok=byte_level_bpe(None, None, 512, ["<|endoftext|>"], False, files, use_builtin_regex=True),
                           legacy=False, template=None, bos=None, eos="<|endoftext|>", specials=["<|endoftext|>"]),
    }
    # Llama 3 adds <|begin_of_text|> to every encoding with special tokens.
    llama = families["llama3-style"]["tok"]
    llama.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", llama.token_to_id("<|begin_of_text|>"))]),
    ])

    reference = {"generated_by": "tools/make_tokenizer_fixtures.py", "tokenizers": tokenizers.__version__,
                 "transformers": transformers.__version__, "tokenizers_reference": {}}
    for name, fam in families.items():
        out_dir = os.path.join(args.out, name)
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.makedirs(out_dir)
        tok = write_tokenizer_json(fam["tok"], os.path.join(out_dir, "tokenizer.json"), fam["legacy"])
        write_tokenizer_config(out_dir, fam["template"], fam["bos"], fam["eos"])
        entry = record(tok, strings, fam["specials"])
        if fam["template"] is not None:
            entry["chat"] = record_chat(out_dir)
        reference["tokenizers_reference"][name] = entry
        print(f"{name}: vocab {tok.get_vocab_size()}, {len(strings)} corpus strings")

    with open(os.path.join(args.out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    make_tiny_chat_model(args.out, files)
    make_missing_bytes(args.out, files)


if __name__ == "__main__":
    main()
