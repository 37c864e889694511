"""How the shapes world is put into words, shared by the task templates and the rationales."""

from __future__ import annotations

from collections.abc import Sequence

from mmctx.data.shapes.world import Obj

# Spatial relations as they read after "is": "The red circle is left of the blue square."
RELATIONS: tuple[str, ...] = ("left of", "right of", "above", "below")
OPPOSITE: dict[str, str] = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}


def plural(noun: str) -> str:
    return noun + "s"  # every shape name takes a plain -s


def article(phrase: str) -> str:
    return ("an " if phrase[:1] in "aeiou" else "a ") + phrase


def name(obj: Obj, colour: bool = True, size: bool = False) -> str:
    words = ([obj.size] if size else []) + ([obj.colour] if colour else []) + [obj.shape]
    return " ".join(words)


def join(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def count_sentence(n: int, shape: str) -> str:
    return f"There is 1 {shape}." if n == 1 else f"There are {n} {plural(shape)}."


def describe_objects(objects: Sequence[Obj]) -> str:
    return join([article(name(o, size=True)) for o in objects]) if objects else "nothing"
