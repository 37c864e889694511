"""Hedges: "not sure", "A or B", "either red or blue" -- answers that do not commit."""

from __future__ import annotations

import re

from .context import Ctx
from .negation import negated_before
from .prepare import norm
from .tokens import Hit, raw_option_hits, tokenize

_HEDGE = re.compile(
    r"\b(?:not\s+(?:sure|certain)|unsure|uncertain"
    r"|(?:can\s*not|can't|could\s*not|couldn't)\s+(?:tell|determine|decide|say|be\s+(?:sure|certain|determined))"
    r"|cannot\s+be\s+determined|unable\s+to\s+(?:tell|determine|decide|answer)"
    r"|impossible\s+to\s+(?:tell|determine|say)|(?:hard|difficult)\s+to\s+(?:tell|say|determine)"
    r"|no\s+way\s+to\s+(?:tell|know)|(?:i\s+)?do\s*n[o']?t\s+know"
    r"|not\s+enough\s+information|insufficient\s+information"
    r"|no,?\s+wait|wait,?\s+no|or\s+(?:maybe|perhaps|possibly)|yes\s+and\s+no|yes\s+or\s+no"
    r"|either\b[^.\n]{0,80}?\bor|neither\b[^.\n]{0,80}?\bnor)\b",
    re.I,
)


def hedge_span(s: str, ctx: Ctx) -> str:
    """The hedging text in ``s``, or "" if it commits to something."""
    for m in _HEDGE.finditer(s):
        # "Cannot be determined" may itself be an option; choosing it is not a hedge.
        if not any(norm(m.group()) in o for o in ctx.option_norm):
            return m.group()
    for m in ctx.label_or_re.finditer(s):
        if negated_before(s, m.start()):
            continue  # "not A or B" rules options out; it does not waver between them
        if m.group("x") is None or m.group("x").casefold() != m.group("y").casefold():
            return m.group()
    toks = tokenize(s)
    hits = raw_option_hits(toks, ctx.option_tokens)
    starts: dict[int, list[Hit]] = {}
    for h in hits:
        starts.setdefault(h.start, []).append(h)
    for a in hits:
        if a.end >= len(toks) or toks[a.end].text != "or":
            continue
        if negated_before(s, toks[a.start].start):
            continue  # "not red or green" rules both out
        for b in starts.get(a.end + 1, ()):
            if b.option != a.option:
                return s[toks[a.start].start : toks[b.end - 1].end]
    return ""
