"""Ordinal references: "the first caption", "caption 2", "image B", "the latter"."""

from __future__ import annotations

import re

from .context import Ctx, Resolution
from .labels import used_as_word
from .negation import rejected
from .vocabulary import ORDINAL_ALT, ORDINALS, REF_NOUNS

_ORDINAL_RE = re.compile(rf"\b(?P<ord>{ORDINAL_ALT})\s+(?:one|answer|text|{REF_NOUNS})\b", re.I)
_REF_RE = re.compile(
    rf"\b(?:{REF_NOUNS})\s*(?:#|no\.|number)?\s*[(\[]?(?P<ref>[^\W\d_]|\d{{1,2}})[)\]]?(?![\w'])", re.I
)
_FORMER_RE = re.compile(r"\bthe\s+(?P<which>former|latter)\b", re.I)


def ordinal_refs(s: str, ctx: Ctx) -> Resolution:
    n = len(ctx.options)
    found: dict[int, str] = {}

    def add(index: int | None, m: re.Match[str]) -> None:
        if index is not None and 0 <= index < n and not rejected(s, m.start(), m.end()):
            found.setdefault(index, m.group())

    for m in _ORDINAL_RE.finditer(s):
        word = m.group("ord").casefold()
        add(n - 1 if word == "last" else ORDINALS[word], m)
    for m in _REF_RE.finditer(s):
        ref = m.group("ref")
        if ref.islower() and used_as_word(ref, s[m.end() :]):
            continue  # "in the image a dog sleeps"
        if ref.casefold() in ctx.label_index:
            add(ctx.label_index[ref.casefold()], m)
        elif ref.isdecimal():
            add(int(ref) - 1, m)  # "caption 1" is 1-based when labels are not digits
        elif ref.isascii() and ref.isalpha():
            add(ord(ref.casefold()) - ord("a"), m)  # "caption B" with digit labels
    if n == 2:
        for m in _FORMER_RE.finditer(s):
            add(0 if m.group("which").casefold() == "former" else 1, m)
    if len(found) == 1:
        index, text = found.popitem()
        return index, "ok", text
    if len(found) > 1:
        return None, "ambiguous", "; ".join(found.values())
    return None
