"""Answer types of open (context-learning) items: what a gold answer looks like and how a model is
told to answer, one registry that the schema, the prompts, the suite loader and the evaluators all read.

An `AnswerType` is a name, a gold check (``gold_problem(gold) -> str | None``, the message names
what is wrong, or None), and the answer-format instruction a prompt ends with (also what the
format-repair prompt asks for). ``suffix`` is the key the instruction is listed under among the
suite's answer-format suffixes (`mmctx.prompts.context.SUFFIXES`): the paper's "mcq" is the
option instruction, its "short" the number and string one; a new type is listed under its own
name. Types that share a key share its instruction.

The eight built-in types register below. An evaluator that brings a new type registers it from
its own module (see `mmctx.scoring.evaluators.base.register`); nothing else needs an edit. This
module is the lowest layer: it imports nothing from mmctx.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANSWER_TYPES",
    "AnswerType",
    "answer_type",
    "answer_type_names",
    "gold_problem",
    "register_answer_type",
]

GoldCheck = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class AnswerType:
    """One answer type: its name, its gold check, and the instruction its items are asked with."""

    name: str
    gold_problem: GoldCheck
    instruction: str
    suffix: str = ""  # the suffix key its instruction is listed under; "" means ``name``

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise ValueError("an answer type needs a name")
        if not self.instruction.strip():
            raise ValueError(f"answer type {self.name!r} needs an answer-format instruction")
        if not self.suffix:
            object.__setattr__(self, "suffix", self.name)


_REGISTRY: dict[str, AnswerType] = {}


def register_answer_type(kind: AnswerType) -> AnswerType:
    """Add ``kind``; registering the same record again is a no-op (a module imported twice).

    A different record under a known name is refused, and so is an instruction that differs
    from the one another type already lists under the same suffix key.
    """
    known = _REGISTRY.get(kind.name)
    if known is not None:
        if known == kind:
            return known
        raise ValueError(f"answer type {kind.name!r} registered twice, differently")
    for other in _REGISTRY.values():
        if other.suffix == kind.suffix and other.instruction != kind.instruction:
            raise ValueError(
                f"answer type {kind.name!r} lists its instruction under suffix {kind.suffix!r}, "
                f"which {other.name!r} already uses for another instruction"
            )
    _REGISTRY[kind.name] = kind
    return kind


def answer_type(name: str) -> AnswerType:
    """The registered answer type ``name``; KeyError naming the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown answer type {name!r}; known: {answer_type_names()}") from None


def answer_type_names() -> list[str]:
    """Every registered name, built-ins first in their documented order, then in registration order."""
    return list(_REGISTRY)


def gold_problem(kind: str | None, gold: Any) -> str | None:
    """What is wrong with ``gold`` for answer type ``kind`` (None: no type, nothing to check)."""
    if kind is None:
        return None
    found = _REGISTRY.get(kind)
    if found is None:
        return f"unknown answer type {kind!r}"
    return found.gold_problem(gold)


class _Names(Mapping[str, AnswerType]):
    """A live, read-only view of the registry (so `ANSWER_TYPES` grows as types register)."""

    def __getitem__(self, name: str) -> AnswerType:
        return _REGISTRY[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(tuple(_REGISTRY))


ANSWER_TYPES: Mapping[str, AnswerType] = _Names()


# --- the built-in types -----------------------------------------------------------------------


def _is_number(x: Any) -> bool:
    # Finite only: a tolerance of Infinity accepts every answer, and NaN compares to nothing.
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _str_list(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) and v.strip() for v in x)


def _option_gold(gold: Any) -> str | None:
    ok = isinstance(gold, str) and len(gold.strip()) == 1 and gold.strip().isalpha()
    return None if ok else f"option gold must be one letter, not {gold!r}"


def _number_gold(gold: Any) -> str | None:
    if not isinstance(gold, dict) or not _is_number(gold.get("value")):
        return f"number gold must be {{'value': <finite number>, ...}}, not {gold!r}"
    for tol in ("rel_tol", "abs_tol"):
        if tol in gold and not (_is_number(gold[tol]) and gold[tol] >= 0):
            return f"number gold's {tol} must be a finite non-negative number, not {gold[tol]!r}"
    return None


def _string_gold(gold: Any) -> str | None:
    ok = (isinstance(gold, str) and gold.strip()) or (_str_list(gold) and gold)
    return None if ok else f"string gold must be non-empty text or a list of aliases, not {gold!r}"


def _string_list_gold(kind: str) -> GoldCheck:
    def check(gold: Any) -> str | None:
        if not _str_list(gold) or not gold:
            return f"{kind} gold must be a non-empty list of non-empty strings, not {gold!r}"
        return None

    return check


_SEGMENT_KEYS = ("route_name", "departure_stop", "arrival_stop")


def _is_segment(seg: Any) -> bool:
    return isinstance(seg, dict) and all(isinstance(seg.get(k), str) for k in _SEGMENT_KEYS)


def _route_gold(gold: Any) -> str | None:
    if not isinstance(gold, dict):
        return f"route gold must be an object, not {type(gold).__name__}"
    missing = [k for k in ("station_1", "station_2", "metro") if not gold.get(k)]
    if missing:
        return f"route gold lacks {missing}"
    if not all(isinstance(gold[k], str) for k in ("station_1", "station_2")):
        return "route gold's station_1 and station_2 must be station names"
    metro = gold["metro"]
    if not isinstance(metro, dict) or not all(_str_list(v) for v in metro.values()):
        return "route gold's metro must map line names to lists of station names"
    routes = gold.get("routes", {})
    if not isinstance(routes, dict) or not all(
        isinstance(plan, list) and all(_is_segment(seg) for seg in plan) for plan in routes.values()
    ):
        return "route gold's routes must map plans to lists of segments (route_name, departure_stop, arrival_stop)"
    if gold.get("variant", "short") not in ("short", "long_num_via", "long_via"):
        return f"route gold's variant must be short, long_num_via or long_via, not {gold.get('variant')!r}"
    return None


def _point_gold(gold: Any) -> str | None:
    keys = [k for k in ("xyz", "xy") if isinstance(gold, dict) and k in gold]
    coords = gold[keys[0]] if len(keys) == 1 else None
    dims = {"xyz": 3, "xy": 2}.get(keys[0]) if len(keys) == 1 else None
    if not (isinstance(coords, list) and len(coords) == dims and all(_is_number(v) for v in coords)):
        shapes = "{'xyz': [x, y, z], 'radius': r} or {'xy': [x, y], 'radius': r}"
        return f"point gold must be {shapes}, not {gold!r}"
    if not (_is_number(gold.get("radius")) and gold["radius"] > 0):
        return "point gold needs a positive radius"
    return None


# The paper's suffixes (appendix B) for option, number/string and route; "point", "list",
# "conclusions" and "rubrics" give the types no subset suffix of the paper describes a form of.
_SHORT = "End with exactly one final line: Answer: <answer>"
BUILTIN: tuple[AnswerType, ...] = (
    AnswerType("option", _option_gold, "End with exactly one final line: Answer: <letter>", "mcq"),
    AnswerType("number", _number_gold, _SHORT, "short"),
    AnswerType("string", _string_gold, _SHORT, "short"),
    AnswerType(
        "list",
        _string_list_gold("list"),
        "End with exactly one final line: Answer: <item>; <item>; ... (every item, separated by semicolons)",
    ),
    AnswerType(
        "route",
        _route_gold,
        "Return only route segments, separated by a line containing only --, each segment as:\n"
        "Route Name: <line>\nDeparture Stop: <stop>\nArrival Stop: <stop>\nVia Stops: <stops, when required>",
    ),
    AnswerType(
        "rubrics",
        _string_list_gold("rubrics"),
        "Answer the task directly and completely; the whole response is graded against the task's requirements.",
    ),
    AnswerType(
        "conclusions",
        _string_list_gold("conclusions"),
        "Return the conclusions as a numbered list, one per line: 1. <conclusion>",
    ),
    AnswerType(
        "point",
        _point_gold,
        "End with exactly one final line: Answer: (x, y, z) with the point's coordinates in the order the "
        "question gives them, as many as it asks for",
    ),
)
for _kind in BUILTIN:
    register_answer_type(_kind)
