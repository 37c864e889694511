"""Reading option labels ("B", "(B)", "B. red") in a piece of response text."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .context import Ctx
from .negation import rejected, rejected_after
from .vocabulary import WORDLIKE_LABELS

_LIST_JOINER = re.compile(r"^[\s,;&+]*(?:and\s+)?")


def label_of(ctx: Ctx, label: str) -> int:
    return ctx.label_index[label.casefold()]


def bare_label(s: str, ctx: Ctx, *, exact_case: bool = False) -> int | None:
    """``s`` is nothing but a label, maybe with filler: "B", "(B)", "Option B", "I think it's B.".

    ``exact_case``: the label must be written as displayed ("B", not "b") -- for a label
    standing on a line among other text, where a lone lowercase letter is as likely noise.
    """
    m = ctx.bare_re.fullmatch(s.strip())
    if m is None or (exact_case and m.group("label") not in ctx.labels):
        return None
    return label_of(ctx, m.group("label"))


def label_lead(s: str, ctx: Ctx) -> tuple[int, str] | None:
    """A leading delimited label and the text after it: "B. red" -> (1, "red").

    "(A) is incorrect" is a rejection of A, not a label with text.
    """
    m = ctx.lead_re.match(s)
    if not m:
        return None
    label = m.group("l1") or m.group("l2")
    if label.casefold() == "i" and (m.group("delim") or "").strip() in (",", ";"):
        return None  # "I, for one, ..." is the pronoun
    if rejected_after(s, m.end("l1") if m.group("l1") else m.end("l2")):
        return None
    return label_of(ctx, label), m.group("rest")


def used_as_word(label: str, following: str) -> bool:
    """The article or pronoun ("A dog", "I see"), not the label."""
    return label.casefold() in WORDLIKE_LABELS and re.match(r"\s+[a-z]", following) is not None


def stray_labels(s: str, ctx: Ctx) -> set[int]:
    """Labels written as standalone tokens in prose, minus article/pronoun uses and rejections."""
    return {
        label_of(ctx, m.group("label"))
        for m in ctx.stray_re.finditer(s)
        if not used_as_word(m.group("label"), s[m.end() :]) and not rejected(s, m.start(), m.end())
    }


def starts_with_other_label(rest: str, index: int, ctx: Ctx) -> bool:
    """A list of labels ("B and C", "B, C"), not one answer."""
    head = _LIST_JOINER.sub("", rest, count=1)
    m = ctx.stray_re.match(head)
    if not m or used_as_word(m.group("label"), head[m.end() :]):
        return False
    return label_of(ctx, m.group("label")) != index


def marked_labels(text: str, labels: Sequence[str]) -> list[str]:
    """The labels among ``labels`` that ``text`` writes marked as labels, as written and in text order:
    bracketed "(E)" / "[E]", bold "**E**", or named "option E" / "choice E" / "letter E" -- the
    forms ``bracketed_label`` reads. ``labels`` may be any set (a whole alphabet, to find labels
    that were never shown); matching ignores case, so callers that care compare what comes back."""
    ctx = Ctx(raw=text, text=text, options=list(labels), labels=list(labels))
    found = []
    for m in ctx.bracketed_re.finditer(text):
        label = m.group("a") or m.group("b") or m.group("c") or m.group("d")
        if label == m.group("d") and used_as_word(label, text[m.end() :]):
            continue  # "the option I chose", "the choice a model makes"
        found.append(label)
    return found


def written_label(text: str, labels: Sequence[str]) -> str | None:
    """The label ``text`` is nothing but, as written ("E", "(E)", "Option E.", "It's E"), if it is
    one of ``labels`` (ignoring case, as `marked_labels`); else None. Same form as ``bare_letter``."""
    ctx = Ctx(raw=text, text=text, options=list(labels), labels=list(labels))
    m = ctx.bare_re.fullmatch(text.strip())
    return m.group("label") if m else None
