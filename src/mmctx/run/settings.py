"""The settings grid of the FewMMBench paper, by name.

A setting says how many demonstrations a query gets, which of its stored demo lists they come
from (``random`` or ``similar``), and whether they carry chain-of-thought rationales:
``0-shot``, ``4-random``, ``4-similar``, ``4-similar-cot``, ``8-random``, ``8-similar``,
``8-similar-cot``. A scorer says how the answer is read: ``generate`` (greedy text, then
answer extraction) or ``ppl`` (the option with the lowest per-token perplexity).
CoT settings are generation-only: ranking fixed options has no place for a rationale.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mmctx.prompts.presets import AnswerStyle

SCORERS: tuple[str, ...] = ("generate", "ppl")


@dataclass(frozen=True)
class Setting:
    shots: int
    demos: str | None = None  # demo-key strategy, None for zero-shot
    cot: bool = False
    order: int = 0  # 0: demos in stored order; n > 0: the n-th seeded permutation of them

    @property
    def name(self) -> str:
        if self.shots == 0:
            return "0-shot-cot" if self.cot else "0-shot"
        return f"{self.shots}-{self.demos}" + ("-cot" if self.cot else "") + (f"#o{self.order}" if self.order else "")

    @property
    def base(self) -> Setting:
        """The same setting with demos in stored order."""
        return Setting(self.shots, self.demos, self.cot)

    def style(self, scorer: str) -> AnswerStyle:
        if scorer == "ppl":
            return "text"
        return "cot" if self.cot else "letter"

    def supports(self, scorer: str) -> bool:
        return not (self.cot and scorer == "ppl")

    @classmethod
    def parse(cls, name: str) -> Setting:
        m = re.fullmatch(r"(\d+)-(shot|random|similar)(-cot)?(?:#o(\d+))?", name.strip())
        if not m or (m.group(2) == "shot") != (m.group(1) == "0") or (m.group(4) and m.group(1) == "0"):
            raise ValueError(
                f"unknown setting {name!r}: expected 0-shot, 0-shot-cot or <k>-random|similar[-cot][#o<order>]"
            )
        shots = int(m.group(1))
        order = int(m.group(4) or 0)
        return cls(shots=shots, demos=None if shots == 0 else m.group(2), cot=bool(m.group(3)), order=order)


PAPER_GRID: tuple[Setting, ...] = tuple(
    Setting.parse(n)
    for n in ("0-shot", "4-random", "4-similar", "4-similar-cot", "8-random", "8-similar", "8-similar-cot")
)


def parse_settings(spec: str | None) -> list[Setting]:
    """``"all"``/None for the paper's grid, else a comma-separated list of names."""
    if not spec or spec == "all":
        return list(PAPER_GRID)
    return [Setting.parse(n) for n in spec.split(",") if n.strip()]


def with_demo_orders(settings: list[Setting], orders: int) -> list[Setting]:
    """Each few-shot setting in ``orders`` demo orders: stored order, then seeded permutations."""
    out = []
    for s in settings:
        out.append(s)
        if s.shots > 1:
            out += [Setting(s.shots, s.demos, s.cot, order) for order in range(1, orders)]
    return out


def parse_scorers(spec: str | None) -> list[str]:
    if not spec or spec == "all":
        return list(SCORERS)
    scorers = [s.strip() for s in spec.split(",") if s.strip()]
    for s in scorers:
        if s not in SCORERS:
            raise ValueError(f"unknown scorer {s!r}; choose from {SCORERS}")
    return scorers
