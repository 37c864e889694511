"""The ``courtsi`` evaluator: CourtSI-Bench's metrics, by the item's ``answer_type``.

The rules follow CourtSI's released scorer (``protocol/CourtSI-Bench/metrics.py`` and
``vlm_evaluate.py`` of Visionary-Laboratory/CourtSI):

``option`` → **MA** (multiple-choice accuracy): the ``choice`` evaluator's extraction and exact
  letter match.
``number`` → by the item's CourtSI category (``meta["category"]``, CourtSI's own field):
  - a counting question (the category names counting, e.g. ``spatial_counting_player``) →
    **MA**: the number must equal the gold exactly ("3" and "3.0" are equal, 4 for 3 is wrong);
  - every other number (distances, heights) → **MRA** with CourtSI's 0.15 m slack: with
    thresholds θ ∈ C = {0.50, 0.55, …, 0.95},
    ``MRA = 1/10 · Σ_θ 1[(|ŷ − y| − 0.15) / |y| < 1 − θ]``, strict as upstream. An error within
    the slack passes every threshold (gold 0.04 m, answer 0.03 m scores 1, where VSI-Bench's plain
    MRA gives 0.5). A gold of 0 has only the slack: 1 when ``|ŷ| < 0.15``, else 0 (upstream's
    ``1e-8`` denominator guard gives the same).
  ``%`` and units are ignored (the gold's unit is the one asked for).
``point`` → **LocA** (localisation accuracy): 1 when the predicted point lies strictly within the
  gold's ``radius`` (Euclidean distance ``< radius``; CourtSI uses 0.3 m), else 0. CourtSI's
  points are 3-D, ``{"xyz": [x, y, z], "radius": 0.3}``; a 2-D gold ``{"xy": [x, y], "radius": r}``
  is scored the same way in the plane. The answer must give as many coordinates as the gold:
  ``(x, y, z)``, ``[x, y, z]`` or ``x, y, z`` (``;`` also separates; the last such tuple counts).
  A tuple of another length is not a point of the asked form (upstream scores it 0): unparsed.
Extraction: ``option`` as ``choice``; ``number`` as ``numeric`` (``Answer:`` line, ``\\boxed{}``,
or a one-line response); ``point`` from the ``Answer:`` line, ``\\boxed{}``, or the whole final
answer, in that order, whichever first holds a point. ``detail["metric"]`` names the metric.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from mmctx.schema import Sample

from .base import Extraction, Judge, Metric, Verdict, register
from .choice import extract_letter, score_letter
from .numeric import extract_number, gold_number
from .text import answer_line, boxed, final_answer_text, parse_number

# θ = 0.50, 0.55, …, 0.95 as exact hundredths, so 1 − θ carries no float drift.
MRA_THRESHOLDS: tuple[float, ...] = tuple(t / 100 for t in range(50, 100, 5))
_TOLERANCES: tuple[float, ...] = tuple((100 - t) / 100 for t in range(50, 100, 5))
COURTSI_MRA_SLACK = 0.15  # metres of error CourtSI forgives before the relative error counts
_COUNTING = "counting"  # CourtSI's counting categories: spatial_counting_ball, spatial_counting_player

_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
# A run of numbers separated by "," or ";": a point's coordinates, however many.
_TUPLE = re.compile(rf"(?<![\d.]){_NUM}(?:\s*[,;]\s*{_NUM})*(?![\d])")
_SEP = re.compile(r"\s*[,;]\s*")
_AXES = {2: "(x, y)", 3: "(x, y, z)"}


def mean_relative_accuracy(pred: float, gold: float) -> float:
    """VSI-Bench's plain MRA over θ ∈ {0.50, …, 0.95}; a zero gold scores 1 only for an exact zero."""
    if gold == 0:
        return 1.0 if pred == 0 else 0.0
    rel = abs(pred - gold) / abs(gold)
    return sum(rel < tol for tol in _TOLERANCES) / len(_TOLERANCES)


def courtsi_mra(pred: float, gold: float, slack: float = COURTSI_MRA_SLACK) -> float:
    """CourtSI's MRA: ``(|ŷ − y| − slack) / |y| < 1 − θ`` over θ ∈ {0.50, …, 0.95}."""
    excess = abs(pred - gold) - slack
    if excess < 0:
        return 1.0  # inside the slack: below every tolerance
    if gold == 0:
        return 0.0
    rel = excess / abs(gold)
    return sum(rel < tol for tol in _TOLERANCES) / len(_TOLERANCES)


def is_counting(sample: Sample) -> bool:
    """A CourtSI counting question, by its category (scored by exact match, not MRA)."""
    return _COUNTING in str(sample.meta.get("category", "")).casefold()


def parse_point(s: str, dims: int = 2) -> tuple[float, ...] | None:
    """The last tuple of exactly ``dims`` numbers in ``s``: ``(x, y)``, ``[x, y, z]``, ``x; y``."""
    text = unicodedata.normalize("NFKC", s or "").replace("−", "-")
    found = [m.group() for m in _TUPLE.finditer(text)]
    for run in reversed(found):
        parts = _SEP.split(run)
        if len(parts) == dims:
            return tuple(float(p) for p in parts)
        if len(parts) > 1:
            return None  # the last tuple given has another length: not a point of the asked form
    return None


def gold_point(sample: Sample) -> tuple[tuple[float, ...], float] | None:
    """The gold point (``xyz`` or ``xy``) and its radius, or None when the gold is malformed."""
    gold = sample.gold
    if not isinstance(gold, dict):
        return None
    radius = gold.get("radius")
    for key, dims in (("xyz", 3), ("xy", 2)):
        coords = gold.get(key)
        if isinstance(coords, (list, tuple)) and len(coords) == dims and isinstance(radius, (int, float)):
            if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in coords):
                return tuple(float(c) for c in coords), float(radius)
    return None


def _dims(sample: Sample) -> int:
    gold = gold_point(sample)
    return len(gold[0]) if gold is not None else 3  # CourtSI's points are 3-D


def _show(point: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{c:g}" for c in point) + ")"


def extract_point(response: str, dims: int = 2) -> Extraction:
    form = _AXES.get(dims, "(x, y, z)")
    text = final_answer_text(response)
    if not text:
        return Extraction(None, issue=f"the response is empty; end with a line 'Answer: {form}'")
    for rule, value in (("answer_line", answer_line(text)), ("boxed", boxed(text)), ("whole", text)):
        point = parse_point(value, dims) if value is not None else None
        if point is not None:
            return Extraction(_show(point), rule)
    return Extraction(None, issue=f"no point given as 'Answer: {form}'")


# The metric an answer type is scored by, for rows written before ``detail["metric"]`` named it.
_METRIC_OF_TYPE = {"option": "MA", "number": "MRA", "point": "LocA"}


def _metric_share(name: str) -> Metric:
    """CourtSI's per-metric split: a row counts towards the metric it was scored by (a counting
    question is a number scored as MA), with its score (non-scored rows count 0)."""

    def value(row: Mapping[str, Any]) -> float | None:
        metric = (row.get("detail") or {}).get("metric") or _METRIC_OF_TYPE.get(row.get("answer_type"))
        return float(row["score"]) if metric == name else None

    return Metric(name, value)


@dataclass(frozen=True)
class CourtSIEvaluator:
    name: str = "courtsi"
    free_form: bool = False
    judge: Judge | None = None
    answer_types: ClassVar[tuple[str, ...]] = ("option", "number", "point")
    metrics: ClassVar[tuple[Metric, ...]] = tuple(_metric_share(m) for m in ("MA", "MRA", "LocA"))

    def extract(self, sample: Sample, response: str) -> Extraction:
        if sample.answer_type == "option":
            return extract_letter(sample, response)
        if sample.answer_type == "point":
            return extract_point(response, _dims(sample))
        return extract_number(response)

    def score(self, sample: Sample, answer: str) -> Verdict:
        if sample.answer_type == "option":
            return score_letter(sample, answer, metric="MA")
        if sample.answer_type == "point":
            return self._loca(sample, answer)
        if sample.answer_type == "number":
            return self._number(sample, answer)
        return Verdict.failed("invalid_sample", f"courtsi scores option/number/point items, not {sample.answer_type!r}")

    @staticmethod
    def _number(sample: Sample, answer: str) -> Verdict:
        counting = is_counting(sample)
        metric = "MA" if counting else "MRA"
        gold = gold_number(sample)
        if gold is None:
            return Verdict.failed("invalid_sample", "the item has no numeric gold", metric=metric)
        pred = parse_number(answer or "").value
        if pred is None:
            return Verdict.failed(
                "unparsed",
                f"the final answer {(answer or '')[:60]!r} is not a number",
                prediction=answer or "",
                metric=metric,
            )
        error = abs(pred - gold.value)
        rel = error / abs(gold.value) if gold.value else None
        score = float(pred == gold.value) if counting else courtsi_mra(pred, gold.value)
        return Verdict.scored(score, f"{pred:g}", metric=metric, gold=gold.value, abs_error=error, rel_error=rel)

    @staticmethod
    def _loca(sample: Sample, answer: str) -> Verdict:
        gold = gold_point(sample)
        if gold is None:
            return Verdict.failed(
                "invalid_sample",
                "the item has no point gold {'xyz': [x, y, z], 'radius': r} (or {'xy': [x, y], 'radius': r})",
                metric="LocA",
            )
        coords, radius = gold
        point = parse_point(answer or "", len(coords))
        if point is None:
            return Verdict.failed(
                "unparsed",
                f"the final answer {(answer or '')[:60]!r} is not a point {_AXES.get(len(coords), '')}",
                prediction=answer or "",
                metric="LocA",
            )
        distance = math.dist(point, coords)
        return Verdict.scored(
            1.0 if distance < radius else 0.0,
            _show(point),
            metric="LocA",
            gold=list(coords),
            radius=radius,
            distance=distance,
        )


COURTSI = register(CourtSIEvaluator())
