"""The settings grid of the FewMMBench paper, and every other setting, by name.

A setting says how many demonstrations a query gets, which demo strategy picks them
(`mmctx.run.strategies`: ``random``, ``similar``, ``image-similar``, ``text-similar``, ``mmr``,
``mmr<λ>``, ``balanced``, ``different-answer``), whether they carry chain-of-thought rationales,
and their order: ``<k>-<strategy>[-cot][-last][#o<n>]``. The paper's grid is ``0-shot``,
``4-random``, ``4-similar``, ``4-similar-cot``, ``8-random``, ``8-similar``, ``8-similar-cot``.
Demos are shown most similar (first in the stored list) first; ``-last`` reverses them so the
nearest sits next to the query; ``#o<n>`` is the n-th seeded permutation. A scorer says how the answer is read: ``generate`` (greedy text, then
answer extraction), ``ppl`` (the option with the lowest per-token perplexity) or
``ppl-calibrated`` (ppl divided by the option prior of a content-free prompt, `mmctx.run.plan`).
CoT settings are generation-only: ranking fixed options has no place for a rationale.

Shortcut checks add a *vision modifier* after the setting (`mmctx.prompts.ablation`):
``-blind`` (the query's images removed, demos keep theirs), ``-blind-all`` (every image removed)
or ``-blank`` (each query image replaced by a grey image of its size), as in ``0-shot-blind`` or
``8-similar-blank``. ``#p<n>`` asks the query with its options in the n-th seeded rotation of their
shown order (`with_option_orders`), so an item counts as answerable without vision only when it is
answered under several orders, not by a lucky position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from mmctx.prompts.ablation import VISIONS, Vision
from mmctx.prompts.presets import AnswerStyle
from mmctx.run.strategies import DemoStrategy, resolve_strategy

SCORERS: tuple[str, ...] = ("generate", "ppl", "ppl-calibrated")
# What ``--scorers all`` (and no --scorers) runs: the papers' two. ``ppl-calibrated`` asks a
# content-free prompt beside every ppl one, so it is asked for by name.
DEFAULT_SCORERS: tuple[str, ...] = ("generate", "ppl")
# Not a scorer a user names: the content-free prompt a ``ppl-calibrated`` request is divided by
# (`mmctx.run.plan`); planned and stored like a ppl request, never scored on its own.
CONTENT_FREE = "ppl-content-free"


@dataclass(frozen=True)
class Setting:
    shots: int
    demos: str | None = None  # demo strategy (`mmctx.run.strategies`), None for zero-shot
    cot: bool = False
    order: int = 0  # 0: demos in stored order; n > 0: the n-th seeded permutation of them
    vision: Vision = "full"  # which images the prompt keeps (`mmctx.prompts.ablation`)
    option_order: int = 0  # 0: options in their shown order; n > 0: that order rotated n places
    last: bool = False  # the stored order reversed: the most similar demo nearest the query

    @property
    def name(self) -> str:
        if self.shots == 0:
            core = "0-shot-cot" if self.cot else "0-shot"
        else:
            core = f"{self.shots}-{self.demos}" + ("-cot" if self.cot else "") + ("-last" if self.last else "")
        core += "" if self.vision == "full" else f"-{self.vision}"
        return (
            core + (f"#o{self.order}" if self.order else "") + (f"#p{self.option_order}" if self.option_order else "")
        )

    @property
    def sort_key(self) -> tuple:
        """The tables' order, total so a report never depends on set order: by shots, strategy
        (random before similar), without CoT first, then demo order, vision and option order."""
        return (self.shots, self.demos or "", self.cot, self.last, self.order, VISIONS.index(self.vision),
                self.option_order)  # fmt: skip

    @property
    def order_suffix(self) -> str:
        """How the demos are ordered, as the name says it: ``""`` (stored), ``-last``, ``#o<n>``."""
        return "-last" if self.last else (f"#o{self.order}" if self.order else "")

    @property
    def base(self) -> Setting:
        """The same setting with demos in stored order (neither ``-last`` nor ``#o<n>``)."""
        return replace(self, order=0, last=False)

    @property
    def shown_options(self) -> Setting:
        """The same setting with options in their shown order."""
        return replace(self, option_order=0)

    @property
    def strategy(self) -> DemoStrategy | None:
        return resolve_strategy(self.demos) if self.demos else None

    def style(self, scorer: str) -> AnswerStyle:
        if scorer.startswith("ppl"):
            return "text"
        return "cot" if self.cot else "letter"

    def supports(self, scorer: str) -> bool:
        """CoT settings are generation-only. ``ppl-calibrated`` needs the images: a shortcut check's
        prompt already lacks what its content-free prompt takes out, and divided by itself it ties."""
        if scorer == "ppl-calibrated" and self.vision != "full":
            return False
        return not (self.cot and scorer.startswith("ppl"))

    @classmethod
    def parse(cls, name: str) -> Setting:
        core, vision, option_order = _split_modifiers(name.strip())
        try:
            setting = cls._parse_core(core)
        except ValueError as exc:
            where = f" (in {name.strip()!r})" if core != name.strip() else ""
            raise ValueError(
                f"{exc}{where}; a vision modifier -blind, -blind-all or -blank and #p<n> may follow"
            ) from None
        if vision == "full" and option_order:
            raise ValueError(
                f"setting {name!r}: #p<n> (option order) is for -blind, -blind-all and -blank settings only"
            )
        return replace(setting, vision=vision, option_order=option_order)

    @classmethod
    def _parse_core(cls, name: str) -> Setting:
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


# The modifiers sit between the setting and its demo order: ``8-similar-blind#o1#p2``.
_MODIFIED = re.compile(rf"(?P<core>.+?)(?:-(?P<vision>{'|'.join(v for v in VISIONS if v != 'full')}))?"
                       r"(?P<order>#o\d+)?(?:#p(?P<option_order>\d+))?")  # fmt: skip


def _split_modifiers(name: str) -> tuple[str, Vision, int]:
    """``(setting without modifiers, vision, option order)``; the core is left to `Setting._parse_core`."""
    m = _MODIFIED.fullmatch(name)
    if not m:
        return name, "full", 0
    vision: Vision = m.group("vision") or "full"  # type: ignore[assignment]
    return m.group("core") + (m.group("order") or ""), vision, int(m.group("option_order") or 0)


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


def with_option_orders(settings: list[Setting], orders: int) -> list[Setting]:
    """Each setting with a vision modifier in ``orders`` option orders: shown order, then rotations.

    Other settings are left as they are: option orders are how a shortcut check tells an answer
    from a position preference.
    """
    if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
        raise ValueError(f"blind_orders (option orders per blind or blank setting) must be at least 1, got {orders!r}")
    out = []
    for s in settings:
        out.append(s)
        if s.vision != "full" and not s.option_order:
            out += [replace(s, option_order=n) for n in range(1, orders)]
    return out


def parse_scorers(spec: str | None) -> list[str]:
    """``"all"``/None for `DEFAULT_SCORERS`, else a comma-separated list of `SCORERS`."""
    if not spec or spec == "all":
        return list(DEFAULT_SCORERS)
    scorers = [s.strip() for s in spec.split(",") if s.strip()]
    for s in scorers:
        if s not in SCORERS:
            raise ValueError(f"unknown scorer {s!r}; choose from {SCORERS}")
    return scorers
