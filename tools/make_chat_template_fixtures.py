#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Render real chat templates with transformers, for servelab's template interpreter to match.

Why this exists: servelab executes a model's Jinja chat template itself
(engine/template/) and must produce the text transformers' apply_chat_template
produces, byte for byte, or refuse the template by name. This script takes
real templates, renders each with apply_chat_template for a fixed set of
conversations, and writes what it got:

  <out>/templates/NAME.jinja   the template sources, copied unchanged
  <out>/renders.json           per template, per conversation and
                               add_generation_prompt: the text, or the error
                               jinja2 raised (raise_exception, an undefined value)

Templates come from two places: llama.cpp's models/templates/*.jinja (the
templates it tests its own chat code with; its tree is in the llama-cpp-python
sdist on PyPI) and the chat templates of the tokenizers tests/fixtures/tokenizer/
ships, plus 40 small seeded random templates (servelab-whitespace-NN) that
mix whitespace with every tag and whitespace-control form. The tokenizer that renders them is tests/fixtures/tokenizer/llama3-style
(its special tokens are what bos_token/eos_token read). strftime_now() is fixed
to 2026-01-15 12:00:00 so the renders do not depend on the day.

Usage:
  python3 -m venv /tmp/ct-venv && /tmp/ct-venv/bin/pip install transformers==5.24.0 tokenizers==0.23.3 jinja2==3.1.6
  /tmp/ct-venv/bin/pip download --no-deps --no-binary :all: -d /tmp llama-cpp-python==0.3.36
  tar xzf /tmp/llama_cpp_python-0.3.36.tar.gz -C /tmp
  HF_HUB_OFFLINE=1 /tmp/ct-venv/bin/python tools/make_chat_template_fixtures.py \\
      --llama-cpp /tmp/llama_cpp_python-0.3.36/vendor/llama.cpp --out tests/fixtures/chat_templates
"""

import argparse
import datetime
import glob
import json
import os
import platform
import random
import shutil

import jinja2
import tokenizers
import transformers
import transformers.utils.chat_template_utils as chat_template_utils
from transformers import PreTrainedTokenizerFast

FIXED_NOW = datetime.datetime(2026, 1, 15, 12, 0, 0)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

# name -> (messages, tools)
CONVERSATIONS = {
    "user": ([{"role": "user", "content": "Hello!"}], None),
    "system_user": (
        [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is a KV cache?"},
        ],
        None,
    ),
    "multi_turn": (
        [
            {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
        ],
        None,
    ),
    "unicode": ([{"role": "user", "content": "  Grüße, 世界! 🙂\n\ttabs and 'quotes' \"too\"  "}], None),
    "reasoning": (
        [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Add the two numbers."},
            {"role": "user", "content": "And 3+3?"},
        ],
        None,
    ),
    "tools": ([{"role": "user", "content": "What is the weather in Paris?"}], [WEATHER_TOOL]),
    "tool_call": (
        [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 18}"},
        ],
        [WEATHER_TOOL],
    ),
}


def whitespace_templates(count, seed=1234):
    """Small random templates that mix text whitespace with every tag and whitespace-control form.

    jinja2's trim_blocks/lstrip_blocks rules have corner cases (a tag after a
    tag, `+` and `-` on either side, comments, a final newline) that real
    templates only partly cover; these cover them, seeded, so the set is fixed.
    """
    rng = random.Random(seed)
    texts = ["", " ", "  ", "\n", " \n ", "\t", "x", "\n\n  ", "y \n", "\n    z\n"]

    def tag(open_, body, close):
        left = rng.choice(["", "-", "+"]) if open_ != "{{" else rng.choice(["", "-"])
        right = rng.choice(["", "-", "+"]) if close != "}}" else rng.choice(["", "-"])
        return f"{open_}{left} {body} {right}{close}"

    def block(depth):
        out = []
        for _ in range(rng.randint(1, 4)):
            out.append(rng.choice(texts))
            kind = rng.choice(["var", "comment", "set", "if", "for"] if depth < 2 else ["var", "comment", "set"])
            if kind == "var":
                out.append(tag("{{", rng.choice(["'v'", "messages[0].role", "1 + 1"]), "}}"))
            elif kind == "comment":
                out.append(tag("{#", "note", "#}"))
            elif kind == "set":
                out.append(tag("{%", "set a = 1", "%}"))
            elif kind == "if":
                out += [tag("{%", "if true", "%}"), block(depth + 1), tag("{%", "else", "%}"), block(depth + 1),
                        tag("{%", "endif", "%}")]
            else:
                out += [tag("{%", "for m in messages", "%}"), block(depth + 1), tag("{%", "endfor", "%}")]
            out.append(rng.choice(texts))
        return "".join(out)

    return {f"servelab-whitespace-{i:02d}": block(0) + rng.choice(["", "\n", "\n\n"]) for i in range(count)}


class FixedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source tree (has models/templates/)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tok_dir = os.path.join(root, "tests", "fixtures", "tokenizer")

    sources = {}
    for path in sorted(glob.glob(os.path.join(args.llama_cpp, "models", "templates", "*.jinja"))):
        sources[os.path.basename(path)[: -len(".jinja")]] = open(path, encoding="utf-8").read()
    if not sources:
        raise SystemExit(f"no templates under {args.llama_cpp}/models/templates")
    for name in ("qwen2-style", "llama3-style"):
        cfg = json.load(open(os.path.join(tok_dir, name, "tokenizer_config.json"), encoding="utf-8"))
        sources[f"servelab-{name}"] = cfg["chat_template"]
    sources["servelab-qwen2-tiny-chat"] = open(
        os.path.join(tok_dir, "qwen2-tiny-chat", "chat_template.jinja"), encoding="utf-8"
    ).read()
    synthetic = whitespace_templates(40)
    sources.update(synthetic)

    chat_template_utils.datetime = FixedDatetime  # what strftime_now() reads
    tokenizer = PreTrainedTokenizerFast.from_pretrained(os.path.join(tok_dir, "llama3-style"))

    template_dir = os.path.join(args.out, "templates")
    shutil.rmtree(template_dir, ignore_errors=True)
    os.makedirs(template_dir)
    templates = {}
    for name, source in sources.items():
        with open(os.path.join(template_dir, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(source)
        renders = []
        for conv_name, (messages, tools) in CONVERSATIONS.items():
            if name in synthetic and conv_name != "multi_turn":
                continue  # one conversation is enough to test whitespace
            for add_generation_prompt in (False, True):
                entry = {"conversation": conv_name, "add_generation_prompt": add_generation_prompt}
                try:
                    entry["text"] = tokenizer.apply_chat_template(
                        json.loads(json.dumps(messages)),
                        tools=tools,
                        chat_template=source,
                        add_generation_prompt=add_generation_prompt,
                        tokenize=False,
                    )
                except Exception as e:  # jinja2's errors and raise_exception's TemplateError
                    entry["error"] = f"{type(e).__name__}: {e}"
                renders.append(entry)
        templates[name] = renders

    out = {
        "provenance": {
            "tool": "tools/make_chat_template_fixtures.py",
            "rendered_by": "transformers PreTrainedTokenizerFast.apply_chat_template(tokenize=False)",
            "transformers": transformers.__version__,
            "jinja2": jinja2.__version__,
            "tokenizers": tokenizers.__version__,
            "python": platform.python_version(),
            "llama_cpp_templates": "llama-cpp-python 0.3.36 sdist, vendor/llama.cpp/models/templates",
            "strftime_now": FIXED_NOW.isoformat(),
        },
        "special_tokens": tokenizer.special_tokens_map,
        "conversations": {k: {"messages": m, "tools": t} for k, (m, t) in CONVERSATIONS.items()},
        "templates": templates,
    }
    with open(os.path.join(args.out, "renders.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=False)
        f.write("\n")
    n_ok = sum(1 for r in templates.values() for e in r if "text" in e)
    print(f"{len(templates)} templates, {n_ok} renders, {sum(len(r) for r in templates.values()) - n_ok} errors")


if __name__ == "__main__":
    main()
