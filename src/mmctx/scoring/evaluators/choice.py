"""The ``choice`` evaluator: option extraction, then exact match against the gold letter.

Valid letters, in order of preference: the labels of ``sample.choices`` (A, B, … one per
choice); else the option labels found at line starts in the question ("A. …", "(A) …",
"A) …", at least A and B, contiguous from A); else A–F.

Extraction, first rule that yields a valid letter wins:
  ``answer_line``    the last line ``Answer: B`` (the suite's MCQ suffix);
  ``option_line``    the last line ``Option: B`` (MIRBench's "Option: <letter>\\nReason: …");
  ``boxed``          the last ``\\boxed{B}``;
  ``extract_choice`` the shared multiple-choice extractor (`mmctx.extract`), run over
                     the option texts when they are known (``choices`` or parsed from the
                     question), e.g. "I pick the red one" → the option whose text is "red".
Before them, ``Answer:`` lines that name different letters without a revision cue between them
("Answer: A. Answer: B.") or loop back ("A ... B ... A") make the reply unparsed: its last flip
is wherever the token limit cut, not an answer.
A marker's value is read as a letter only when it IS a label: "B", "(B)", "B.", "B. red",
"B) red", "Option B", "**B**"; "A dog" is not option A. A value naming two letters ("B, C",
"B or C") is refused. Nothing found → ``Extraction(None, issue=…)`` in words fit for the
format-repair prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from mmctx.extract import extract_choice
from mmctx.extract.contradictions import Statement, contradiction
from mmctx.schema import Sample

from .base import Extraction, Judge, Verdict, register
from .text import answer_line, answer_lines, boxed, final_answer_text, strip_markup

DEFAULT_LETTERS: tuple[str, ...] = tuple("ABCDEF")

_OPTION_LINE = re.compile(r"^[ \t*]*(?:\((?P<a>[A-Z])\)|(?P<b>[A-Z])[.)．、:：])[ \t]*(?P<text>\S.*)$", re.M)
_MULTI = re.compile(r"[(\[]?[A-Za-z][)\]]?(?:\s*(?:,|/|&|;|\band\b|\bor\b)\s*[(\[]?[A-Za-z][)\]]?)+[.)]?", re.I)
# "the answer is B", "The correct option is: (B)": filler a marker's value may open with.
_FILLER = r"(?:(?:the\s+)?(?:correct\s+|final\s+|best\s+)?(?:answer|option|choice)\s+is\s*:?\s*)?"
_BRACKETED = re.compile(
    rf"{_FILLER}(?:(?:option|choice|letter)\s*)?[(\[]\s*(?P<l>[A-Za-z])\s*[)\]](?:\W.*)?", re.I | re.S
)
_PLAIN = re.compile(
    rf"{_FILLER}(?:(?:option|choice|letter)\s+)?(?P<l>[A-Za-z])(?:\s*[.:)]\s*(?:\S.*)?|\s*,.*)?", re.I | re.S
)


def _letters(n: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(n)]


def question_options(question: str) -> dict[str, str]:
    """Option labels and texts found at line starts in ``question``, if they run A, B, … (at least two)."""
    found: dict[str, str] = {}
    for m in _OPTION_LINE.finditer(question or ""):
        label = m.group("a") or m.group("b")
        found.setdefault(label, m.group("text").strip())
    labels = sorted(found)
    if len(labels) < 2 or labels != _letters(len(labels)):
        return {}
    return found


def option_labels(sample: Sample) -> tuple[list[str], list[str] | None]:
    """The valid letters for ``sample`` and, when known, the option texts in the same order."""
    if sample.choices:
        return _letters(len(sample.choices)), list(sample.choices)
    parsed = question_options(sample.question)
    if parsed:
        labels = sorted(parsed)
        return labels, [parsed[label] for label in labels]
    return list(DEFAULT_LETTERS), None


def _span(labels: list[str]) -> str:
    return f"{labels[0]}–{labels[-1]}" if len(labels) > 2 else " or ".join(labels)


def read_letter(value: str, labels: list[str]) -> tuple[str | None, str]:
    """The option letter ``value`` states, or None and what is wrong with it."""
    v = strip_markup(value or "").strip()
    if not v:
        return None, "the final answer is empty"
    if _MULTI.fullmatch(v):
        return None, f"the final answer {v!r} names more than one option; give exactly one letter"
    m = _BRACKETED.fullmatch(v) or _PLAIN.fullmatch(v)
    if m is None:
        return None, f"the final answer {v[:60]!r} is not an option letter ({_span(labels)})"
    letter = m.group("l")
    # Unbracketed, a lowercase letter with text after it reads as prose ("a. red"); a lone one is a label.
    trailing = v[m.end("l") :].strip(" \t.:)]")
    if letter.islower() and trailing and m.re is _PLAIN:
        return None, f"the final answer {v[:60]!r} is not an option letter ({_span(labels)})"
    letter = letter.upper()
    if letter not in labels:
        return None, f"the final answer {letter!r} is not one of the options {_span(labels)}"
    return letter, ""


def gold_letter(sample: Sample) -> str | None:
    """The gold option letter: ``gold``, else the label of ``answer`` among ``choices``, else ``answer``."""
    if isinstance(sample.gold, str) and len(sample.gold.strip()) == 1 and sample.gold.strip().isalpha():
        return sample.gold.strip().upper()
    if sample.choices and sample.answer in sample.choices:
        return _letters(len(sample.choices))[sample.choices.index(sample.answer)]
    answer = sample.answer.strip()
    return answer.upper() if len(answer) == 1 and answer.isalpha() else None


def extract_letter(sample: Sample, response: str) -> Extraction:
    """The option letter a response commits to, by the rules in the module docstring."""
    labels, texts = option_labels(sample)
    text = final_answer_text(response)
    if not text:
        return Extraction(None, issue="the response is empty; end with a line 'Answer: <letter>'")
    conflict = contradictory_answer_lines(text, labels)
    if conflict:
        issue = f"the final answers contradict each other ({conflict}); end with one line 'Answer: <letter>'"
        return Extraction(None, "contradictory", issue)
    issues: list[str] = []
    for rule, value in (
        ("answer_line", answer_line(text)),
        ("option_line", answer_line(text, "Option")),
        ("boxed", boxed(text)),
    ):
        if value is None:
            continue
        letter, issue = read_letter(value, labels)
        if letter is not None:
            return Extraction(letter, rule)
        issues.append(issue)
    if texts is not None:
        found = extract_choice(text, texts, labels)
        if found.index is not None:
            return Extraction(labels[found.index], f"extract_choice:{found.rule}")
    issue = issues[0] if issues else f"no final line 'Answer: <letter>' naming one option ({_span(labels)})"
    return Extraction(None, issue=issue)


def contradictory_answer_lines(text: str, labels: list[str]) -> str:
    """The conflicting ``Answer:`` lines of a looping or self-contradicting reply, "" when consistent.

    The last line wins only when the ones before it agree or were revised with a cue ("Wait, ...");
    "Answer: A ... Answer: B ... Answer: A" is `contradiction`'s loop, never scored by its last flip.
    """
    stated = []
    for m in answer_lines(text):
        letter, _ = read_letter(strip_markup(m.group("value")), labels)
        if letter is not None:
            stated.append(Statement(m.start(), m.end(), letter, m.group().strip()))
    return contradiction(text, stated)


def score_letter(sample: Sample, answer: str, **detail: object) -> Verdict:
    """Exact match of the letter ``answer`` states against the gold letter."""
    labels, _ = option_labels(sample)
    letter, issue = read_letter(answer, labels)
    if letter is None:
        return Verdict.failed("unparsed", issue, prediction=answer or "", **detail)
    gold = gold_letter(sample)
    if gold is None:
        return Verdict.failed("invalid_sample", "the item has no gold option letter", prediction=letter, **detail)
    return Verdict.scored(1.0 if letter == gold else 0.0, letter, gold=gold, **detail)


@dataclass(frozen=True)
class ChoiceEvaluator:
    name: str = "choice"
    free_form: bool = False
    judge: Judge | None = None
    answer_types: ClassVar[tuple[str, ...]] = ("option",)

    def extract(self, sample: Sample, response: str) -> Extraction:
        return extract_letter(sample, response)

    def score(self, sample: Sample, answer: str) -> Verdict:
        return score_letter(sample, answer)


CHOICE = register(ChoiceEvaluator())
