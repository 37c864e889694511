"""Resolving a piece of text that should name one option: what follows "Answer:", a revision."""

from __future__ import annotations

import re

from .context import Ctx, Resolution
from .hedges import hedge_span
from .labels import bare_label, label_lead, label_of, starts_with_other_label, stray_labels
from .negation import opens_negated, rejected_after
from .options import exact_option, leading_option, option_hits
from .ordinals import ordinal_refs
from .tokens import hit_text
from .verdicts import leading_verdict, verdict
from .vocabulary import BARE_FILLER, LABEL_FOLLOWERS, WORDLIKE_LABELS

_LEAD_JUNK = re.compile(r"^[\s:=>\-\u2013\u2014\"'$]+")
FILLER = re.compile(rf"^(?:(?:{BARE_FILLER}|clearly|this\s+is)\b[\s,:]*)+", re.I)
CLAUSE_END = re.compile(r"[.;!?\n]|,\s|\s(?:because|since|as|but|while|whereas)\s", re.I)


def check_label_text(index: int, rest: str, ctx: Ctx, *, strict: bool) -> Resolution:
    """A label followed by text: the text must not name a different option.

    ``strict`` (no answer marker around) also looks at the whole rest: other
    labels there mean this is probably a restated option list ("A. red\\nB.
    blue ...") rather than an answer, so the decision is left to later rules
    (the conclusion may follow); a rest that only talks about a different
    option contradicts the label.
    """
    if starts_with_other_label(rest, index, ctx):
        return None, "ambiguous", rest.strip()
    _, hits = option_hits(rest, ctx)
    leading = [h for h in hits if h.start == 0]
    if leading:
        first = max(leading, key=lambda h: h.end)
        if first.option != index:
            return None, "ambiguous", rest.strip()
    if strict:
        if stray_labels(rest, ctx) - {index}:
            return None
        mentioned = {h.option for h in hits}
        if mentioned and index not in mentioned:
            return None, "ambiguous", rest.strip()
    return index, "ok", rest.strip()


def _space_lead(s: str, ctx: Ctx) -> Resolution:
    """A label followed by a space and words: "B because ...", "A cat" (article), "B is wrong" (rejection)."""
    m = ctx.space_lead_re.match(s)
    if m is None:
        return None
    index, rest = label_of(ctx, m.group("label")), m.group("rest")
    if rejected_after(s, m.end("label")):
        return None
    wordlike = m.group("label").casefold() in WORDLIKE_LABELS
    following = leading_option(rest, ctx)
    if following is not None:
        # "A cat": reading "A" as an article gives a clean answer; a
        # non-word label followed by text must agree with it.
        if wordlike or following == index:
            return following, "ok", s
        return None, "ambiguous", s
    first_word = rest.split(None, 1)[0].strip(".,;:!?").casefold()
    if not wordlike or first_word in LABEL_FOLLOWERS:
        if starts_with_other_label(rest, index, ctx):
            return None, "ambiguous", s
        return index, "ok", m.group("label")
    return None


def resolve_span(span: str, ctx: Ctx) -> Resolution:
    s = FILLER.sub("", _LEAD_JUNK.sub("", span)).strip()
    if not s:
        return None
    if (i := exact_option(s, ctx)) is not None:
        return i, "ok", s
    if opens_negated(s):  # "the answer is not A": says what it isn't
        return None
    if hedge := hedge_span(s, ctx):
        return None, "hedged", hedge
    if (i := bare_label(s, ctx)) is not None:
        return i, "ok", s
    if lead := label_lead(s, ctx):
        return check_label_text(*lead, ctx, strict=False)
    if (res := _space_lead(s, ctx)) is not None:
        return res
    if ctx.polarity is not None and (first := leading_verdict(s)) is not None:
        polarity = verdict(s, first[0])
        return (None, "ambiguous", s) if polarity is None else (ctx.polarity[polarity], "ok", s)
    if (i := leading_option(s, ctx)) is not None:
        return i, "ok", s
    if (ordinal := ordinal_refs(s, ctx)) is not None:
        return ordinal
    clause = CLAUSE_END.split(s, maxsplit=1)[0]
    toks, hits = option_hits(clause, ctx)
    found = {h.option for h in hits}
    if len(found) == 1:
        return found.pop(), "ok", hit_text(clause, toks, hits[0])
    if len(found) > 1:
        return None, "ambiguous", clause
    return None


def strict_choice(s: str, ctx: Ctx) -> int | None:
    """``s`` plainly names one option: a bare label, an option's exact text, "(C) green"."""
    clause = FILLER.sub("", CLAUSE_END.split(s.strip(), maxsplit=1)[0].strip())
    if (i := bare_label(clause, ctx)) is not None or (i := exact_option(clause, ctx)) is not None:
        return i
    lead = label_lead(clause, ctx)
    res = check_label_text(*lead, ctx, strict=True) if lead else None
    return res[0] if res is not None and res[1] == "ok" else None
