"""What every open-answer evaluator is: extraction, then a rule or a judge, giving a `Verdict`.

An evaluator turns a model's final answer (reasoning traces already stripped) into a score in
[0, 1] with an outcome that says how it got there. Two kinds:

  - rule evaluators (`Evaluator` with ``judge = None``): ``extract`` the answer by named rules,
    then ``score`` it deterministically (option match, numeric tolerance, route topology, …);
  - judged evaluators (``judge`` set): ``extract`` as above (or hand the whole response on),
    then an LLM `Judge` decides; `mmctx.scoring.judging` makes the judge calls, caches them, and
    retries a reply that does not parse before recording ``judge_error``.

Outcomes (every sample has exactly one; only ``scored`` carries a score above 0):
  ``scored``            evaluated; ``score`` in [0, 1]
  ``unparsed``          no answer could be extracted in the required format
  ``judge_error``       the judge's replies could not be parsed within its retry budget
  ``invalid_sample``    the item itself is malformed (empty rubric list, missing context image)
  ``context_overflow``  the prompt exceeded the model's context window (the paper's 0.0000 case)
  ``error``             the model call failed (never a wrong answer)
Tables count all of them in the denominator with score 0, and print the counts beside.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mmctx.answers import AnswerType, answer_type, register_answer_type
from mmctx.prompts.messages import Prompt
from mmctx.schema import Sample

OUTCOMES: tuple[str, ...] = ("scored", "unparsed", "judge_error", "invalid_sample", "context_overflow", "error")


@dataclass(frozen=True)
class Extraction:
    """The final answer found in a response, the rule that found it, or why none was found.

    ``answer is None`` means unparsed; ``issue`` then says what is wrong with the format, in
    words fit for the format-repair prompt ("no line starting with 'Answer:'").
    """

    answer: str | None
    rule: str = ""
    issue: str = ""

    @property
    def parsed(self) -> bool:
        return self.answer is not None


@dataclass(frozen=True)
class Verdict:
    outcome: str
    score: float = 0.0
    prediction: str = ""  # the answer as the evaluator read it (canonical text)
    detail: dict[str, Any] = field(default_factory=dict)  # evaluator-specific: reasons, parts, MAE

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}; one of {OUTCOMES}")
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score} outside [0, 1]")
        if self.outcome != "scored" and self.score != 0.0:
            raise ValueError(f"a {self.outcome} verdict scores 0, not {self.score}")

    @classmethod
    def scored(cls, score: float, prediction: str = "", **detail: Any) -> Verdict:
        return cls("scored", float(score), prediction, detail)

    @classmethod
    def failed(cls, outcome: str, reason: str, prediction: str = "", **detail: Any) -> Verdict:
        return cls(outcome, 0.0, prediction, {"reason": reason, **detail})


class JudgeReplyError(ValueError):
    """A judge reply that does not parse (not JSON, missing fields, not True/False)."""


@runtime_checkable
class Judge(Protocol):
    """An LLM judge: a prompt, a parser, and the verdict it implies. Stateless; no model inside."""

    name: str
    max_new_tokens: int

    def precheck(self, sample: Sample, answer: str) -> Verdict | None:
        """A verdict reached without calling the judge (an empty answer scores 0), or None."""
        ...

    def prompt(self, sample: Sample, answer: str) -> Prompt: ...

    def parse(self, reply: str) -> dict[str, Any]:
        """The reply's content; raises `JudgeReplyError` when it does not parse."""
        ...

    def verdict(self, sample: Sample, answer: str, parsed: dict[str, Any]) -> Verdict: ...


@dataclass(frozen=True)
class Metric:
    """A per-dataset metric an evaluator reports beside the score: the mean of ``value`` over the rows.

    ``value(row)`` reads one results row (``outcome``, ``score``, ``answer_type``, ``detail``…) and
    gives the row's value, or None when the row does not count towards this metric (a CourtSI
    option item counts towards MA, not LocA). The tables print each metric as ``name mean (n=…)``.
    """

    name: str
    value: Callable[[Mapping[str, Any]], float | None]


def scored_or_zero(row: Mapping[str, Any]) -> float:
    """A row's score, with every non-scored outcome counted as 0 (as the level tables count it)."""
    return float(row.get("score", 0.0)) if row.get("outcome") == "scored" else 0.0


ACCURACY = Metric("accuracy", scored_or_zero)


@runtime_checkable
class Evaluator(Protocol):
    """What `register` accepts. Two more attributes are read when present (the declaration of
    everything an evaluator brings, in its own module):

      - ``answer_types``: the answer types it grades, by name or as an `mmctx.answers.AnswerType`
        record that `register` registers (a new type: its gold check and format instruction);
      - ``metrics``: the `Metric` s it reports per dataset beside the score (the level tables read
        them through `evaluator_metrics`, so a new metric needs no edit there).
    """

    name: str
    free_form: bool  # when rules find no answer, an extractor model may be asked
    judge: Judge | None  # None: `score` decides

    def extract(self, sample: Sample, response: str) -> Extraction: ...

    def score(self, sample: Sample, answer: str) -> Verdict:
        """The rule-based verdict (for judged evaluators: the verdict without a judge, if any)."""
        ...


_REGISTRY: dict[str, Evaluator] = {}
# The built-in evaluator modules; each registers itself when imported (on the first lookup).
BUILTIN_MODULES: tuple[str, ...] = ("choice", "numeric", "zerobench", "route", "spatial", "judged")


def _load_builtins() -> None:
    import importlib

    for name in BUILTIN_MODULES:
        importlib.import_module(f"mmctx.scoring.evaluators.{name}")


def register(evaluator: Evaluator) -> Evaluator:
    """Add ``evaluator`` under its name, registering the answer types it brings (see `Evaluator`).

    A declared type given by name must be registered already, so a typo fails at import, not at
    the first item. Answer types are registered before the evaluator: a refused type leaves no
    evaluator behind that grades it.
    """
    if evaluator.name in _REGISTRY:
        raise ValueError(f"evaluator {evaluator.name!r} registered twice")
    for kind in getattr(evaluator, "answer_types", ()):
        if isinstance(kind, AnswerType):
            register_answer_type(kind)
        else:
            answer_type(kind)  # KeyError naming the known types
    for metric in evaluator_metrics_of(evaluator):
        if not isinstance(metric, Metric):
            raise TypeError(f"evaluator {evaluator.name!r}: metrics must be Metric records, not {metric!r}")
    _REGISTRY[evaluator.name] = evaluator
    return evaluator


def evaluator_metrics_of(evaluator: Evaluator) -> tuple[Metric, ...]:
    return tuple(getattr(evaluator, "metrics", ()))


def evaluator_metrics(name: str) -> tuple[Metric, ...]:
    """The metrics evaluator ``name`` reports; none for a name not registered in this process
    (a run scored by an evaluator whose module is not imported here still aggregates)."""
    _load_builtins()
    found = _REGISTRY.get(name)
    return () if found is None else evaluator_metrics_of(found)


def get_evaluator(name: str) -> Evaluator:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown evaluator {name!r}; known: {sorted(_REGISTRY)}") from None


def evaluator_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)
