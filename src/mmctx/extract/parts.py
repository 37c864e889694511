"""A response as the rules see it: its reasoning trace, its answer part and its answer line.

The chain-of-thought instruction asks a model to reason, then end with a line ``Answer: <letter>``
(``Answer: Yes`` / ``Answer: No`` for binary items). Reading that shape back needs three places in
a response, each found with the same steps and patterns `extract_choice` uses:

- the *trace*: the text of its reasoning traces (``<think>…</think>`` and every other form
  :mod:`mmctx.reasoning` knows), tags removed -- what extraction skips;
- the *answer part*: the response as the rules read it (made-up turns cut, traces and special
  tokens dropped, markdown and LaTeX wrappers unwrapped: ``Ctx.text``);
- the *answer line*: the last final-answer statement in the answer part that asserts its answer
  ("Answer: B", "Final answer: B", "the answer is B", "Final Answer⏎B", ``\\boxed{B}``; not "if the
  answer is B", "the answer is B?" or "the answer is probably B", :mod:`.contradictions`), from its
  marker to the end of that line (to the end of the next non-blank line when nothing follows the
  marker on its own). Markers on one line with nothing but blanks and punctuation between them
  ("the answer is $\\boxed{B}$", "Final answer is: B") make one statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mmctx.reasoning import TRACE_CLOSE, TRACE_OPEN, trace_spans

from .contradictions import asserts
from .markers import statement_markers
from .prepare import clean, mark_noise, strip_reasoning
from .turns import cut_turns

_WORD_OR_BREAK = re.compile(r"[\w\n]")


@dataclass(frozen=True)
class AnswerLine:
    """The answer line: ``text`` is ``answer_part[start:end]``, marker first; ``stated`` is what
    follows the last marker ("B" in "Answer: B", the box's content in ``\\boxed{B}``)."""

    start: int  # where its (first) marker starts in the answer part
    end: int
    text: str
    stated: str


@dataclass(frozen=True)
class ResponseParts:
    trace: str  # the reasoning traces' text, tags removed ("" without a trace)
    raw: str  # the answer part with markdown intact (``Ctx.raw``)
    text: str  # the answer part as the rules read it (``Ctx.text``)
    answer_line: AnswerLine | None


def answer_part(text: str) -> tuple[str, str]:
    """``(raw, text)``: the response with made-up turns cut and traces dropped, before and after
    markdown and LaTeX wrappers are unwrapped -- the two texts the rules read (`Ctx`)."""
    raw = strip_reasoning(cut_turns(mark_noise(text or "")))
    return raw, clean(raw)


def trace_text(text: str) -> str:
    """The text of the response's reasoning traces, tags removed, one trace per line."""
    kept = cut_turns(mark_noise(text or ""))
    pieces = (TRACE_CLOSE.sub(" ", TRACE_OPEN.sub(" ", kept[a:b])).strip() for a, b in trace_spans(kept))
    return "\n".join(p for p in pieces if p)


def find_answer_line(text: str) -> AnswerLine | None:
    """The answer line of an answer part (``Ctx.text``), or None when it states no final answer."""
    markers = [marker for marker in statement_markers(text) if asserts(text, marker[0], marker[2])]
    if not markers:
        return None
    start, end, stated = markers[-1]
    for a, b, says in reversed(markers[:-1]):
        if b < start and _WORD_OR_BREAK.search(text[b:start]):
            break  # words or a line break between: an earlier statement, not part of this one
        if b > end:  # "final answer is: B" holds "answer is"; what the longer marker states counts
            end, stated = b, says
        start = min(a, start)
    end = _line_end(text, end)
    return AnswerLine(start, end, text[start:end], stated.strip())


def split_response(text: str) -> ResponseParts:
    """The response's trace, answer part and answer line (see the module docstring)."""
    raw, cleaned = answer_part(text)
    return ResponseParts(trace_text(text), raw, cleaned, find_answer_line(cleaned))


def _line_end(text: str, pos: int) -> int:
    """End of the line ``pos`` is on; when only blanks follow ``pos`` there, end of the next non-blank line."""
    end = _next_break(text, pos)
    if text[pos:end].strip():
        return end
    at = end
    while at < len(text):
        following = _next_break(text, at + 1)
        if text[at + 1 : following].strip():
            return following
        at = following
    return end


def _next_break(text: str, pos: int) -> int:
    found = text.find("\n", pos)
    return len(text) if found < 0 else found
