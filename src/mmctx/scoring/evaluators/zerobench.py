"""Short-answer rule evaluators: ``zerobench`` and ``reasonmap_plus``.

``zerobench`` (ZeroBench's "{final answer}" convention)
  Extraction: the content of the last top-level ``{…}`` in the final answer (a ``\\boxed{…}``
  is one too); nothing else is accepted, as ZeroBench's own scorer reads only curly braces.
  Scoring against ``gold`` (a string or a list of aliases). ZeroBench's released scorer compares
  the braced content with the gold as strings: stripped, lower-cased, exactly equal. The
  CLBench-V paper scores ZeroBench by "normalized / numeric match", so here:
    - when the braced answer AND the alias are both plain numbers ("11.90", "$1,234", "-5%":
      a number, optionally with a currency sign or ``%``, and nothing else), they are compared
      numerically: "11.9" == "11.90", "1,990" == "1990";
    - otherwise `text.normalize_text` equality (case, punctuation, articles, blanks ignored).
  A number carrying anything else — a plural or decade ("1990s"), a unit word ("12 dollars"),
  a second number ("11.9 or 12") — is text, never coerced to the number inside it: "{1990s}"
  does not match "1990", as it does not under ZeroBench's own exact match. Score 1 if any
  alias matches.

``reasonmap_plus`` (ReasonMap-Plus, ``main_plus.py`` of fscdc/ReasonMap)
  Extraction, as upstream: the last ``\\boxed{…}``; else (the suite's suffix) the last
  ``Answer:`` line; else the text after the last "the final answer is" / "the answer is" /
  "the correct answer is" / "the answer should be" up to the end of its sentence; else a
  response that is one short line. Trailing ``.`` and leading ``:`` are dropped.
  Scoring by the gold's kind:
    - yes/no (gold "yes"/"no"/"true"/"false", or "1"/"0" when ``meta["type"]`` is TorF*):
      the answer's first word must be yes/true or no/false (upstream needs the whole answer
      to be exactly "yes"/"no"; a trailing "." or reason is tolerated here);
    - letter (gold one letter, or an integer 0–3 when ``meta["type"]`` is ``Counting1``, as
      upstream stores it): the answer must be that option letter (read as in ``choice``);
    - integer (gold an integer): the answer's number must be an integer equal to it
      ("5 stations" is read as 5; upstream's ``int()`` would refuse it);
    - anything else: normalised text equality.
  An answer not of the gold's kind (no number, no yes/no, no letter) is ``unparsed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from mmctx.schema import Sample

from .base import Extraction, Judge, Verdict, register
from .choice import option_labels, read_letter
from .text import (
    answer_line,
    boxed,
    curly,
    final_answer_text,
    is_plain_number,
    normalize_text,
    parse_number,
    strip_markup,
)

_YES = frozenset({"yes", "true", "correct", "right", "y"})
_NO = frozenset({"no", "false", "incorrect", "wrong", "n"})
_SHORT_LINE = 40


def aliases(sample: Sample) -> list[str]:
    """The accepted answers: ``gold`` (a string or a list of aliases), else ``answer``."""
    gold = sample.gold
    if isinstance(gold, str) and gold.strip():
        return [gold]
    if isinstance(gold, list):
        found = [str(g) for g in gold if str(g).strip()]
        if found:
            return found
    if isinstance(gold, (int, float)) and not isinstance(gold, bool):
        return [str(gold)]
    return [sample.answer] if sample.answer.strip() else []


def match_alias(answer: str, alias: str) -> str | None:
    """How ``answer`` matches ``alias`` ("numeric" or "text"), or None.

    Numbers compare as numbers only when both sides are plain numbers: a number with words
    beside it ("1990s", "12 dollars") is text and must equal the alias as text.
    """
    if is_plain_number(alias) and is_plain_number(answer):
        pred, gold = parse_number(answer).value, parse_number(alias).value
        if pred is not None and gold is not None:
            return "numeric" if abs(pred - gold) <= 1e-9 * max(1.0, abs(gold)) else None
    norm = normalize_text(answer)
    return "text" if norm and norm == normalize_text(alias) else None


@dataclass(frozen=True)
class ZeroBenchEvaluator:
    name: str = "zerobench"
    free_form: bool = False
    judge: Judge | None = None
    answer_types: ClassVar[tuple[str, ...]] = ("string",)

    def extract(self, sample: Sample, response: str) -> Extraction:
        value = curly(final_answer_text(response))
        if value is None:
            return Extraction(None, issue="no final answer in curly braces, like {final answer}")
        if not value.strip():
            return Extraction(None, issue="the curly braces {} are empty; put the final answer inside them")
        return Extraction(value.strip(), "curly")

    def score(self, sample: Sample, answer: str) -> Verdict:
        golds = aliases(sample)
        if not golds:
            return Verdict.failed("invalid_sample", "the item has no gold answer", prediction=answer or "")
        if not (answer or "").strip():
            return Verdict.failed("unparsed", "the final answer is empty")
        for alias in golds:
            how = match_alias(answer, alias)
            if how is not None:
                return Verdict.scored(1.0, answer.strip(), gold=golds, matched=alias, match=how)
        return Verdict.scored(0.0, answer.strip(), gold=golds, matched=None, match=None)


# ---------------------------------------------------------------- ReasonMap-Plus

_PHRASES = re.compile(r"the\s+(?:final\s+|correct\s+)?answer\s+(?:is|should\s+be)\s*:?", re.I)


def _after_phrase(text: str) -> str | None:
    found = list(_PHRASES.finditer(text))
    if not found:
        return None
    rest = text[found[-1].end() :].strip().split("\n")[0]
    return rest.split(". ")[0]


def _tidy(value: str) -> str:
    return strip_markup(value).rstrip(".").lstrip(":").strip()


def _gold_kind(sample: Sample) -> tuple[str, str]:
    """(kind, canonical gold): kind in yesno / letter / int / text."""
    golds = aliases(sample)
    gold = golds[0].strip() if golds else ""
    qtype = str(sample.meta.get("type", ""))
    low = gold.casefold()
    if low in ("yes", "no", "true", "false"):
        return "yesno", "yes" if low in ("yes", "true") else "no"
    if qtype.startswith("TorF") and low in ("0", "1"):
        return "yesno", "yes" if low == "1" else "no"
    if len(gold) == 1 and gold.isalpha():
        return "letter", gold.upper()
    if qtype == "Counting1" and gold in ("0", "1", "2", "3"):
        return "letter", "ABCD"[int(gold)]
    if re.fullmatch(r"[-+]?\d+", gold):
        return "int", str(int(gold))
    return "text", gold


def _polarity(answer: str) -> str | None:
    words = normalize_text(answer).split()
    if not words:
        return None
    return "yes" if words[0] in _YES else "no" if words[0] in _NO else None


@dataclass(frozen=True)
class ReasonMapPlusEvaluator:
    name: str = "reasonmap_plus"
    free_form: bool = False
    judge: Judge | None = None
    answer_types: ClassVar[tuple[str, ...]] = ("string",)

    def extract(self, sample: Sample, response: str) -> Extraction:
        text = final_answer_text(response)
        if not text:
            return Extraction(None, issue="the response is empty; end with a line 'Answer: <answer>'")
        for rule, value in (
            ("boxed", boxed(text)),
            ("answer_line", answer_line(text)),
            ("answer_is", _after_phrase(text)),
        ):
            if value is not None and _tidy(value):
                return Extraction(_tidy(value), rule)
        whole = _tidy(text)
        if whole and "\n" not in whole and len(whole) <= _SHORT_LINE:
            return Extraction(whole, "whole")
        return Extraction(None, issue="no \\boxed{} answer, no final line 'Answer: <answer>' and no 'the answer is …'")

    def score(self, sample: Sample, answer: str) -> Verdict:
        kind, gold = _gold_kind(sample)
        if not gold:
            return Verdict.failed("invalid_sample", "the item has no gold answer", prediction=answer or "")
        answer = _tidy(answer or "")
        if kind == "yesno":
            pred = _polarity(answer)
            if pred is None:
                return Verdict.failed(
                    "unparsed", f"the final answer {answer[:60]!r} is not yes or no", prediction=answer
                )
        elif kind == "letter":
            labels, _ = option_labels(sample)
            pred, issue = read_letter(answer, labels if gold in labels else list("ABCD"))
            if pred is None:
                return Verdict.failed("unparsed", issue, prediction=answer)
        elif kind == "int":
            value = parse_number(answer).value
            if value is None:
                return Verdict.failed(
                    "unparsed", f"the final answer {answer[:60]!r} is not a number", prediction=answer
                )
            pred = str(int(value)) if value == int(value) else f"{value:g}"
        else:
            pred = answer
            return Verdict.scored(float(normalize_text(pred) == normalize_text(gold)), pred, gold=gold, kind=kind)
        return Verdict.scored(1.0 if pred == gold else 0.0, pred, gold=gold, kind=kind)


ZEROBENCH = register(ZeroBenchEvaluator())
REASONMAP_PLUS = register(ReasonMapPlusEvaluator())
