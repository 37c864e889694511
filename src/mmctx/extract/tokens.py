"""Words and numbers with offsets (number words mapped to digits), and option mentions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .vocabulary import NUMBER_WORDS, ONE_AS_PRONOUN_AFTER, TENS, UNITS

_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")


@dataclass(frozen=True)
class Tok:
    text: str
    start: int  # character offsets
    end: int


def tokenize(s: str) -> list[Tok]:
    raw = [(m.group().casefold(), m.start(), m.end()) for m in _WORD.finditer(s)]
    out: list[Tok] = []
    i = 0
    while i < len(raw):
        word, start, end = raw[i]
        if word in TENS and i + 1 < len(raw):
            nxt, nstart, nend = raw[i + 1]
            if nxt in UNITS and 0 < UNITS[nxt] < 10 and s[end:nstart].strip() in ("", "-"):
                out.append(Tok(str(TENS[word] + UNITS[nxt]), start, nend))
                i += 2
                continue
        if word in NUMBER_WORDS and not (word == "one" and any(t.text in ONE_AS_PRONOUN_AFTER for t in out[-2:])):
            word = str(NUMBER_WORDS[word])
        out.append(Tok(word, start, end))
        i += 1
    return out


@dataclass(frozen=True)
class Hit:
    """An option's text found in a response, as token positions (end exclusive)."""

    option: int
    start: int
    end: int


def raw_option_hits(toks: Sequence[Tok], option_tokens: Sequence[tuple[str, ...]]) -> list[Hit]:
    """Every mention of an option's text; of overlapping mentions only the longest counts."""
    words = [t.text for t in toks]
    hits = [
        Hit(i, p, p + len(seq))
        for i, seq in enumerate(option_tokens)
        if seq
        for p in range(len(words) - len(seq) + 1)
        if words[p] == seq[0] and tuple(words[p : p + len(seq)]) == seq
    ]
    # "dark red" mentions "red" too; only the longest option covering a span counts.
    # A covering hit starts at most (longest option - 1) tokens earlier, so look only there.
    by_start: dict[int, list[Hit]] = {}
    for h in hits:
        by_start.setdefault(h.start, []).append(h)
    longest = max((len(seq) for seq in option_tokens), default=0)

    def covered(h: Hit) -> bool:
        return any(
            o.option != h.option and o.end >= h.end and o.end - o.start > h.end - h.start
            for start in range(max(0, h.end - longest), h.start + 1)
            for o in by_start.get(start, ())
        )

    return [h for h in hits if not covered(h)]


def char_span(toks: Sequence[Tok], hit: Hit) -> tuple[int, int]:
    return toks[hit.start].start, toks[hit.end - 1].end


def hit_text(s: str, toks: Sequence[Tok], hit: Hit) -> str:
    start, end = char_span(toks, hit)
    return s[start:end]
