"""Text helpers every rule evaluator shares: final-answer text, answer markers, numbers.

``final_answer_text``  the response minus its reasoning trace (`strip_reasoning`, plus Kimi's
                       ``◁think▷ … ◁/think▷`` delimiters, which ReasonMap splits on); the raw
                       response is kept elsewhere by the caller.
``answer_line``        the value of the LAST line ``Answer: …`` (markdown bold and a full-width
                       colon tolerated; an empty value takes the next non-empty line).
``boxed`` / ``curly``  the last ``\\boxed{…}`` / last top-level ``{…}``, nested braces balanced.
``normalize_text``     NFKC, casefold, punctuation deleted (dashes and ``/`` become blanks), articles
                       (a/an/the) dropped, blanks collapsed; a ``.``, ``,`` or ``:`` between two
                       digits is kept, so "3.5" never equals "35".
``parse_number``       the number an answer states, with whether a ``%`` (or "percent") went with it.

Number reading (``parse_number``), all documented choices:
  - thousands separators ``1,234.5`` and ``1 234`` (groups of exactly three digits, the first of
    one to three digits not starting with 0); LaTeX ``1{,}234`` and ``1\\,234`` likewise;
  - a comma between digits that is not such a grouping is ambiguous (a decimal comma "1,5" or
    a malformed grouping "1,234,56", "1,23", "1 234,5"): the number is unreadable, and when it
    is the one chosen, ``value`` is None (the evaluator says unparsed) rather than a misread 1;
    the one exception is a single leading zero, "0,5" / "-0,25", which cannot be a thousands
    grouping and is read as the decimal 0.5 / -0.25;
  - fractions of two plain integers ``1/2``, ``-3/4``, ``3 / 4``, LaTeX ``\\frac{1}{2}`` (also
    ``\\dfrac`` / ``\\tfrac``) → 0.5, -0.75; not a date-like ``1/2/2020`` (read as before: 1), not a
    decimal ``0.5/2`` (0.5); a zero denominator makes the number unreadable;
  - scientific ``1.2e3``, ``1.2E-3``, ``1.2×10^3``, ``1.2 x 10^{3}``, ``1.2\\times10^{-3}``, ``1.2·10³``;
    powers ``10^3``, ``10^-3``, ``10^{3}``, ``10³``, ``2^10`` (an overflowing power is unreadable);
  - signs: ``-``, ``+``, the Unicode minus ``−`` and similar dashes; an accounting negative
    ``(123)`` when the parentheses wrap the number (and optional currency / ``%``) alone;
  - units and currency are ignored ("3.5 m", "$12", "12元"); scale words ("million", "万") are
    NOT applied: they count as unit text, since a gold's unit says what scale it is in;
  - which number: the first number after the last ``=`` / ``≈`` that is followed by one
    ("2 + 3 = 5" → 5, "ROE = 0.12 × 1.5 = 18%" → 18%); otherwise the first number in the text
    ("15.23% (0.1523)" → 15.23%). ``numbers_in`` lists every number, for callers that need
    the answer to state exactly one.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from typing import NamedTuple

from mmctx.extract.prepare import clean, mark_noise, strip_reasoning

__all__ = [
    "ParsedNumber",
    "answer_line",
    "boxed",
    "curly",
    "final_answer_text",
    "is_plain_number",
    "normalize_text",
    "numbers_in",
    "parse_number",
    "parsed_numbers",
    "strip_markup",
]

_KIMI_CLOSE = "◁/think▷"
_KIMI_OPEN = "◁think▷"


def final_answer_text(response: str) -> str:
    """The answer part of a raw response: reasoning traces and special tokens removed."""
    text = mark_noise(response or "")
    if _KIMI_CLOSE in text:
        text = text.rsplit(_KIMI_CLOSE, 1)[1]
    elif _KIMI_OPEN in text:  # stopped mid-thought: nothing after it is an answer
        text = text.split(_KIMI_OPEN, 1)[0]
    return strip_reasoning(text)


def strip_markup(s: str) -> str:
    """Markdown emphasis, headings and LaTeX text wrappers removed (``**B**`` → ``B``)."""
    return clean(s).strip()


def _marker_line(marker: str) -> re.Pattern[str]:
    # "Answer: B", "**Answer:** B", "**Answer**: B", "## Final Answer: B", "- Answer：B"
    return re.compile(
        rf"^[ \t>#*_\-•]*(?:final[ \t]+)?{re.escape(marker)}[ \t]*[*_]*[ \t]*[:：][ \t]*(?P<value>.*)$",
        re.I | re.M,
    )


def answer_lines(text: str, marker: str = "Answer") -> list[re.Match[str]]:
    """Every line starting with ``<marker>:``, in text order (group ``value`` holds what follows)."""
    return list(_marker_line(marker).finditer(text or ""))


def answer_line(text: str, marker: str = "Answer") -> str | None:
    """The value of the last line starting with ``<marker>:``; None when there is none or it is empty."""
    matches = answer_lines(text, marker)
    if not matches:
        return None
    last = matches[-1]
    value = strip_markup(last.group("value"))
    if not value:  # "**Answer:**\nB": the value is on the next non-empty line
        rest = text[last.end() :].split("\n")
        value = next((strip_markup(line) for line in rest if strip_markup(line)), "")
    return value or None


def _balanced(text: str, open_at: int) -> int | None:
    """Index just past the brace closing the one at ``open_at``; None when it never closes."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def boxed(text: str) -> str | None:
    """The content of the last closed ``\\boxed{…}`` (or ``\\fbox{…}``), nested braces kept."""
    found = None
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text or ""):
        end = _balanced(text, m.end() - 1)
        if end is not None:
            found = text[m.end() : end - 1]
    return None if found is None else found.strip()


def curly(text: str) -> str | None:
    """The content of the last top-level ``{…}`` (ZeroBench's ``{final answer}``)."""
    text = text or ""
    found, i = None, 0
    while i < len(text):
        if text[i] == "{":
            end = _balanced(text, i)
            if end is None:
                break
            found, i = text[i + 1 : end - 1], end
        else:
            i += 1
    if found is None:
        return None
    inner = boxed(found)  # "{\boxed{12}}"
    return strip_markup(inner if inner is not None else found)


_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = set(string.punctuation)


def _is_punct(ch: str) -> bool:
    return ch in _PUNCT or unicodedata.category(ch).startswith("P")


def normalize_text(s: str) -> str:
    """NFKC, casefold, punctuation and English articles removed, whitespace collapsed."""
    s = unicodedata.normalize("NFKC", s or "").casefold()
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    kept = []
    for i, ch in enumerate(s):
        between_digits = 0 < i < len(s) - 1 and s[i - 1].isdigit() and s[i + 1].isdigit()
        if not _is_punct(ch) or (ch in ".,:" and between_digits):
            kept.append(ch)
        elif ch == "/" or unicodedata.category(ch) == "Pd":
            kept.append(" ")  # "well-known" == "well known"; "U.S.A." == "USA" (SQuAD deletes the rest)
    s = _ARTICLES.sub(" ", "".join(kept))
    return " ".join(s.split())


# ---------------------------------------------------------------- numbers


class ParsedNumber(NamedTuple):
    value: float | None
    percent: bool = False


_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUPER_RUN = re.compile(r"[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_DASHES = str.maketrans({"−": "-", "–": "-", "‒": "-", "—": "-", "﹣": "-", "－": "-"})
_GROUPED = r"(?:[1-9]\d{0,2}(?:,\d{3})+|\d{1,3}(?: \d{3})+)(?!\d|,\d)"
_MANTISSA = rf"(?:{_GROUPED}|\d+)(?:\.\d+)?|\.\d+"
_EXPONENT = (
    r"(?:[eE][-+]?\d+(?![\w])"
    r"|\s*(?:×|x|X|\*|·|\\times|\\cdot)\s*10\s*\^\s*\{?\s*(?P<pow>[-+]?\d+)\s*\}?"
    r"|[ \t]*\^[ \t]*\{?[ \t]*(?P<power>[-+]?\d+)[ \t]*\}?(?![\d.]))"
)
# fraction of two plain integers, not part of a date "1/2/2020" nor of a decimal "1/2.5"
_FRACTION = r"(?<!/)(?P<num>\d+)[ \t]*/[ \t]*(?P<den>\d+)(?!\d|[.,]\d|[ \t]*/[ \t]*\d)"
_DECIMAL_COMMA = r"(?P<dcomma>0,\d+)(?!\d|[.,]\d)"  # "0,5": a leading 0 cannot open a grouping
# a comma between digits that is no valid thousands grouping: "1,5", "1,234,56", "1 234,5"
_AMBIGUOUS = rf"(?!{_GROUPED})(?P<ambiguous>\d+(?: \d{{3}})*(?:,\d+)+(?:\.\d+)?)"
# A letter glued before a number makes it part of a word ("A3", "x2"); CJK characters do not, as
# those scripts write no spaces ("约12.5%" is about 12.5 %, "或13%" is "or 13 %").
_GLUED = r"(?![\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af])\w"
_NUMBER = re.compile(
    rf"(?<![.])(?<!{_GLUED})(?P<sign>[-+]\s?)?"
    rf"(?:{_FRACTION}|{_DECIMAL_COMMA}|{_AMBIGUOUS}|(?P<mant>{_MANTISSA})(?P<exp>{_EXPONENT})?)"
    rf"(?P<pct>\s*(?:%|percent\b|per cent\b))?",
    re.I,
)
_CURRENCY = r"[$€£¥₹₩]|US\$|RMB|CNY|USD|EUR"


def _prepare_number_text(s: str) -> str:
    s = _SUPER_RUN.sub(lambda m: "^" + m.group().translate(_SUPERSCRIPT), s or "")
    s = unicodedata.normalize("NFKC", s).translate(_DASHES)
    s = s.replace("{,}", ",").replace("\\,", " ").replace("\\!", "").replace("\\%", "%").replace("\\ ", " ")
    s = re.sub(r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}", r"\1/\2", s)
    return re.sub(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}", r"\1", s)


def _value(m: re.Match[str]) -> float:
    """The match's value; NaN when it is unreadable (ambiguous comma, zero denominator, overflow)."""
    try:
        if m.group("ambiguous") is not None:
            return math.nan
        if m.group("num") is not None:
            value = int(m.group("num")) / int(m.group("den"))
        elif m.group("dcomma") is not None:
            value = float(m.group("dcomma").replace(",", "."))
        else:
            mant = m.group("mant").replace(",", "").replace(" ", "")
            value = float(mant)
            exp = m.group("exp")
            if exp:
                if m.group("pow") is not None:
                    value = value * 10.0 ** int(m.group("pow"))
                elif m.group("power") is not None:
                    value = value ** int(m.group("power"))
                else:
                    value = float(mant + exp.strip())
    except (OverflowError, ZeroDivisionError):
        return math.nan
    if m.group("sign") and m.group("sign").strip() == "-":
        value = -value
    return value


def _accounting_negative(text: str, m: re.Match[str]) -> bool:
    """``(123)``, ``($1,234)``, ``Net income: (12.5%)``: parentheses holding this number alone,
    opening the answer (or its value after ``:`` / ``=``); "15% (0.15)" is an aside, not a negative."""
    before = re.search(rf"\(\s*(?:{_CURRENCY})?\s*$", text[: m.start()])
    after = re.match(r"\s*\)", text[m.end() :])
    if not (before and after) or m.group("sign"):
        return False
    lead = text[: before.start()]
    return not re.search(r"[^\W_]", lead) or bool(re.search(r"[:=]\s*$", lead))


def _matches(text: str) -> list[re.Match[str]]:
    """The readable numbers in ``text``."""
    return [m for m in _NUMBER.finditer(text) if math.isfinite(_value(m))]


def parsed_numbers(s: str) -> list[ParsedNumber]:
    """Every readable number in ``s``, in order, with its percent sign, read as `parse_number` reads one."""
    text = _prepare_number_text(s)
    return [
        ParsedNumber(-_value(m) if _accounting_negative(text, m) else _value(m), bool(m.group("pct")))
        for m in _matches(text)
    ]


def numbers_in(s: str) -> list[float]:
    """Every readable number in ``s``, in order, read as `parse_number` reads one (unreadable ones skipped)."""
    return [p.value for p in parsed_numbers(s) if p.value is not None]


def _chosen(text: str) -> re.Match[str] | None:
    """The number the text states (readable or not), by the rule in the module docstring."""
    found = list(_NUMBER.finditer(text))
    if not found:
        return None
    for eq in reversed(list(re.finditer(r"=|≈|\\approx", text))):
        after = [m for m in found if m.start() >= eq.end()]
        if after:
            return after[0]
    return found[0]


def parse_number(s: str) -> ParsedNumber:
    """The number ``s`` states and whether a percent sign went with it; ``value`` None when none."""
    text = _prepare_number_text(s)
    m = _chosen(text)
    if m is None:
        return ParsedNumber(None, False)
    value = _value(m)
    if not math.isfinite(value):  # the stated number is unreadable: never fall back to another
        return ParsedNumber(None, False)
    if _accounting_negative(text, m):
        value = -value
    return ParsedNumber(value, bool(m.group("pct")))


def is_plain_number(s: str) -> bool:
    """``s`` is a number and nothing else (currency and ``%`` allowed): "11.90", "$1,234", "-5%"."""
    text = _prepare_number_text(s).strip()
    return bool(re.fullmatch(rf"(?:{_CURRENCY})?\s*(?:{_NUMBER.pattern})", text, re.I)) and bool(_matches(text))
