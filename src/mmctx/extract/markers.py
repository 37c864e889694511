"""The ``answer_marker`` rule: "Answer: B", "the answer is B", "\\boxed{B}", "B is correct"."""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from .context import Ctx
from .contradictions import Statement, asserts, contradiction, cut_at_cue, first_sentence
from .decision import Decision
from .prepare import lines
from .resolve import resolve_span

# Final-answer statements: a reply that makes two of them disagree is contradictory (:mod:`.contradictions`).
_STATEMENTS = (
    re.compile(r"\b(?:final\s+|correct\s+|my\s+)?answer\s*(?:is\s*)?:", re.I),
    re.compile(r"\bfinal\s+answer[ \t]*(?=\n)", re.I),
    re.compile(r"\banswer\s+(?:is|must\s+be)\b", re.I),
)
# Markers that conclude too, but also turn up tentatively in reasoning ("the answer would be A
# if ...", "the correct option is ... unless"): the last one still wins, but they are not
# statements a contradiction is read from.
_TENTATIVE = (
    re.compile(r"\banswer\s+(?:would\s+be|should\s+be|will\s+be|seems\s+to\s+be|appears\s+to\s+be)\b", re.I),
    re.compile(
        r"\b(?:correct|right|best|true|matching|most\s+likely|most\s+appropriate|most\s+accurate)\s+"
        r"(?:option|choice|caption|description|statement|one)\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be)\b",
        re.I,
    ),
    re.compile(r"\bI(?:\s+would|\s+will|'d|'ll)?\s+(?:choose|pick|select|go\s+with)\b", re.I),
)
_BOXED = re.compile(r"\\boxed\s*\{(?P<inner>[^{}]*)\}")


def line_after(text: str, pos: int) -> str:
    """Rest of the line after ``pos``; the next non-empty line if that is blank ("Final Answer\\nB")."""
    line, *rest = lines(text[pos:])
    if line.strip():
        return line
    return next((ln for ln in rest if ln.strip()), "")


@dataclass(frozen=True)
class _Candidate:
    start: int
    shown: str  # what matched, for the result's span
    span: str  # the text to resolve
    end: int  # end of the marker: a self-correction after it revises it
    statement: bool  # a final-answer statement (see _STATEMENTS, \\boxed)
    boxed: bool = False


def _candidates(text: str, ctx: Ctx) -> list[_Candidate]:
    found: list[_Candidate] = []
    for rx, statement in [(rx, True) for rx in _STATEMENTS] + [(rx, False) for rx in _TENTATIVE]:
        for m in rx.finditer(text):
            after = line_after(text, m.end())
            found.append(_Candidate(m.start(), f"{m.group()} {after.strip()}", after, m.end(), statement))
    for m in _BOXED.finditer(text):
        found.append(_Candidate(m.start(), m.group(), m.group("inner"), m.end(), True, boxed=True))
    for m in ctx.postfix_re.finditer(text):
        found.append(_Candidate(m.start(), m.group(), m.group("ans"), m.end(), False))
    return found


def _statements(text: str, candidates: list[_Candidate], ctx: Ctx) -> list[Statement]:
    """The final-answer statements that assert one option.

    Each is read on its own: up to the next marker and to a revision cue ("A. No wait, the
    answer is B" states A), so a statement never resolves from the words of the next one.
    """
    found: list[Statement] = []
    starts = sorted(c.start for c in candidates)
    for c in candidates:
        if not c.statement:
            continue
        stated = c.span
        if not c.boxed:
            following = starts[bisect_left(starts, c.end) :]
            stated = cut_at_cue(line_after(text[: following[0] if following else len(text)], c.end))
        res = resolve_span(stated, ctx)
        if res is not None and res[1] == "ok" and asserts(text, c.start, stated):
            found.append(Statement(c.start, c.end, res[0], f"{text[c.start : c.end]} {first_sentence(stated)}"[:80]))
    return found


def statement_markers(text: str) -> list[tuple[int, int, str]]:
    """Every final-answer statement marker in ``text`` (`_STATEMENTS` and ``\\boxed{…}``), in text
    order, as ``(start, end, stated)``: where the marker is, and the text it states (what follows it
    on its line -- the next non-blank line when nothing does -- or the box's content). The
    tentative markers are left out: they turn up in reasoning as often as in a conclusion."""
    found = [(m.start(), m.end(), line_after(text, m.end())) for rx in _STATEMENTS for m in rx.finditer(text)]
    found += [(m.start(), m.end(), m.group("inner")) for m in _BOXED.finditer(text)]
    return sorted(found)


def rule_answer_marker(ctx: Ctx) -> Decision | None:
    text = ctx.text
    candidates = _candidates(text, ctx)
    if conflict := contradiction(text, _statements(text, candidates, ctx)):
        return Decision(None, "contradictory", conflict)
    # The last marker wins: CoT walks through the options before concluding,
    # and a marker followed by nothing resolvable ("the answer is clear") is skipped.
    for c in sorted(candidates, key=lambda c: c.start, reverse=True):
        res = resolve_span(c.span, ctx)
        if res is not None:
            index, outcome, _ = res
            return Decision(index, "answer_marker" if outcome == "ok" else outcome, c.shown[:200], c.end)
    return None
