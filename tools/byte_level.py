# SPDX-License-Identifier: MIT
"""GPT-2's byte-level alphabet, shared by the fixture and GGUF writers (standard library only)."""


def bytes_to_unicode():
    """GPT-2's byte -> printable character table, which byte-level BPE vocabularies are written in."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) \
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table
