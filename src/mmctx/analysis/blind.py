"""Shortcut checks: which items a model answers without seeing their images.

A run's ``-blind``, ``-blind-all`` and ``-blank`` settings (`mmctx.run.settings`) ask each query
with its images removed or greyed, in several option orders (``#p<n>``). An item is *answerable
without vision* under one such setting and scorer when it is answered correctly in every option
order the run asked it in — one lucky position is not enough, as CLBench-V's rejection sampling
drops only items that a text-only pass solves reliably. Across a run, an item is answerable
without vision when some blind or blank setting answers it so, under either scorer.

Pure functions over scored results; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from mmctx.run.settings import Setting
from mmctx.scoring.results import SampleResult

ItemKey = tuple[str, str]  # (task, query id)
ANY = "any"  # the setting and scorer of the row that unites every blind setting and scorer


@dataclass(frozen=True)
class BlindCheck:
    """One blind or blank setting under one scorer: the items it answered in every option order."""

    setting: str  # the setting with options in shown order, e.g. "8-similar-blind"
    scorer: str
    orders: int  # option orders the run asked
    items: frozenset[ItemKey]  # items asked in every order
    answerable: frozenset[ItemKey]  # of those, the ones answered correctly in every order


@dataclass(frozen=True)
class BlindShare:
    """Per task: the share of items a blind check (or any of them, ``setting == "any"``) answers."""

    task: str
    setting: str
    scorer: str
    orders: int
    items: int
    answerable: int

    @property
    def share(self) -> float:
        return self.answerable / self.items if self.items else math.nan


@dataclass(frozen=True)
class AccuracyWithoutBlind:
    """A full-vision setting's accuracy on a task, on all items and without the blind-answerable ones."""

    task: str
    setting: str
    scorer: str
    n: int
    accuracy: float
    n_without: int
    accuracy_without: float


def is_blind(setting: str) -> bool:
    return Setting.parse(setting).vision != "full"


def blind_checks(results: Iterable[SampleResult]) -> list[BlindCheck]:
    """One `BlindCheck` per blind or blank (setting, scorer) of the results, in name order."""
    groups: dict[tuple[str, str], dict[int, dict[ItemKey, SampleResult]]] = {}
    for r in results:
        setting = Setting.parse(r.setting)
        if setting.vision == "full":
            continue
        by_order = groups.setdefault((setting.shown_options.name, r.scorer), {})
        by_order.setdefault(setting.option_order, {})[(r.task, r.query_id)] = r
    checks = []
    for (setting, scorer), by_order in sorted(groups.items()):
        orders = list(by_order.values())
        items = frozenset.intersection(*(frozenset(o) for o in orders))
        answerable = frozenset(i for i in items if all(o[i].correct for o in orders))
        checks.append(BlindCheck(setting, scorer, len(orders), items, answerable))
    return checks


def blind_answerable(results: Iterable[SampleResult]) -> frozenset[ItemKey]:
    """Every item some blind or blank setting answers in all its option orders, under either scorer."""
    return frozenset().union(*(c.answerable for c in blind_checks(results)))


def blind_shares(results: Iterable[SampleResult]) -> list[BlindShare]:
    """Per task and check, then per task over all checks (``setting == scorer == "any"``)."""
    checks = blind_checks(results)
    tasks = sorted({task for c in checks for task, _ in c.items})
    out = []
    for task in tasks:
        for c in checks:
            items = {i for i in c.items if i[0] == task}
            answerable = {i for i in c.answerable if i[0] == task}
            out.append(BlindShare(task, c.setting, c.scorer, c.orders, len(items), len(answerable)))
        items = {i for c in checks for i in c.items if i[0] == task}
        answerable = {i for c in checks for i in c.answerable if i[0] == task}
        out.append(BlindShare(task, ANY, ANY, max(c.orders for c in checks), len(items), len(answerable)))
    return out


def accuracy_without_blind(results: Iterable[SampleResult]) -> list[AccuracyWithoutBlind]:
    """Each full-vision (task, setting, scorer): accuracy over answered items, with and without
    the items the run's blind checks answer; empty when the run has no blind setting."""
    results = list(results)
    checks = blind_checks(results)
    if not checks:
        return []
    shortcut = frozenset().union(*(c.answerable for c in checks))
    groups: dict[tuple[str, str, str], list[SampleResult]] = {}
    for r in results:
        if r.answered and not is_blind(r.setting):
            groups.setdefault((r.task, r.setting, r.scorer), []).append(r)
    out = []
    for (task, setting, scorer), rs in sorted(groups.items()):
        kept = [r for r in rs if (r.task, r.query_id) not in shortcut]
        out.append(AccuracyWithoutBlind(task, setting, scorer, len(rs), _accuracy(rs), len(kept), _accuracy(kept)))
    return out


def _accuracy(results: list[SampleResult]) -> float:
    return sum(r.correct for r in results) / len(results) if results else math.nan
