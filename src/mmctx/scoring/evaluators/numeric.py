"""Numeric evaluators: ``numeric`` (exact or within tolerance) and ``roe`` (Financial Report ROE).

``numeric``
  Extraction: the last ``Answer:`` line, else the last ``\\boxed{}``, else a response that is
  one short line holding a number. Numbers are read by `text.parse_number` (thousands
  separators, scientific notation, accounting negatives; units ignored).
  Scoring against ``gold = {"value", "rel_tol", "abs_tol", "unit"}``: a prediction written
  with ``%`` is divided by 100 unless the gold's unit is a percent ("15%" == 0.15; with a
  ``%`` gold, "15%" == 15). ``exact`` = equal up to float noise; ``within_tolerance`` =
  ``|ŷ−y| ≤ abs_tol`` or ``|ŷ−y| ≤ rel_tol·|y|``. Score 1 if either. Detail carries
  ``abs_error`` and ``rel_error`` (None when the gold is 0) for MAE-style aggregation.

``roe``
  Extraction: the value after the LAST ``ROE:`` marker (also ``ROE：``, ``ROE =``, ``**ROE:**``,
  ``净资产收益率（ROE）：``); an empty marker line takes the next non-empty line.
  Percent rule (the gold is in percentage points, ``{"value": 15.23}`` meaning 15.23 %; a
  gold whose ``unit`` is ``"fraction"`` is multiplied by 100 first):
    - a value written with ``%`` (or "percent") is in percentage points: "15.23%" → 15.23;
    - a bare value with ``|v| < 1`` is a fraction: "0.1523" → 15.23;
    - a bare value with ``|v| ≥ 1`` is in percentage points: "15.23" → 15.23.
  So an ROE under 1 % written without a ``%`` sign ("0.8") is read as a fraction (80 %): the
  prompt asks for a percent, and a fraction is by far the likelier reading of a bare "0.8".
  ``exact`` = both equal after rounding to 2 decimals (half up) in percentage points, or
  within the gold's tolerance (``abs_tol`` in points, ``rel_tol`` relative). Score 1 iff exact.
  Detail carries ``abs_error`` in percentage points for the MAE column.
  One value, not a hedge: the paper scores the final ROE by exact match, so a final that states
  several different values — a range ("12%–13%", "between 12% and 13%"), alternatives ("12.5% or
  13%", "12.5%/13%", "12.5% (or 13%)") — is ``unparsed`` with rule ``hedged``, never scored as its
  first number. What counts: every number of the value after its last ``=`` / ``≈`` (so a
  calculation "0.05 × 2.5 = 12.5%" states 12.5 %), except numbers in a parenthetical aside
  ("12.5% (up from 11.2% last year)") unless the aside offers an alternative ("(or 13%)"), and
  except a bare calendar year ("12.5% in 2024"). The same value in two forms is one value:
  "12.5% (0.125)" and "12.5%, i.e. 0.125" agree after the percent rule and rounding to 2 decimals.
Non-numeric answers are ``unparsed``; an item without a numeric gold is ``invalid_sample``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import ClassVar

from mmctx.schema import Sample

from .base import Extraction, Judge, Verdict, register
from .text import ParsedNumber, answer_line, boxed, final_answer_text, parse_number, parsed_numbers, strip_markup

PERCENT_UNITS = frozenset({"%", "percent", "pct", "percentage", "percentage points", "pp"})
_SHORT_LINE = 40  # a whole response this short, on one line, may be the bare answer


@dataclass(frozen=True)
class GoldNumber:
    value: float
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    unit: str = ""

    @property
    def percent(self) -> bool:
        return self.unit.strip().casefold() in PERCENT_UNITS


def gold_number(sample: Sample) -> GoldNumber | None:
    """The numeric gold of ``sample`` (the dict of `Sample`'s docstring, or a bare number)."""
    gold = sample.gold
    if isinstance(gold, (int, float)) and not isinstance(gold, bool):
        return GoldNumber(float(gold))
    if not isinstance(gold, dict) or not isinstance(gold.get("value"), (int, float)) or isinstance(gold["value"], bool):
        return None
    return GoldNumber(
        float(gold["value"]),
        float(gold.get("rel_tol") or 0.0),
        float(gold.get("abs_tol") or 0.0),
        str(gold.get("unit") or ""),
    )


def within(pred: float, gold: GoldNumber) -> bool:
    """``pred`` within the gold's absolute or relative tolerance (float noise forgiven)."""
    error = abs(pred - gold.value)
    noise = 1e-9 * max(1.0, abs(gold.value))
    return error <= gold.abs_tol + noise or (gold.rel_tol > 0 and error <= gold.rel_tol * abs(gold.value) + noise)


def errors(pred: float, gold: float) -> tuple[float, float | None]:
    """Absolute error and relative error (None when the gold is 0 and the error is not)."""
    abs_error = abs(pred - gold)
    if gold == 0:
        return abs_error, (0.0 if abs_error == 0 else None)
    return abs_error, abs_error / abs(gold)


def extract_number(response: str) -> Extraction:
    """The final numeric answer: ``Answer:`` line, ``\\boxed{}``, or a one-line response."""
    text = final_answer_text(response)
    if not text:
        return Extraction(None, issue="the response is empty; end with a line 'Answer: <number>'")
    issue = ""
    for rule, value in (("answer_line", answer_line(text)), ("boxed", boxed(text))):
        if value is None:
            continue
        if parse_number(value).value is not None:
            return Extraction(value, rule)
        issue = issue or f"the final answer {value[:60]!r} holds no number"
    whole = strip_markup(text)
    if "\n" not in whole and len(whole) <= _SHORT_LINE and parse_number(whole).value is not None:
        return Extraction(whole, "whole")
    return Extraction(None, issue=issue or "no final line 'Answer: <number>'")


def score_number(sample: Sample, answer: str) -> Verdict:
    gold = gold_number(sample)
    if gold is None:
        return Verdict.failed("invalid_sample", "the item has no numeric gold {'value': ...}", prediction=answer or "")
    parsed = parse_number(answer or "")
    if parsed.value is None:
        return Verdict.failed(
            "unparsed", f"the final answer {(answer or '')[:60]!r} is not a number", prediction=answer or ""
        )
    pred = parsed.value / 100 if parsed.percent and not gold.percent else parsed.value
    abs_error, rel_error = errors(pred, gold.value)
    exact = math.isclose(pred, gold.value, rel_tol=1e-9, abs_tol=1e-12)
    ok = within(pred, gold)
    return Verdict.scored(
        1.0 if exact or ok else 0.0,
        f"{pred:g}",
        gold=gold.value,
        exact=exact,
        within_tolerance=ok,
        abs_error=abs_error,
        rel_error=rel_error,
        unit=gold.unit,
    )


@dataclass(frozen=True)
class NumericEvaluator:
    name: str = "numeric"
    free_form: bool = False
    judge: Judge | None = None
    answer_types: ClassVar[tuple[str, ...]] = ("number",)

    def extract(self, sample: Sample, response: str) -> Extraction:
        return extract_number(response)

    def score(self, sample: Sample, answer: str) -> Verdict:
        return score_number(sample, answer)


# ---------------------------------------------------------------- ROE

_ROE_MARKER = re.compile(r"\bROE\b\s*(?:[(（][^)）\n]*[)）])?[)）]?[ \t*_]*[:：=][ \t]*(?P<value>[^\n]*)", re.I)
_HUNDRED = Decimal(100)
_CENT = Decimal("0.01")


def roe_value(text: str) -> str | None:
    """The text after the last ``ROE:`` marker (the next non-empty line when that is empty)."""
    matches = list(_ROE_MARKER.finditer(text or ""))
    if not matches:
        return None
    last = matches[-1]
    value = strip_markup(last.group("value"))
    if not value:
        rest = text[last.end() :].split("\n")
        value = next((strip_markup(line) for line in rest if strip_markup(line)), "")
    return value


def as_percent_points(value: float, percent: bool) -> tuple[Decimal, str]:
    """``value`` in percentage points, and which rule of the module docstring read it."""
    exact = Decimal(repr(value))  # repr round-trips, so "0.1523" stays 0.1523, not 0.15229999…
    if percent:
        return exact, "percent sign"
    if abs(value) < 1:
        return exact * _HUNDRED, "fraction"
    return exact, "percentage points"


def _round2(x: Decimal) -> Decimal:
    return x.quantize(_CENT, rounding=ROUND_HALF_UP)


_EQUALS = re.compile(r"=|≈|\\approx")
_ASIDE = re.compile(r"[(（]([^()（）]*)[)）]")
# An aside that offers another value rather than commenting on this one: "(or 13%)", "(~13%)".
_ALTERNATIVE = re.compile(
    r"^\s*(?:(?:or|to|vs\.?|versus|alternatively|possibly|maybe|perhaps)\b|[~/\-–—]|或|至|到|约|大约)", re.I
)
HEDGED = "hedged"  # the extraction rule that names a final stating several values


def _is_year(n: ParsedNumber) -> bool:
    v = n.value
    return v is not None and not n.percent and v == int(v) and 1900 <= v <= 2199


def roe_stated_values(value: str) -> list[Decimal]:
    """The distinct ROE values (percentage points, 2 decimals) a final ``ROE:`` value states, in order.

    One entry for a proper answer; several for a hedge (see the module docstring for what counts).
    """
    text = value or ""
    cut = [m.end() for m in _EQUALS.finditer(text) if parsed_numbers(text[m.end() :])]
    segment = text[cut[-1] :] if cut else text
    main = _ASIDE.sub(lambda m: m.group(0) if _ALTERNATIVE.match(m.group(1)) else " ", segment)
    numbers = [n for n in parsed_numbers(main) if not _is_year(n)]
    if not numbers:  # the parenthesis is the value itself: an accounting negative "(3.4%)"
        numbers = [n for n in parsed_numbers(segment) if not _is_year(n)]
    distinct: list[Decimal] = []
    for n in numbers:
        if n.value is None:
            continue
        points = _round2(as_percent_points(n.value, n.percent)[0])
        if points not in distinct:
            distinct.append(points)
    return distinct


def _hedge_issue(values: list[Decimal]) -> str:
    shown = ", ".join(f"{v}%" for v in values[:4])
    return f"the final ROE states several values ({shown}); give exactly one value: 'ROE: <value>%'"


@dataclass(frozen=True)
class RoeEvaluator:
    name: str = "roe"
    free_form: bool = False
    judge: Judge | None = None
    answer_types: ClassVar[tuple[str, ...]] = ("number",)

    def extract(self, sample: Sample, response: str) -> Extraction:
        text = final_answer_text(response)
        value = roe_value(text)
        if value is None:
            return Extraction(None, issue="no final line 'ROE: <value>%'")
        if parse_number(value).value is None:
            return Extraction(None, issue=f"the last 'ROE:' line holds no number ({value[:60]!r})")
        stated = roe_stated_values(value)
        if len(stated) > 1:
            return Extraction(None, rule=HEDGED, issue=_hedge_issue(stated))
        return Extraction(value, "roe_marker")

    def score(self, sample: Sample, answer: str) -> Verdict:
        gold = gold_number(sample)
        if gold is None:
            return Verdict.failed("invalid_sample", "the item has no numeric ROE gold", prediction=answer or "")
        parsed = parse_number(answer or "")
        if parsed.value is None:
            return Verdict.failed(
                "unparsed", f"the ROE answer {(answer or '')[:60]!r} is not a number", prediction=answer or ""
            )
        stated = roe_stated_values(answer)
        if len(stated) > 1:
            return Verdict.failed("unparsed", _hedge_issue(stated), prediction=answer, rule=HEDGED)
        pred, rule = as_percent_points(parsed.value, parsed.percent)
        gold_pct = Decimal(repr(gold.value))
        if gold.unit.strip().casefold() in ("fraction", "ratio", "decimal"):
            gold_pct *= _HUNDRED
        rounded_equal = _round2(pred) == _round2(gold_pct)
        tolerant = within(float(pred), GoldNumber(float(gold_pct), gold.rel_tol, gold.abs_tol))
        exact = rounded_equal or tolerant
        return Verdict.scored(
            1.0 if exact else 0.0,
            f"{_round2(pred)}%",
            gold=float(gold_pct),
            prediction_pct=float(pred),
            read_as=rule,
            exact=exact,
            rounded_equal=rounded_equal,
            abs_error=float(abs(pred - gold_pct)),
        )


NUMERIC = register(NumericEvaluator())
ROE = register(RoeEvaluator())
