"""The ``courtsi`` evaluator: CourtSI-style metrics, by the item's ``answer_type``.

``option`` → **MA** (multiple-choice accuracy): the ``choice`` evaluator's extraction and exact
  letter match.
``number`` → **MRA** (mean relative accuracy, VSI-Bench's definition, which CourtSI reuses for
  numeric answers): with thresholds θ ∈ C = {0.50, 0.55, …, 0.95},
  ``MRA = 1/10 · Σ_θ 1[|ŷ − y| / |y| < 1 − θ]``; the comparison is strict, as in the paper's
  formula (VSI-Bench's code uses ``≤``; the two differ only on exact boundary values). A gold
  of 0 has no relative error: MRA is then 1 when ŷ = 0 and 0 otherwise. ``%`` and units are
  ignored (the gold's unit is the one asked for).
``point`` → **LocA** (localisation accuracy): 1 when the predicted point lies within the
  gold's ``radius`` of ``xy`` (Euclidean distance ≤ radius), else 0. The point is read from
  the answer as ``(x, y)``, ``[x, y]`` or ``x, y`` (the last such pair; ``;`` also separates);
  a single distance threshold per item, since the gold carries its own radius.
Extraction: ``option`` as ``choice``; ``number`` as ``numeric`` (``Answer:`` line, ``\\boxed{}``,
or a one-line response); ``point`` from the ``Answer:`` line, ``\\boxed{}``, or the whole final
answer, in that order, whichever first holds a point. ``detail["metric"]`` names the metric.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from mmctx.schema import Sample

from .base import Extraction, Judge, Verdict, register
from .choice import extract_letter, score_letter
from .numeric import extract_number, gold_number
from .text import answer_line, boxed, final_answer_text, parse_number

# θ = 0.50, 0.55, …, 0.95 as exact hundredths, so 1 − θ carries no float drift.
MRA_THRESHOLDS: tuple[float, ...] = tuple(t / 100 for t in range(50, 100, 5))
_TOLERANCES: tuple[float, ...] = tuple((100 - t) / 100 for t in range(50, 100, 5))

_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
_POINT = re.compile(rf"(?<![\d.])(?P<x>{_NUM})\s*[,;]\s*(?P<y>{_NUM})(?!\d)")


def mean_relative_accuracy(pred: float, gold: float) -> float:
    """VSI-Bench's MRA over θ ∈ {0.50, …, 0.95}; a zero gold scores 1 only for an exact zero."""
    if gold == 0:
        return 1.0 if pred == 0 else 0.0
    rel = abs(pred - gold) / abs(gold)
    return sum(rel < tol for tol in _TOLERANCES) / len(_TOLERANCES)


def parse_point(s: str) -> tuple[float, float] | None:
    """The last ``(x, y)`` / ``[x, y]`` / ``x, y`` pair in ``s``."""
    text = unicodedata.normalize("NFKC", s or "").replace("−", "-")
    found = list(_POINT.finditer(text))
    if not found:
        return None
    m = found[-1]
    return float(m.group("x")), float(m.group("y"))


def _gold_point(sample: Sample) -> tuple[tuple[float, float], float] | None:
    gold = sample.gold
    if not isinstance(gold, dict):
        return None
    xy, radius = gold.get("xy"), gold.get("radius")
    if not (isinstance(xy, (list, tuple)) and len(xy) == 2 and isinstance(radius, (int, float))):
        return None
    return (float(xy[0]), float(xy[1])), float(radius)


def extract_point(response: str) -> Extraction:
    text = final_answer_text(response)
    if not text:
        return Extraction(None, issue="the response is empty; end with a line 'Answer: (x, y)'")
    for rule, value in (("answer_line", answer_line(text)), ("boxed", boxed(text)), ("whole", text)):
        point = parse_point(value) if value is not None else None
        if point is not None:
            return Extraction(f"({point[0]:g}, {point[1]:g})", rule)
    return Extraction(None, issue="no point given as 'Answer: (x, y)'")


@dataclass(frozen=True)
class CourtSIEvaluator:
    name: str = "courtsi"
    free_form: bool = False
    judge: Judge | None = None

    def extract(self, sample: Sample, response: str) -> Extraction:
        if sample.answer_type == "option":
            return extract_letter(sample, response)
        if sample.answer_type == "point":
            return extract_point(response)
        return extract_number(response)

    def score(self, sample: Sample, answer: str) -> Verdict:
        if sample.answer_type == "option":
            return score_letter(sample, answer, metric="MA")
        if sample.answer_type == "point":
            return self._loca(sample, answer)
        if sample.answer_type == "number":
            return self._mra(sample, answer)
        return Verdict.failed("invalid_sample", f"courtsi scores option/number/point items, not {sample.answer_type!r}")

    @staticmethod
    def _mra(sample: Sample, answer: str) -> Verdict:
        gold = gold_number(sample)
        if gold is None:
            return Verdict.failed("invalid_sample", "the item has no numeric gold", metric="MRA")
        pred = parse_number(answer or "").value
        if pred is None:
            return Verdict.failed(
                "unparsed",
                f"the final answer {(answer or '')[:60]!r} is not a number",
                prediction=answer or "",
                metric="MRA",
            )
        error = abs(pred - gold.value)
        rel = error / abs(gold.value) if gold.value else None
        return Verdict.scored(
            mean_relative_accuracy(pred, gold.value),
            f"{pred:g}",
            metric="MRA",
            gold=gold.value,
            abs_error=error,
            rel_error=rel,
        )

    @staticmethod
    def _loca(sample: Sample, answer: str) -> Verdict:
        gold = _gold_point(sample)
        if gold is None:
            return Verdict.failed("invalid_sample", "the item has no point gold {'xy', 'radius'}", metric="LocA")
        point = parse_point(answer or "")
        if point is None:
            return Verdict.failed(
                "unparsed",
                f"the final answer {(answer or '')[:60]!r} is not a point (x, y)",
                prediction=answer or "",
                metric="LocA",
            )
        (gx, gy), radius = gold
        distance = math.hypot(point[0] - gx, point[1] - gy)
        return Verdict.scored(
            1.0 if distance <= radius else 0.0,
            f"({point[0]:g}, {point[1]:g})",
            metric="LocA",
            gold=[gx, gy],
            radius=radius,
            distance=distance,
        )


COURTSI = register(CourtSIEvaluator())
