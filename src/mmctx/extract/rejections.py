"""Which options a response explicitly rules out ("A is wrong", "the red one is incorrect")."""

from __future__ import annotations

from .context import Ctx
from .labels import label_of
from .negation import rejected_after
from .tokens import char_span, raw_option_hits


def rejected_options(ctx: Ctx) -> dict[int, str]:
    """Option index -> the text rejecting it, for mentions followed by a negative predicate.

    Choosing an option the same response calls wrong is a contradiction, not an answer.
    """
    found: dict[int, str] = {}
    text = ctx.text
    for m in ctx.mention_re.finditer(text):
        if (m.group("c") or "").casefold() == "i":
            continue  # "I was wrong" is the pronoun
        if predicate := rejected_after(text, m.end()):
            label = m.group("a") or m.group("b") or m.group("c")
            found.setdefault(label_of(ctx, label), f"{m.group()} {predicate}")
    toks = ctx.text_tokens
    for h in raw_option_hits(toks, ctx.option_tokens):
        start, end = char_span(toks, h)
        if predicate := rejected_after(text, end):
            found.setdefault(h.option, f"{text[start:end]} {predicate}")
    return found
