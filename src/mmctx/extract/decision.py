"""What a rule returns: a decision plus where in the text the deciding words end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .context import Ctx, Resolution


@dataclass(frozen=True)
class Decision:
    index: int | None
    rule: str  # the rule's name, or "hedged" / "ambiguous" for a refusal it reached
    span: str = ""
    end: int = 0  # offset in ctx.text after which a self-correction would revise it; 0 = anywhere


Rule = Callable[[Ctx], "Decision | None"]


def decided(res: Resolution, rule: str, end: int = 0) -> Decision | None:
    if res is None:
        return None
    index, outcome, span = res
    return Decision(index, rule if outcome == "ok" else outcome, span, end)
