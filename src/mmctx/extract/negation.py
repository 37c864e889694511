"""Rejections: the one place that decides whether a mention of an option is ruled OUT.

A mention (a label such as ``(A)``, an option's text, "the first caption") is
rejected when

* a negator stands right before it, on the same line: ``not (A)``, ``isn't the
  first one``, ``neither red nor blue`` (:func:`negated_before`); or
* a negative predicate follows it: ``A is wrong``, ``(A) is incorrect``, ``B is
  not the answer``, ``C can be ruled out`` (:func:`rejected_after`).

A rejected mention never counts as choosing that option. A negator only negates
the word it stands before, and "no" at the start of an answer is the answer to a
yes/no question ("No, there is no dog"), so an answer span opens negated
(:func:`opens_negated`) only with one of the other negators followed by a word
("not A", "neither of them", "none of the above").
"""

from __future__ import annotations

import re

from .vocabulary import NEGATORS

_NEGATOR = rf"(?:\b(?:{'|'.join(NEGATORS)})|n't)"
_BEFORE = re.compile(rf"{_NEGATOR}[ \t]+(?:(?:the|a|an)[ \t]+)?$", re.I)
_OPENS = re.compile(rf"(?:{'|'.join(n for n in NEGATORS if n != 'no')})\b[ \t]+\w", re.I)

_COPULA = r"(?:is|was|seems(?:[ \t]+to[ \t]+be)?|appears(?:[ \t]+to[ \t]+be)?|looks|would[ \t]+be|must[ \t]+be)"
_ADVERB = r"(?:(?:also|clearly|definitely|obviously|certainly|simply|therefore|thus|so)[ \t]+)?"
_BAD = r"(?:wrong|incorrect|false|untrue|invalid|eliminated|excluded|ruled[ \t]+out|out)"
_GOOD = (
    r"(?:correct|right|true|valid|accurate|it|a[ \t]+match"
    r"|the[ \t]+(?:(?:correct|right|best|true)[ \t]+)?(?:answer|one|option|choice|case|match))"
)
_REJECTED_AFTER = re.compile(
    r"[ \t)\]}*_\"']*(?:(?:one|option|choice|caption)[ \t]+)?(?:"  # "the red one is wrong"
    rf"{_COPULA}[ \t]+{_ADVERB}(?:{_BAD}|not[ \t]+{_ADVERB}{_GOOD})"
    rf"|(?:is|was)n't[ \t]+{_ADVERB}{_GOOD}"
    r"|(?:can|could|should|must)[ \t]+be[ \t]+(?:ruled[ \t]+out|eliminated|excluded|discarded|rejected)"
    rf"|(?:can't|cannot|can[ \t]+not)[ \t]+be[ \t]+{_GOOD}"
    r"|(?:does[ \t]+not|doesn't)[ \t]+(?:match|fit|apply|work)"
    r")\b",
    re.I,
)


def negated_before(s: str, start: int) -> bool:
    """``s[start:]`` begins a mention that a negator right before it rules out ("not (A)")."""
    return _BEFORE.search(s, max(0, start - 24), start) is not None


def rejected_after(s: str, end: int) -> str:
    """The negative predicate ("is wrong") after the mention ending at ``s[end]``, or ""."""
    m = _REJECTED_AFTER.match(s, end)
    return m.group().strip() if m else ""


def rejected(s: str, start: int, end: int) -> bool:
    """The mention ``s[start:end]`` rules its option out instead of choosing it."""
    return negated_before(s, start) or bool(rejected_after(s, end))


def opens_negated(span: str) -> bool:
    """A span that says what the answer is NOT: "not A", "neither ...", "none of them"."""
    return _OPENS.match(span) is not None
