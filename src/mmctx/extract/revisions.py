"""Self-corrections: "The answer is B.\\nWait, it's C." -- a change of mind after a decision.

A revision cue ("wait", "actually", "no,", "on second thought", "correction",
...) at the start of a sentence or clause, followed by a plain choice of an option
(a bare label, an option's exact text, "(C) green", after filler such as "it's"),
revises whatever was decided before it. An *explicit* revision ("Wait, the answer
is C") is an answer marker itself and wins as the last marker (unless the reply then goes
back, or flips again without a cue: :mod:`.contradictions`); an implicit one
("Wait, it's C") that names a different option makes the response ``hedged``:
the model abandoned its answer without committing to the new one in the form
the marker rules trust. A revision naming the same option changes nothing.
"""

from __future__ import annotations

from .context import Ctx
from .contradictions import CUE
from .resolve import strict_choice


def revision_after(ctx: Ctx, pos: int, index: int) -> str:
    """The revision after ``ctx.text[pos]`` that moves away from option ``index``, or ""."""
    for m in CUE.finditer(ctx.text, pos):
        line = ctx.text[m.end() :].split("\n", 1)[0]
        choice = strict_choice(line, ctx)
        if choice is not None and choice != index:
            return f"{m.group('cue')} {line.strip()}"[:200]
    return ""


def revision_cue_after(text: str, pos: int = 0) -> str:
    """The first revision cue ("wait", "actually", "no,", …) opening a sentence or clause of
    ``text`` after ``pos``, or "": whatever was chosen before it may have been given up."""
    m = CUE.search(text, pos)
    return m.group("cue") if m else ""
