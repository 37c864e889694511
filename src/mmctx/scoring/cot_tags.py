"""Failure tags for chain-of-thought responses: FewMMBench's appendix D, read by rules instead of by hand.

A CoT setting (a setting whose name has ``-cot``; scorer ``generate``) asks the model to reason
step by step and end with the line ``Answer: <letter>``. Each such response gets zero or more of
the tags below, stored on its result (`SampleResult.cot_tags`), counted per task × setting in the
report and offered as a filter in the viewer.

The parts of a response are those the extraction rules read (:mod:`mmctx.extract.parts`):

- its *answer line*: the last final-answer statement ("Answer: B", "the answer is B", …);
- its *reasoning*: the text of its reasoning traces (``<think>…``), then the answer part up to
  the answer line's marker; without an answer line, up to where extraction read the answer (the
  last place its matched text occurs); without an answer at all, the whole answer part;
- its *final answer*: the option the answer line names, read by `extract_choice` on that line
  alone; without an answer line, the response's prediction;
- the *reasoning's choice*: what `extract_choice` reads from the reasoning alone, unless it was
  read from a hypothesis or a question ("if the answer is A, …", "is the circle red?") or a
  revision cue ("wait", "actually", …) follows where it was read: then the reasoning states no
  choice. A guess ("the answer is probably A") is a choice.

A word is a run of letters or digits (``[^\\W_]+``): an underscore separates words, so a
generation stuck on ``_word_word_word`` reads as the loop it is.

Tags (`cot_tag_names`, in this order):

``empty_response``        no word in the answer part nor in a trace.
``no_reasoning``          a final answer (an answer line, or an answer the rules read) with fewer
                          than `MIN_REASONING_WORDS` words of reasoning before it.
``no_final_answer``       words, but neither an answer line nor any answer the rules can read.
``malformed_answer_line`` an answer line the rules do not read as one option ("Answer: E" of four,
                          "Answer: <letter>", "Answer: A or B", a bare "Answer:").
``contradicts_reasoning`` the reasoning's choice is an option, and the final answer another one.
``nonexistent_option``    the response names a label that was not shown, in a form that marks it as
                          a label ("(E)", "[E]", "**E**", "option E", "Answer: E"), when the shown
                          labels are single letters (A, B, … : any other letter of that case is
                          one that does not exist). Other label schemes are not checked.
``repetition_loop``       at least `REPETITION_MIN_NGRAMS` word `REPETITION_NGRAM`-grams in the
                          whole response as generated, and a `repetition_rate` of at least
                          `REPETITION_THRESHOLD`.
``truncated``             generation stopped at the token limit (the stored ``truncated`` flag).

The tags are a registry, like the extraction rules: `cot_tag` adds one (a function of a
`CotResponse` that says whether the tag applies), `unregister_cot_tag` takes one out.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mmctx.extract import (
    Extraction,
    ResponseParts,
    asserts,
    extract_choice,
    marked_labels,
    revision_cue_after,
    split_response,
    written_label,
)
from mmctx.run.settings import Setting

__all__ = [
    "MIN_REASONING_WORDS",
    "REPETITION_MIN_NGRAMS",
    "REPETITION_NGRAM",
    "REPETITION_THRESHOLD",
    "CotResponse",
    "CotTag",
    "cot_tag",
    "cot_tag_descriptions",
    "cot_tag_names",
    "is_cot_setting",
    "read_cot_response",
    "register_cot_tag",
    "repetition_rate",
    "tag_cot_response",
    "unregister_cot_tag",
    "unshown_labels",
]

# "It is red." is a remark, not a chain of thought; five words is the shortest step that names
# what was seen and what follows from it ("The only red shape is the circle").
MIN_REASONING_WORDS = 5
# Repetition is counted on word 4-grams: long enough that ordinary phrasing ("the answer is")
# rarely repeats, short enough to catch a sentence said again.
REPETITION_NGRAM = 4
# The share of a response's 4-grams that repeat an earlier one. Written reasoning stays well under
# a fifth; a response that loops for as long as it reasoned reaches about a half.
REPETITION_THRESHOLD = 0.4
# Below this many 4-grams (23 words) a response is too short for a rate to mean a loop.
REPETITION_MIN_NGRAMS = 20

_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def is_cot_setting(setting: str) -> bool:
    """Whether a setting name is a CoT setting ("4-similar-cot", "8-similar-cot#o2")."""
    try:
        return Setting.parse(setting).cot
    except ValueError:
        return False


# ----------------------------------------------------------------------------- a response, read


@dataclass(frozen=True)
class CotResponse:
    """One CoT response with the parts the tags look at (see the module docstring)."""

    text: str  # as generated
    options: tuple[str, ...]
    labels: tuple[str, ...]  # as shown
    truncated: bool
    extraction: Extraction  # of the whole response: the scored prediction
    parts: ResponseParts
    answer_line: Extraction | None  # the answer line read on its own; None without one
    reasoning: str
    reasoning_choice: int | None

    @property
    def final_answer(self) -> int | None:
        return self.answer_line.index if self.answer_line is not None else self.extraction.index


def read_cot_response(
    text: str,
    options: Sequence[str],
    labels: Sequence[str],
    truncated: bool = False,
    extraction: Extraction | None = None,
) -> CotResponse:
    """``text`` read into its parts; ``extraction`` is the whole response's (computed when not given)."""
    options, labels = tuple(options), tuple(labels)
    found = extraction if extraction is not None else extract_choice(text, options, labels)
    parts = split_response(text)
    line = extract_choice(parts.answer_line.text, options, labels) if parts.answer_line else None
    reasoning = _reasoning(parts, found)
    return CotResponse(
        text, options, labels, truncated, found, parts, line, reasoning, _choice(reasoning, options, labels)
    )


def _reasoning(parts: ResponseParts, extraction: Extraction) -> str:
    if parts.answer_line is not None:
        before = parts.text[: parts.answer_line.start]
    elif extraction.index is not None:
        before = parts.text[: _last_place(parts.text, extraction.span)]
    else:
        before = parts.text
    return "\n".join(p for p in (parts.trace, before.strip()) if p)


def _choice(reasoning: str, options: tuple[str, ...], labels: tuple[str, ...]) -> int | None:
    """The reasoning's choice (see the module docstring)."""
    if not _words(reasoning):
        return None
    found = extract_choice(reasoning, options, labels)
    if found.index is None:
        return None
    at = _last_place(reasoning, found.span)
    if not asserts(reasoning, at, reasoning[at:]) or revision_cue_after(reasoning, at):
        return None
    return found.index


def _last_place(text: str, span: str) -> int:
    """Where the last occurrence of ``span``'s words starts in ``text`` (whatever separates them);
    ``len(text)`` when they do not occur, so all of the text counts as reasoning."""
    found = _words(span)
    if not found:
        return len(text)
    pattern = re.compile(r"(?<![^\W_])" + r"[\W_]+".join(re.escape(w) for w in found) + r"(?![^\W_])")
    matches = list(pattern.finditer(text))
    return matches[-1].start() if matches else len(text)


def repetition_rate(text: str, n: int = REPETITION_NGRAM) -> float:
    """The share of ``text``'s word ``n``-grams (case folded) that repeat an earlier one:
    1 − distinct / all; 0.0 for a text with no ``n``-gram."""
    folded = [w.casefold() for w in _words(text)]
    grams = [tuple(folded[i : i + n]) for i in range(len(folded) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def _label_alphabet(labels: Sequence[str]) -> str:
    """Every label of the shown labels' kind: the alphabet of their case when they are single
    letters ("A".."Z" for A-D); "" for any other scheme (digits, "Yes"/"No"), which is not checked."""
    if labels and all(len(label) == 1 and label in string.ascii_uppercase for label in labels):
        return string.ascii_uppercase
    if labels and all(len(label) == 1 and label in string.ascii_lowercase for label in labels):
        return string.ascii_lowercase
    return ""


def unshown_labels(response: CotResponse) -> list[str]:
    """Labels of the shown labels' kind that the response names as labels but that were not shown."""
    alphabet = _label_alphabet(response.labels)
    if not alphabet:
        return []
    universe = list(alphabet)
    named = marked_labels("\n".join((response.parts.trace, response.parts.raw)), universe)
    named += [
        label
        for text in (response.parts.answer_line.stated if response.parts.answer_line else "", response.parts.text)
        if text and (label := written_label(text, universe)) is not None
    ]
    return [label for label in named if label in alphabet and label not in response.labels]


# ----------------------------------------------------------------------------- the registry

CotTagRule = Callable[[CotResponse], bool]


@dataclass(frozen=True)
class CotTag:
    name: str
    description: str  # one line, for the docs and the report's legend
    applies: CotTagRule


_TAGS: list[CotTag] = []


def register_cot_tag(name: str, description: str, applies: CotTagRule) -> None:
    """Add a tag after those registered already; a name may be registered once."""
    if not name or name in cot_tag_names():
        raise ValueError(f"CoT tag {name!r} is {'registered already' if name else 'unnamed'}")
    _TAGS.append(CotTag(name, description, applies))


def cot_tag(name: str, description: str) -> Callable[[CotTagRule], CotTagRule]:
    """Decorator form of `register_cot_tag`; the function is returned unchanged."""

    def add(applies: CotTagRule) -> CotTagRule:
        register_cot_tag(name, description, applies)
        return applies

    return add


def unregister_cot_tag(name: str) -> None:
    """Take tag ``name`` out (a plugin unloaded, a test undone); KeyError if absent."""
    names = cot_tag_names()
    if name not in names:
        raise KeyError(f"no CoT tag {name!r}; tags: {list(names)}")
    del _TAGS[names.index(name)]


def cot_tag_names() -> tuple[str, ...]:
    return tuple(t.name for t in _TAGS)


def cot_tag_descriptions() -> dict[str, str]:
    return {t.name: t.description for t in _TAGS}


def tag_cot_response(response: CotResponse) -> tuple[str, ...]:
    """The tags that apply to ``response``, in registry order."""
    return tuple(t.name for t in _TAGS if t.applies(response))


# ----------------------------------------------------------------------------- the built-in tags


@cot_tag("empty_response", "no word in the answer part nor in a reasoning trace")
def empty_response(r: CotResponse) -> bool:
    return not _words(r.parts.text) and not _words(r.parts.trace)


@cot_tag("no_reasoning", f"a final answer with fewer than {MIN_REASONING_WORDS} words of reasoning before it")
def no_reasoning(r: CotResponse) -> bool:
    answered = r.parts.answer_line is not None or r.extraction.index is not None
    return answered and len(_words(r.reasoning)) < MIN_REASONING_WORDS


@cot_tag("no_final_answer", "words, but no answer line and no answer the extraction rules can read")
def no_final_answer(r: CotResponse) -> bool:
    return r.parts.answer_line is None and r.extraction.index is None and not empty_response(r)


@cot_tag("malformed_answer_line", "an answer line the extraction rules do not read as one option")
def malformed_answer_line(r: CotResponse) -> bool:
    return r.answer_line is not None and r.answer_line.index is None


@cot_tag("contradicts_reasoning", "the final answer is another option than the one the reasoning chose")
def contradicts_reasoning(r: CotResponse) -> bool:
    return r.reasoning_choice is not None and r.final_answer is not None and r.reasoning_choice != r.final_answer


@cot_tag("nonexistent_option", "names an option label that was not shown, e.g. (E) among four options")
def nonexistent_option(r: CotResponse) -> bool:
    return bool(unshown_labels(r))


@cot_tag(
    "repetition_loop",
    f"at least {REPETITION_THRESHOLD:.0%} of its word {REPETITION_NGRAM}-grams repeat an earlier one "
    f"(of {REPETITION_MIN_NGRAMS} or more)",
)
def repetition_loop(r: CotResponse) -> bool:
    enough = len(_words(r.text)) - REPETITION_NGRAM + 1 >= REPETITION_MIN_NGRAMS
    return enough and repetition_rate(r.text) >= REPETITION_THRESHOLD


@cot_tag("truncated", "generation stopped at the token limit")
def truncated(r: CotResponse) -> bool:
    return r.truncated
