"""The ``answer_marker`` rule: "Answer: B", "the answer is B", "\\boxed{B}", "B is correct"."""

from __future__ import annotations

import re

from .context import Ctx
from .decision import Decision
from .prepare import lines
from .resolve import resolve_span

_MARKERS = (
    re.compile(r"\b(?:final\s+|correct\s+|my\s+)?answer\s*(?:is\s*)?:", re.I),
    re.compile(r"\bfinal\s+answer[ \t]*(?=\n)", re.I),
    re.compile(
        r"\banswer\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be|seems\s+to\s+be|appears\s+to\s+be)\b", re.I
    ),
    re.compile(
        r"\b(?:correct|right|best|true|matching|most\s+likely|most\s+appropriate|most\s+accurate)\s+"
        r"(?:option|choice|caption|description|statement|one)\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be)\b",
        re.I,
    ),
    re.compile(r"\bI(?:\s+would|\s+will|'d|'ll)?\s+(?:choose|pick|select|go\s+with)\b", re.I),
)
_BOXED = re.compile(r"\\boxed\s*\{(?P<inner>[^{}]*)\}")


def _line_after(text: str, pos: int) -> str:
    """Rest of the line after ``pos``; the next non-empty line if that is blank ("Final Answer\\nB")."""
    line, *rest = lines(text[pos:])
    if line.strip():
        return line
    return next((ln for ln in rest if ln.strip()), "")


def rule_answer_marker(ctx: Ctx) -> Decision | None:
    text = ctx.text
    # (position, what matched, text to resolve, end of the marker: a self-correction after it revises it)
    candidates: list[tuple[int, str, str, int]] = []
    for rx in _MARKERS:
        for m in rx.finditer(text):
            after = _line_after(text, m.end())
            candidates.append((m.start(), f"{m.group()} {after.strip()}", after, m.end()))
    for m in _BOXED.finditer(text):
        candidates.append((m.start(), m.group(), m.group("inner"), m.end()))
    for m in ctx.postfix_re.finditer(text):
        candidates.append((m.start(), m.group(), m.group("ans"), m.end()))
    # The last marker wins: CoT walks through the options before concluding,
    # and a marker followed by nothing resolvable ("the answer is clear") is skipped.
    for _, shown, span, end in sorted(candidates, key=lambda c: c[0], reverse=True):
        res = resolve_span(span, ctx)
        if res is not None:
            index, outcome, _ = res
            return Decision(index, "answer_marker" if outcome == "ok" else outcome, shown[:200], end)
    return None
