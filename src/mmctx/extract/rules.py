"""The decision rules other than ``answer_marker`` (see :mod:`.markers`), in chain order."""

from __future__ import annotations

import re

from .context import Ctx
from .decision import Decision, decided
from .hedges import hedge_span
from .labels import bare_label, label_lead, label_of, used_as_word
from .markers import rule_answer_marker
from .negation import rejected
from .options import exact_option, option_hits
from .ordinals import ordinal_refs
from .prepare import lines
from .resolve import check_label_text
from .tokens import char_span, hit_text
from .verdicts import closing_verdict, leading_verdict, verdict

__all__ = [
    "rule_answer_marker", "rule_bare_letter", "rule_bracketed_label", "rule_empty", "rule_final_line_label",
    "rule_hedged", "rule_label_with_text", "rule_no_match", "rule_option_text", "rule_ordinal", "rule_yes_no",
]  # fmt: skip

# Sentences of a line; also clauses after ";" ("(A) is incorrect; B") and ", so".
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])[ \t]+|;[ \t]+|,[ \t]*(?=(?:so|therefore|thus|hence)\b)", re.I)
_CONNECTIVE = re.compile(
    r"^(?:so|therefore|thus|hence|overall|consequently|in\s+conclusion|in\s+summary)\b[\s,:]*"
    r"(?:(?:it'?s|it\s+is|we\s+get|i\s+(?:choose|pick|select))\s+)?",
    re.I,
)


def _nonblank_lines(text: str) -> list[str]:
    return [line.strip() for line in lines(text) if line.strip()]


def rule_empty(ctx: Ctx) -> Decision | None:
    return Decision(None, "empty") if not ctx.text else None


def rule_hedged(ctx: Ctx) -> Decision | None:
    hedge = hedge_span(ctx.text, ctx)
    return Decision(None, "hedged", hedge) if hedge else None


def rule_bare_letter(ctx: Ctx) -> Decision | None:
    i = bare_label(ctx.text, ctx)
    return Decision(i, "bare_letter", ctx.text, len(ctx.text)) if i is not None else None


def rule_label_with_text(ctx: Ctx) -> Decision | None:
    if exact_option(ctx.text, ctx) is not None:  # "1.5" is an option, not label "1" + "5"
        return None
    lead = label_lead(ctx.text, ctx)
    if lead is None:
        # "B\n\nExplanation: ...": a first line that is just the label, then reasoning.
        first, _, rest = ctx.text.partition("\n")
        if (index := bare_label(first, ctx, exact_case=True)) is not None:
            lead = (index, rest)
    if lead is None or not lead[1].strip():
        return None
    found = decided(check_label_text(*lead, ctx, strict=True), "label_with_text")
    return found if found is None else Decision(found.index, found.rule, ctx.text[:200])


def rule_final_line_label(ctx: Ctx) -> Decision | None:
    """Reasoning, then a last line, sentence or clause that is a bare label ("... Therefore, B.")."""
    all_lines = _nonblank_lines(ctx.text)
    last_pieces = [p for p in _SENTENCE_SPLIT.split(all_lines[-1]) if p.strip()]
    if not last_pieces or len(all_lines) + len(last_pieces) < 3:
        return None  # a one-piece response is bare_letter's call
    conclusion = _CONNECTIVE.sub("", last_pieces[-1].strip())
    last = bare_label(conclusion, ctx, exact_case=True)
    if last is None:
        return None
    # "A\n...\nB", "A; B": two bare-label pieces that disagree are a change of mind or a list, not an answer.
    # (Whole pieces only: "A. red" in a restated option list is not a bare "A.")
    earlier = all_lines[:-1] + last_pieces[:-1]
    others = {i for piece in earlier if (i := bare_label(_CONNECTIVE.sub("", piece), ctx)) is not None}
    if others - {last}:
        return Decision(None, "ambiguous", conclusion)
    return Decision(last, "final_line_label", conclusion, len(ctx.text))


def rule_bracketed_label(ctx: Ctx) -> Decision | None:
    """Exactly one bracketed / bold / "option X" label in prose that is not a rejection."""
    found: dict[int, str] = {}
    for source in (ctx.raw, ctx.text):
        for m in ctx.bracketed_re.finditer(source):
            if rejected(source, m.start(), m.end()):
                continue  # "not (A)", "(A) is wrong" rule A out
            label = m.group("a") or m.group("b") or m.group("c") or m.group("d")
            if label == m.group("d") and label.islower() and used_as_word(label, source[m.end() :]):
                continue  # "the other option a friend suggested"
            found.setdefault(label_of(ctx, label), m.group())
    if len(found) == 1:
        index, span = found.popitem()
        return Decision(index, "bracketed_label", span)
    return None  # none, or several (a restated option list): let later rules look


def rule_option_text(ctx: Ctx) -> Decision | None:
    if ctx.polarity is not None:
        return None  # "Yes, no doubt": for yes/no sets the leading word decides (yes_no)
    if (i := exact_option(ctx.text, ctx)) is not None:
        return Decision(i, "option_text", ctx.text, len(ctx.text))
    toks, hits = option_hits(ctx.text, ctx, ctx.text_tokens)
    found = {h.option for h in hits}
    if len(found) == 1:
        return Decision(found.pop(), "option_text", hit_text(ctx.text, toks, hits[0]), char_span(toks, hits[-1])[1])
    if len(found) > 1:
        return Decision(None, "ambiguous", ", ".join(sorted({hit_text(ctx.text, toks, h) for h in hits})))
    return None


def rule_yes_no(ctx: Ctx) -> Decision | None:
    """A yes/no word opening the answer, or closing it as a one-word sentence; both polarities: ambiguous."""
    if ctx.polarity is None:
        return None
    first, end = leading_verdict(ctx.text), 0
    if first is None:
        # "... so there is a dog.\nYes." -- a one-word verdict closing a finished sentence
        pieces = _nonblank_lines(ctx.text)
        pieces[-1:] = _SENTENCE_SPLIT.split(pieces[-1])
        if len(pieces) < 2 or not pieces[-2].rstrip().endswith((".", "!", "?", ":")):
            return None
        first, end = closing_verdict(pieces[-1]), len(ctx.text)
    if first is None:
        return None
    polarity = verdict(ctx.text, first[0])
    if polarity is None:
        return Decision(None, "ambiguous", ctx.text[:200])
    return Decision(ctx.polarity[polarity], "yes_no", first[1], end)


def rule_ordinal(ctx: Ctx) -> Decision | None:
    return decided(ordinal_refs(ctx.text, ctx), "ordinal")


def rule_no_match(ctx: Ctx) -> Decision | None:
    return Decision(None, "no_match")
