"""MMLongBench-Doc's scoring rules, per answer format: the judge-free "baseline match" of MMLongBench-Pic.

MMLongBench-Doc (``eval/eval_score.py`` of mayubo2333/MMLongBench-Doc) scores an extracted
answer by the GOLD's answer format (its ``answer_format`` field: Int, Float, Str, List, None),
after its extractor returned the answer and a type. The rules, as implemented here:

  ``Int``    the answer, read as a number, equals the gold exactly ("400" == "400.0"). Upstream
             truncates the prediction (``int(float("400.7")) == 400``); here 400.7 is not 400.
  ``Float``  equal within 1 % relative, or equal when both are rounded to the shorter of their
             decimal precisions (at least 2), against the gold, the gold / 100 and the gold × 100
             — so a percentage and its fraction agree ("12.5" == "12.5%" == "0.125").
  ``Str`` / ``None`` (not answerable)
             strings of an exact kind (a web address, a ``.py`` / ``.ipynb`` file, "page …", a
             phone-like or date-like number, a time with a.m./p.m., an e-mail address) must be
             equal; any other string scores its ANLS similarity, ``1 − Levenshtein / max length``,
             set to 0 when not above the threshold 0.5 (so a near miss earns partial credit).
  ``List``   order-free: both lists sorted, lengths equal, then joined equality when the gold's
             items are numbers or of an exact kind, else the minimum ANLS over the paired items
             (every item must match). A prediction that is not a JSON/Python list literal is split
             on newlines or ``;``, else on ``,`` (upstream wraps it as a one-item list).
Both sides are cleaned first as upstream does: lower-cased, parenthesised asides removed,
surrounding quotes, a leading ``$`` and a trailing ``%`` stripped. Numbers are read only from a
cleaned text that is a plain number (thousands separators allowed).

The item's format comes from ``meta["answer_format"]`` (MMLongBench-Doc's own field) when the item
carries it; else it is inferred from the gold: a list → List; "Not answerable" → None; an
integer → Int; another number → Float; any other text → Str. A gold given as several aliases
scores its best alias.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from mmctx.schema import Sample

from .text import is_plain_number, parse_number

ANSWER_FORMATS: tuple[str, ...] = ("Int", "Float", "Str", "List", "None")
ANLS_THRESHOLD = 0.5
FLOAT_REL_TOL = 0.01
_NOT_ANSWERABLE = "not answerable"

_ASIDE = re.compile(r"\s*\([^)]*\)")
_QUOTES = re.compile(r"^['\"]|['\"]$")
_EXACT_KINDS: tuple[re.Pattern[str], ...] = (
    re.compile(r"https://"),
    re.compile(r"\.(?:py|ipynb)$"),
    re.compile(r"^page"),
    re.compile(r"^\d+(?:-\d+|\s\d+)?$"),  # phone-like numbers
    re.compile(r"a\.m\.|p\.m\."),
    re.compile(r"^\d{4}[-\s]\d{2}(?:[-\s]\d{2})?$"),  # YYYY-MM-DD, YYYY-MM
    re.compile(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$"),
)


def clean_string(s: Any) -> str:
    """Upstream's cleaning: lower case, asides in parentheses, quotes, a leading $ and trailing % removed."""
    text = str(s).lower().strip()
    text = _ASIDE.sub("", text).strip()
    text = _QUOTES.sub("", text).strip()
    return text.lstrip("$").strip().rstrip("%").strip()


def is_exact_kind(s: str) -> bool:
    """A string that must match exactly rather than by similarity (addresses, files, dates, …)."""
    return any(p.search(s) for p in _EXACT_KINDS)


def levenshtein(a: str, b: str) -> int:
    if len(a) > len(b):
        a, b = b, a
    previous = list(range(len(a) + 1))
    for j, cb in enumerate(b, 1):
        current = [j]
        for i, ca in enumerate(a, 1):
            current.append(previous[i - 1] if ca == cb else 1 + min(previous[i - 1], previous[i], current[-1]))
        previous = current
    return previous[-1]


def anls(gold: str, pred: str, threshold: float = ANLS_THRESHOLD) -> float:
    """Normalised Levenshtein similarity; 0 when it is not above ``threshold``."""
    length = max(len(gold), len(pred))
    similarity = 1.0 - (levenshtein(gold, pred) / length if length else 0.0)
    return similarity if similarity > threshold else 0.0


def _decimals(x: float) -> int:
    text = repr(float(x))
    return len(text.split(".")[-1]) if "." in text and "e" not in text else 3


def float_equal(gold: float, pred: float) -> bool:
    """Within 1 % of, or equal at the shorter precision (≥ 2 decimals) to, the gold, gold / 100 or gold × 100."""
    for candidate in (gold / 100, gold, gold * 100):
        if math.isclose(candidate, pred, rel_tol=FLOAT_REL_TOL):
            return True
        places = max(min(_decimals(pred), _decimals(candidate)), 2)
        if round(pred, places) == round(candidate, places):
            return True
    return False


def _number(text: str) -> float | None:
    """The number a cleaned answer is, when it is a plain number and nothing else."""
    if not is_plain_number(text):
        return None
    return parse_number(text).value


def _as_list(value: Any) -> list[Any]:
    """A gold or predicted list: a list, a JSON / Python list literal, else the text split into items."""
    if isinstance(value, list):
        return value
    text = str(value).strip()
    if text.startswith("["):
        for read in (json.loads, ast.literal_eval):
            try:
                parsed = read(text)
            except (ValueError, SyntaxError):
                continue
            if isinstance(parsed, list):
                return parsed
    parts = re.split(r"\n|;", text) if re.search(r"\n|;", text) else text.split(",")
    return [p for p in (q.strip() for q in parts) if p]


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _string_score(gold: str, pred: str) -> float:
    g, p = clean_string(gold), clean_string(pred)
    if is_exact_kind(g):
        return float(g == p)
    return anls(g, p)


def mmlongbench_score(gold: Any, pred: str, fmt: str) -> float:
    """MMLongBench-Doc's score of ``pred`` against ``gold`` under answer format ``fmt`` (see the module)."""
    if fmt not in ANSWER_FORMATS:
        raise ValueError(f"answer_format must be one of {list(ANSWER_FORMATS)}, not {fmt!r}")
    if fmt == "Int":
        g, p = _number(clean_string(gold)), _number(clean_string(pred))
        return float(g is not None and p is not None and g == int(g) and p == g)
    if fmt == "Float":
        g, p = _number(clean_string(gold)), _number(clean_string(pred))
        return float(g is not None and p is not None and float_equal(g, p))
    if fmt in ("Str", "None"):
        return _string_score(str(gold), pred)
    golds = [clean_string(g) for g in _as_list(gold)]
    preds = [clean_string(p) for p in _as_list(pred)]
    if not golds or len(golds) != len(preds):
        return 0.0
    golds, preds = sorted(golds), sorted(preds)
    if _is_float(golds[0]) or is_exact_kind(golds[0]):
        return float("-".join(golds) == "-".join(preds))
    return min(anls(g, p) for g, p in zip(golds, preds))


def gold_texts(sample: Sample) -> list[Any]:
    """The gold(s) to score against: the list itself for List, else each alias as text."""
    gold = sample.gold
    if sample.answer_type == "list":
        return [gold]
    if isinstance(gold, dict) and "value" in gold:
        value = gold["value"]
        return [f"{value:g}" if isinstance(value, float) else str(value)]
    if isinstance(gold, list):
        return [str(g) for g in gold if str(g).strip()]
    if gold is not None and str(gold).strip():
        return [str(gold)]
    return [sample.answer] if sample.answer.strip() else []


def answer_format(sample: Sample) -> str:
    """The item's MMLongBench-Doc answer format: its own ``meta["answer_format"]``, else inferred from the gold."""
    given = sample.meta.get("answer_format")
    if given is not None:
        if given not in ANSWER_FORMATS:
            raise ValueError(f"meta answer_format must be one of {list(ANSWER_FORMATS)}, not {given!r}")
        return str(given)
    gold = sample.gold
    if sample.answer_type == "list" or (isinstance(gold, list) and sample.answer_type != "string"):
        return "List"
    if isinstance(gold, dict) and isinstance(gold.get("value"), (int, float)):
        value = float(gold["value"])
        exact = not gold.get("rel_tol") and not gold.get("abs_tol")
        return "Int" if exact and value == int(value) else "Float"
    texts = gold_texts(sample)
    first = clean_string(texts[0]) if texts else ""
    if first == _NOT_ANSWERABLE:
        return "None"
    number = _number(first)
    if number is not None:
        return "Int" if re.fullmatch(r"[-+]?[\d,]+", first) else "Float"
    return "Str"
