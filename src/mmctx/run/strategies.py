"""Demonstration strategies: which demos a few-shot setting shows, by name.

A strategy reads one ranked list of demo keys a query stores (``Sample.demo_keys``) and picks
``k`` demos from it. Two kinds, by where the work is done:

- *stored* strategies need embeddings, so curation computes their ranked lists and the plan
  takes the first ``k``: ``random`` (a seeded permutation of the candidates), ``similar``
  (joint image+text cosine, most similar first), ``image-similar`` and ``text-similar`` (the
  image or the text half alone), and ``mmr`` (maximal marginal relevance: greedy, so the first
  ``k`` of the stored list are exactly the ``k`` it would pick; ``mmr`` reads the list built at
  `DEFAULT_MMR_LAMBDA`, ``mmr<λ>`` the one built at λ, e.g. ``mmr0.3``).
- *derived* strategies need only labels, so the plan computes them from the stored ``similar``
  list, walking it most similar first: ``balanced`` (equal counts of each gold label among the
  demos; the label is what the demo's answer reads, a letter, ``Yes``/``No``) and
  ``different-answer`` (only demos whose gold answer differs from the query's).

`register_strategy` adds one; a setting name (`mmctx.run.settings.Setting`) names it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from mmctx.schema import Sample

# Carbonell & Goldstein's even trade-off: relevance and novelty weigh the same.
DEFAULT_MMR_LAMBDA = 0.5

LabelOf = Callable[[Sample], str]  # the gold label a demo shows (a letter, "Yes"/"No")


class StrategyError(ValueError):
    """A strategy cannot pick ``k`` demos for a query from what the query stores."""


@dataclass(frozen=True)
class DemoStrategy:
    """How one setting word picks ``k`` demos from a query's ranked list under ``source_key``."""

    name: str
    source_key: str  # the ``demo_keys`` list it reads
    pick: Callable[[Sample, list[Sample], int, LabelOf], list[Sample]]
    description: str


def first_k(query: Sample, ranked: list[Sample], k: int, label_of: LabelOf) -> list[Sample]:
    return ranked[:k]


def balanced(query: Sample, ranked: list[Sample], k: int, label_of: LabelOf) -> list[Sample]:
    """``k`` demos, each label shown ``k // n`` or one more times, most similar first per label.

    The labels are those the ranked list shows; when ``k`` is not a multiple of their number, the
    labels whose best demo ranks highest get the extra ones.
    """
    by_label: dict[str, list[Sample]] = {}
    for demo in ranked:
        by_label.setdefault(label_of(demo), []).append(demo)
    if not by_label:
        raise StrategyError(f"needs {k} demos, has 0")
    share, extra = divmod(k, len(by_label))
    wanted = {label: share + (i < extra) for i, label in enumerate(by_label)}
    short = {label: len(demos) for label, demos in by_label.items() if len(demos) < wanted[label]}
    if short:
        raise StrategyError(
            f"balanced needs {wanted} demos per gold label, the similar list holds {dict(short)} of some"
        )
    chosen = {id(d) for label, demos in by_label.items() for d in demos[: wanted[label]]}
    return [d for d in ranked if id(d) in chosen]  # kept in similarity order


def different_answer(query: Sample, ranked: list[Sample], k: int, label_of: LabelOf) -> list[Sample]:
    """The ``k`` most similar demos whose gold answer text differs from the query's."""
    kept = [d for d in ranked if d.answer.strip().casefold() != query.answer.strip().casefold()]
    if len(kept) < k:
        raise StrategyError(f"needs {k} demos with an answer other than the query's, has {len(kept)}")
    return kept[:k]


STRATEGIES: dict[str, DemoStrategy] = {}


def register_strategy(strategy: DemoStrategy) -> DemoStrategy:
    if not re.fullmatch(r"[a-z]+(-[a-z]+)*", strategy.name) or strategy.name in ("shot", "cot", "last"):
        raise ValueError(f"strategy name {strategy.name!r}: lower-case words joined by '-', not a setting suffix")
    STRATEGIES[strategy.name] = strategy
    return strategy


for _name, _what in (
    ("random", "a seeded uniform draw from the candidates (stored)"),
    ("similar", "nearest by joint image+text cosine, most similar first (stored)"),
    ("image-similar", "nearest by image cosine alone (stored)"),
    ("text-similar", "nearest by text cosine alone (stored)"),
    ("mmr", f"maximal marginal relevance, λ = {DEFAULT_MMR_LAMBDA} unless named (stored)"),
):
    register_strategy(DemoStrategy(_name, _name, first_k, _what))
register_strategy(DemoStrategy("balanced", "similar", balanced, "equal counts of each gold label, nearest first"))
register_strategy(
    DemoStrategy("different-answer", "similar", different_answer, "nearest demos whose answer differs from the query's")
)


def mmr_key(lam: float) -> str:
    """The ``demo_keys`` list of MMR at ``lam``: ``mmr`` at the default, else ``mmr<λ>``."""
    return "mmr" if lam == DEFAULT_MMR_LAMBDA else f"mmr{lam:g}"


def resolve_strategy(word: str) -> DemoStrategy:
    """The strategy a setting word names: a registered name, or ``mmr<λ>`` with 0 <= λ <= 1."""
    if word in STRATEGIES:
        return STRATEGIES[word]
    m = re.fullmatch(r"mmr(\d+(?:\.\d+)?|\.\d+)", word)
    if m:
        lam = float(m.group(1))
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"strategy {word!r}: MMR λ must lie in [0, 1], got {lam:g}")
        key = mmr_key(lam)
        return DemoStrategy(key, key, first_k, f"maximal marginal relevance, λ = {lam:g} (stored)")
    raise ValueError(f"unknown demo strategy {word!r}; known: {sorted(STRATEGIES)} or mmr<λ> (e.g. mmr0.3)")
