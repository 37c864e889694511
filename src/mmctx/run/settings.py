"""The settings grid of the FewMMBench paper, and every other setting, by name.

A setting says how many demonstrations a query gets, which demo strategy picks them
(`mmctx.run.strategies`: ``random``, ``similar``, ``image-similar``, ``text-similar``, ``mmr``,
``mmr<λ>``, ``balanced``, ``different-answer``), whether they carry chain-of-thought rationales,
and their order: ``<k>-<strategy>[-cot][-last][#o<n>]``. The paper's grid is ``0-shot``,
``4-random``, ``4-similar``, ``4-similar-cot``, ``8-random``, ``8-similar``, ``8-similar-cot``.
Demos are shown most similar (first in the stored list) first; ``-last`` reverses them so the
nearest sits next to the query; ``#o<n>`` is the n-th seeded permutation. A scorer says how the answer is read: ``generate`` (greedy text, then
answer extraction) or ``ppl`` (the option with the lowest per-token perplexity).
CoT settings are generation-only: ranking fixed options has no place for a rationale.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mmctx.prompts.presets import AnswerStyle
from mmctx.run.strategies import DemoStrategy, resolve_strategy

SCORERS: tuple[str, ...] = ("generate", "ppl")


@dataclass(frozen=True)
class Setting:
    shots: int
    demos: str | None = None  # demo strategy (`mmctx.run.strategies`), None for zero-shot
    cot: bool = False
    order: int = 0  # 0: demos in stored order; n > 0: the n-th seeded permutation of them
    last: bool = False  # the stored order reversed: the most similar demo nearest the query

    @property
    def name(self) -> str:
        if self.shots == 0:
            return "0-shot-cot" if self.cot else "0-shot"
        return f"{self.shots}-{self.demos}" + ("-cot" if self.cot else "") + self.order_suffix

    @property
    def order_suffix(self) -> str:
        """How the demos are ordered, as the name says it: ``""`` (stored), ``-last``, ``#o<n>``."""
        return "-last" if self.last else (f"#o{self.order}" if self.order else "")

    @property
    def base(self) -> Setting:
        """The same setting with demos in stored order."""
        return Setting(self.shots, self.demos, self.cot)

    @property
    def strategy(self) -> DemoStrategy | None:
        return resolve_strategy(self.demos) if self.demos else None

    def style(self, scorer: str) -> AnswerStyle:
        if scorer.startswith("ppl"):
            return "text"
        return "cot" if self.cot else "letter"

    def supports(self, scorer: str) -> bool:
        return not (self.cot and scorer.startswith("ppl"))

    @classmethod
    def parse(cls, name: str) -> Setting:
        grammar = "0-shot, 0-shot-cot or <k>-<strategy>[-cot][-last][#o<order>]"
        m = re.fullmatch(r"(\d+)-([a-z][a-z0-9.-]*?)(-cot)?(-last)?(?:#o(\d+))?", name.strip())
        if not m or (m.group(2) == "shot") != (m.group(1) == "0"):
            raise ValueError(f"unknown setting {name!r}: expected {grammar}")
        shots, word, cot, last, order = int(m.group(1)), m.group(2), bool(m.group(3)), bool(m.group(4)), m.group(5)
        if shots == 0:
            if order or last:
                raise ValueError(f"setting {name!r}: a zero-shot setting has no demos to order")
            return cls(shots=0, cot=cot)
        if last and order:
            raise ValueError(f"setting {name!r}: -last and #o<n> are two orders; name one")
        try:
            strategy = resolve_strategy(word)
        except ValueError as exc:
            raise ValueError(f"setting {name!r}: {exc}") from None
        return cls(shots=shots, demos=strategy.name, cot=cot, order=int(order or 0), last=last)


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
            out += [Setting(s.shots, s.demos, s.cot, order) for order in range(1, orders) if not s.last]
    return out


def parse_scorers(spec: str | None) -> list[str]:
    if not spec or spec == "all":
        return list(SCORERS)
    scorers = [s.strip() for s in spec.split(",") if s.strip()]
    for s in scorers:
        if s not in SCORERS:
            raise ValueError(f"unknown scorer {s!r}; choose from {SCORERS}")
    return scorers
