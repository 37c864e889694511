"""The shortcut-check tables: items answerable without vision, and accuracy without them.

Rows come from `mmctx.analysis.blind`; one table per kind, every model's rows together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mmctx.analysis.blind import ANY, AccuracyWithoutBlind, BlindShare
from mmctx.reporting.escaping import markdown_text as md

ModelShares = tuple[str, Sequence[BlindShare]]
ModelAccuracies = tuple[str, Sequence[AccuracyWithoutBlind]]


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}"


def blind_share_rows(runs: Sequence[ModelShares]) -> list[dict]:
    return [
        {"model": model, "task": s.task, "setting": s.setting, "scorer": s.scorer, "option_orders": s.orders,
         "items": s.items, "answerable": s.answerable, "share": None if math.isnan(s.share) else round(s.share, 4)}
        for model, shares in runs
        for s in shares
    ]  # fmt: skip


def accuracy_without_rows(runs: Sequence[ModelAccuracies]) -> list[dict]:
    return [
        {"model": model, "task": a.task, "setting": a.setting, "scorer": a.scorer, "n": a.n,
         "accuracy": a.accuracy, "n_without": a.n_without, "accuracy_without": a.accuracy_without}
        for model, accuracies in runs
        for a in accuracies
    ]  # fmt: skip


def blind_markdown(shares: Sequence[ModelShares], accuracies: Sequence[ModelAccuracies]) -> str:
    """Both tables under one heading; empty when no run has a blind or blank setting."""
    if not any(rows for _, rows in shares):
        return ""
    head = "| model | task | check | scorer | option orders | items | answerable | share (%) |"
    lines = [head, "|" + "---|" * 8]
    for model, rows in shares:
        for s in rows:
            check = "any blind check" if s.setting == ANY else s.setting
            lines.append(
                f"| {md(model)} | {md(s.task)} | {md(check)} | {md(s.scorer)} | {s.orders} | {s.items} | "
                f"{s.answerable} | {_pct(s.share)} |"
            )
    out = [
        "## Shortcut checks (blind baselines)\n",
        "Items answered correctly with their images removed (blind) or greyed (blank), in every option order.\n",
        "\n".join(lines) + "\n",
    ]
    if any(rows for _, rows in accuracies):
        head = "| model | task | setting | scorer | n | accuracy (%) | n without | accuracy without (%) |"
        lines = [head, "|" + "---|" * 8]
        for model, rows in accuracies:
            for a in rows:
                lines.append(
                    f"| {md(model)} | {md(a.task)} | {md(a.setting)} | {md(a.scorer)} | {a.n} | {_pct(a.accuracy)} | "
                    f"{a.n_without} | {_pct(a.accuracy_without)} |"
                )
        out.append("Accuracy with and without the items some blind check answers:\n\n" + "\n".join(lines) + "\n")
    return "\n".join(out)
