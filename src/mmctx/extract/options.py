"""Reading option texts ("dark red", "three" == "3") in a piece of response text."""

from __future__ import annotations

from .context import Ctx
from .negation import rejected
from .prepare import norm
from .tokens import Hit, Tok, char_span, raw_option_hits, tokenize


def exact_option(s: str, ctx: Ctx) -> int | None:
    """``s`` is exactly one option's text (case, spacing, punctuation and number words aside)."""
    normed, toks = norm(s), tuple(t.text for t in tokenize(s))
    matches = {
        i
        for i in range(len(ctx.options))
        if (normed and normed == ctx.option_norm[i]) or (toks and toks == ctx.option_tokens[i])
    }
    return matches.pop() if len(matches) == 1 else None


def option_hits(s: str, ctx: Ctx, toks: list[Tok] | None = None) -> tuple[list[Tok], list[Hit]]:
    """Mentions of option texts in ``s`` that are not rejections ("not red", "red is wrong")."""
    toks = tokenize(s) if toks is None else toks
    hits = raw_option_hits(toks, ctx.option_tokens)
    return toks, [h for h in hits if not rejected(s, *char_span(toks, h))]


def leading_option(s: str, ctx: Ctx) -> int | None:
    """The option whose text opens ``s`` ("red car" -> red); the longest one if several do."""
    _, hits = option_hits(s, ctx)
    leading = [h for h in hits if h.start == 0]
    return max(leading, key=lambda h: h.end).option if leading else None
