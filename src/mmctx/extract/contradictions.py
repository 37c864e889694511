"""Contradictory final answers: a reply that states two different answers is not an answer.

"The last answer marker wins" is right for chain-of-thought, which walks through the options
before concluding, and for an explicit self-correction ("The answer is A. Wait, the answer
is B."). It is wrong for a reply that asserts different final answers flatly ("Answer: A.
Answer: B.") or loops ("The answer is A. No wait, the answer is B." repeated to the token
limit): reading its last flip scores whichever option the token limit happened to cut at.

The check looks only at *final-answer statements* -- the strong forms "Answer: X", "the
answer is X", "Final Answer\\nX", ``\\boxed{X}`` (the caller decides which) -- never at the
weak mentions CoT is made of ("A is wrong ...", "B is correct because ...", "I'd go with").
In text order, the statements are consistent when

* consecutive statements name the same answer (restating it is fine, any number of times), or
* the answer changes only after a revision cue ("wait", "actually", "no wait", "correction",
  ... at the start of a sentence or clause) between the two statements: a correction; and
* no statement returns to an answer the reply already moved away from (A -> B -> A is a loop).

Anything else is ``contradictory``. A statement asked as a question ("the answer is A?"),
posed as a hypothesis ("if the answer is A, ...", "whether the answer is A") or made as a
guess ("the answer is probably A") asserts nothing and is not a statement (:func:`asserts`).
The mechanism is generic over what a statement states (an option index, a letter, a number),
so every extractor that reads "the last ``Answer:`` line" can use it.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .vocabulary import REVISION_CUES

CUE = re.compile(
    rf"(?:^|(?<=[.!?;,\n(\-\u2013\u2014]))[ \t\n]*(?P<cue>(?:{REVISION_CUES})(?![\w']))[ \t,:;.!\-\u2013\u2014]*",
    re.I,
)
# Words that make the clause around a statement a hypothesis, not an assertion.
_HYPOTHETICAL = re.compile(r"\b(?:if|whether|suppose|supposing|assume|assuming|unless)\b", re.I)
_CLAUSE_START = re.compile(r"[.!?;\n][^.!?;\n]*$")
# "the answer is likely A": a guess on the way, not a final answer.
_TENTATIVE = re.compile(r"[\s:=\-\"'$*]*(?:most\s+)?(?:likely|probably|perhaps|maybe|possibly)\b", re.I)
_SENTENCE = re.compile(r"[^.!\n]*")


@dataclass(frozen=True)
class Statement:
    """One final-answer statement: where its marker starts and ends, and what it states."""

    start: int
    end: int  # end of the marker: a revision cue announcing the next answer comes after this
    value: Hashable
    shown: str  # the statement as written, for the result's span


def asserts(text: str, start: int, stated: str) -> bool:
    """The statement starting at ``text[start]`` and reading ``stated`` asserts its answer.

    Not when its clause opens as a hypothesis ("if the answer is A, ..."), it states a guess
    ("the answer is probably A") or its sentence is a question ("the answer is A?").
    """
    before = text[max(0, start - 200) : start]
    clause = _CLAUSE_START.search(before)
    if _HYPOTHETICAL.search(clause.group() if clause else before) or _TENTATIVE.match(stated):
        return False
    return "?" not in first_sentence(stated)


def first_sentence(stated: str) -> str:
    """``stated`` up to its first full stop, "!" or line break ("B. The car is blue" -> "B")."""
    return _SENTENCE.match(stated.lstrip()).group()  # type: ignore[union-attr]  # [^.!\n]* always matches


def cut_at_cue(stated: str) -> str:
    """``stated`` up to a revision cue after its first word ("A. No wait, ..." -> "A. ")."""
    first = len(stated) - len(stated.lstrip())
    cue = CUE.search(stated, first + 1)
    return stated if cue is None else stated[: cue.start()]


def contradiction(text: str, statements: Sequence[Statement]) -> str:
    """ "" when the statements (in text order) are consistent, else the conflicting ones, e.g.
    "Answer: A / Answer: B" (a flat contradiction) or "answer is A -> answer is B -> answer is A"
    (a loop)."""
    ordered = sorted(statements, key=lambda s: s.start)
    abandoned: set[Hashable] = set()
    trail = ordered[:1]
    for prev, cur in zip(ordered, ordered[1:]):
        if cur.value == prev.value:
            continue
        trail.append(cur)
        if CUE.search(text[prev.end : cur.start]) is None:
            return f"{prev.shown} / {cur.shown}"[:200]
        abandoned.add(prev.value)
        if cur.value in abandoned:
            return " -> ".join(s.shown for s in trail)[:200]
    return ""
