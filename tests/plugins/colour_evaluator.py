"""A colour-naming evaluator that brings its own answer type: everything it needs, in one file."""

from dataclasses import dataclass
from typing import ClassVar

from mmctx.answers import AnswerType
from mmctx.scoring.evaluators import ACCURACY, Extraction, Verdict, register
from mmctx.scoring.evaluators.text import answer_line

COLOURS = ("red", "green", "blue", "yellow", "black", "white")


def colour_gold(gold: object) -> str | None:
    ok = isinstance(gold, str) and gold.strip().lower() in COLOURS
    return None if ok else f"colour gold must be one of {list(COLOURS)}, not {gold!r}"


@dataclass(frozen=True)
class ColourEvaluator:
    name: str = "colour"
    free_form: bool = False
    judge: None = None
    answer_types: ClassVar = (AnswerType("colour", colour_gold, "End with exactly one final line: Colour: <name>"),)
    metrics: ClassVar = (ACCURACY,)

    def extract(self, sample, response: str) -> Extraction:
        found = (answer_line(response, "Colour") or "").strip(" .").lower()
        return Extraction(found, "colour_line") if found else Extraction(None, issue="no line 'Colour: <name>'")

    def score(self, sample, answer: str) -> Verdict:
        return Verdict.scored(float(answer == sample.gold.strip().lower()), answer, gold=sample.gold)


COLOUR = register(ColourEvaluator())
