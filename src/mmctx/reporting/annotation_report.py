"""Filled forms in, agreement out: ``mmctx annotate import DIR-or-files... [--drop-below T]``.

The forms are read and checked (`mmctx.curate.annotation.forms`), then per criterion the mean
rating, Fleiss' κ and Krippendorff's α are computed with bootstrap intervals over demos
(`mmctx.analysis.rater_agreement`), written to ``DIR/validation.json`` (DIR: the export folder)
and returned; the paper's figures are the majority vote for answer correctness and the mean
reasoning quality with the share of demos scoring at least 4. With drop rules, the demos whose
mean falls below a threshold lose their rationale in the benchmark, and the curation log says
so (`mmctx.curate.annotation.drop`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmctx.analysis.rater_agreement import ScaleAgreement, scale_agreement
from mmctx.curate.annotation.criteria import CRITERIA, Criterion
from mmctx.curate.annotation.drop import DropOutcome, DropRule, demos_below, drop_rationales
from mmctx.curate.annotation.forms import RatingTable, find_inputs, read_ratings

__all__ = ["VALIDATION_FILE", "CriterionResult", "ValidationResult", "import_ratings", "validation_markdown"]

VALIDATION_FILE = "validation.json"


@dataclass(frozen=True)
class CriterionResult:
    criterion: Criterion
    agreement: ScaleAgreement

    def share_at_least(self, value: str) -> float:
        """The share of demos whose mean rating is at least ``value``'s score."""
        cut = self.criterion.score(value)
        return float(np.mean([m >= cut for m in self.agreement.item_means]))


@dataclass(frozen=True)
class ValidationResult:
    ratings: RatingTable
    criteria: tuple[CriterionResult, ...]
    means: dict[str, dict[str, float]]  # demo id -> criterion -> mean rating
    written: Path  # validation.json
    drop: DropOutcome | None

    def summary(self) -> dict[str, Any]:
        """The statistics as JSON-able data (what ``validation.json`` and the curation log hold)."""
        export = self.ratings.export
        out: dict[str, Any] = {
            "export_id": export.export_id,
            "annotators": list(self.ratings.annotators),
            "missing_annotators": list(self.ratings.missing_annotators),
            "demos": len(self.ratings.demo_ids),
            "criteria": {},
        }
        for result in self.criteria:
            a = result.agreement
            record = {k: v for k, v in asdict(a).items() if k != "item_means"}
            if result.criterion.level == "ordinal":
                record["share_mean_at_least"] = {v: result.share_at_least(v) for v in result.criterion.values[1:]}
            out["criteria"][result.criterion.name] = _finite(record)
        return out


def import_ratings(
    paths: Sequence[Path],
    bench: Path | None = None,
    rules: Sequence[DropRule] = (),
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ValidationResult:
    """Read and check the forms, compute agreement, write ``validation.json``, apply ``rules``.

    ``bench`` is the benchmark to drop from (default: the one the export was made from).
    """
    inputs = find_inputs(paths)
    table = read_ratings(inputs)
    criteria = tuple(
        CriterionResult(c, _agreement(table, c, resamples, confidence, seed))
        for c in CRITERIA
        if c.name in table.values
    )
    means = {
        demo_id: {r.criterion.name: r.agreement.item_means[i] for r in criteria}
        for i, demo_id in enumerate(table.demo_ids)
    }
    written = inputs.export_dir / VALIDATION_FILE
    result = ValidationResult(table, criteria, means, written, None)
    report = {**result.summary(), "per_demo": means}
    written.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if not rules:
        return result
    root = Path(bench) if bench is not None else Path(table.export.benchmark)
    below = demos_below(means, list(rules))
    drop = drop_rationales(root, table.export, inputs.export_dir, list(rules), below, result.summary())
    return ValidationResult(table, criteria, means, written, drop)


def _agreement(table: RatingTable, c: Criterion, resamples: int, confidence: float, seed: int) -> ScaleAgreement:
    index = {v: i for i, v in enumerate(c.values)}
    codes = np.array([[index[table.values[c.name][d][a]] for a in table.annotators] for d in table.demo_ids])
    return scale_agreement(codes, c.values, c.scores, c.level, resamples, confidence, seed)


def _finite(value: Any) -> Any:
    """NaN as None, so the JSON written is standard JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _number(x: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(x) else f"{x:.{digits}f}"


def _with_interval(value: float, low: float, high: float) -> str:
    if math.isnan(value):
        return "undefined"
    return f"{_number(value)} [{_number(low)}, {_number(high)}]"


def validation_markdown(result: ValidationResult) -> str:
    """Per criterion: demos, annotators, mean, κ and α with their intervals, majority votes."""
    if not result.criteria:
        return ""
    level = round(100 * result.criteria[0].agreement.confidence)
    head = (
        f"| criterion | demos | annotators | mean [{level}% CI] | sd | Fleiss' κ [{level}% CI] | "
        f"Krippendorff's α [{level}% CI] | majority vote |"
    )
    lines = [head, "|---|---:|---:|---|---:|---|---|---|"]
    notes = []
    for r in result.criteria:
        a = r.agreement
        # A majority vote is what the paper reports for the categorical criterion only.
        majority = ", ".join(f"{v} {n}" for v, n in a.majority.items() if n) if r.criterion.level == "nominal" else ""
        lines.append(
            f"| {r.criterion.name} | {a.items} | {a.raters} | {_with_interval(a.mean.value, a.mean.low, a.mean.high)} "
            f"| {_number(a.sd)} | {_with_interval(a.kappa.value, a.kappa.low, a.kappa.high)} "
            f"| {_with_interval(a.alpha.value, a.alpha.low, a.alpha.high)} ({a.level}) | {majority} |"
        )
        if r.criterion.level == "ordinal":
            top = r.criterion.values[-2]
            notes.append(
                f"{r.criterion.name}: {100 * r.share_at_least(top):.1f}% of demos have a mean of at least {top}"
            )
        else:
            notes.append(f"{r.criterion.name}: the mean is the share of ratings {r.criterion.labels[0]}")
    return "\n".join(lines + [""] + notes) + "\n"
