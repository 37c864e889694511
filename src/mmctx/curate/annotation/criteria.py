"""The criteria annotators rate a demonstration on, with the paper's scales (FewMMBench B.3).

"Three annotators independently assessed each example along two axes: (1) Answer correctness
(True, False, or Other), and (2) Reasoning quality, rated on a 5-point Likert scale
(1 = incorrect/incoherent, 5 = fully correct and well-structured)."

Each criterion also says how a rating counts towards a demo's mean: a Likert rating as its
number; an answer-correctness rating as 1 for True and 0 for False or Other, so a demo's mean
is the share of its annotators who judged the final answer correct (above 0.5: the majority
vote the paper reports).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["nominal", "ordinal"]


@dataclass(frozen=True)
class Criterion:
    """One axis of a rating: its name in files, its wording, and its scale."""

    name: str  # the column (CSV) or key (JSON) a rating is stored under
    title: str  # the paper's name for the axis
    question: str  # what the form asks the annotator
    values: tuple[str, ...]  # the scale, as written in files, in scale order
    labels: tuple[str, ...]  # how the form shows each value
    scores: tuple[float, ...]  # each value's number in a demo's mean
    level: Level  # Krippendorff's α level of measurement

    def parse(self, raw: object) -> str | None:
        """The scale value ``raw`` stands for, or None when it is none of them.

        Spreadsheets write ``4`` as ``4.0`` and ``true`` as ``TRUE``: both read as the value.
        """
        if isinstance(raw, bool):  # JSON true/false for answer correctness
            raw = "true" if raw else "false"
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        text = str(raw).strip().casefold()
        try:
            number = float(text)
        except ValueError:
            number = None
        if number is not None and number.is_integer():
            text = str(int(number))
        return text if text in self.values else None

    def score(self, value: str) -> float:
        return self.scores[self.values.index(value)]

    @property
    def scale(self) -> str:
        """The scale as an error message names it."""
        return ", ".join(self.values)


ANSWER_CORRECTNESS = Criterion(
    name="answer_correctness",
    title="Answer correctness",
    question="Is the final answer correct?",
    values=("true", "false", "other"),
    labels=("True", "False", "Other"),
    scores=(1.0, 0.0, 0.0),
    level="nominal",
)

REASONING_QUALITY = Criterion(
    name="reasoning_quality",
    title="Reasoning quality",
    question="How good is the reasoning chain? (5-point Likert scale)",
    values=("1", "2", "3", "4", "5"),
    labels=("1 = incorrect/incoherent", "2", "3", "4", "5 = fully correct and well-structured"),
    scores=(1.0, 2.0, 3.0, 4.0, 5.0),
    level="ordinal",
)

CRITERIA: tuple[Criterion, ...] = (ANSWER_CORRECTNESS, REASONING_QUALITY)
# What a bare ``--drop-below T`` thresholds: the Likert criterion.
DEFAULT_DROP_CRITERION = REASONING_QUALITY.name


def criterion(name: str) -> Criterion:
    for c in CRITERIA:
        if c.name == name:
            return c
    raise ValueError(f"unknown criterion {name!r}; known: {', '.join(c.name for c in CRITERIA)}")
