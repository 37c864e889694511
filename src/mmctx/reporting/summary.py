"""Summary tables over several runs; `mmctx.reporting.folder` writes them into a report folder.

- Table 1's evaluation columns (0-Shot, 4-Rand, 4-Sim, 4-Sim+CoT, 8-Sim+CoT): each model's
  ``Avg.`` accuracy per setting (generation by default, as in the paper).
- The comparison table: per model and scorer, "does k-shot beat 0-shot / similar beat random /
  CoT beat no CoT", with the paired difference, its 95% CI and McNemar's p (`score.stats`).
- Uncertainty and difficulty summaries (paper C.1 and C.2).

Every name in the Markdown (model, task,
setting, scorer) is written with `markdown_text`: it renders as text, and a ``|`` in it never
splits a table row. The CSVs hold the names as they are.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from mmctx.reporting.escaping import markdown_text as md
from mmctx.run.settings import Setting
from mmctx.scoring import stats
from mmctx.scoring.results import AVERAGE, CellMetrics, SampleResult

ModelCells = tuple[str, Sequence[CellMetrics]]
ModelResults = tuple[str, Sequence[SampleResult]]

# Table 1's evaluation columns: (header, setting).
TABLE1_COLUMNS: tuple[tuple[str, str], ...] = (
    ("0-Shot", "0-shot"),
    ("4-Rand", "4-random"),
    ("4-Sim", "4-similar"),
    ("4-Sim+CoT", "4-similar-cot"),
    ("8-Sim+CoT", "8-similar-cot"),
)


# --- settings: order and labels -----------------------------------------------------------------


def setting_key(name: str) -> tuple:
    """The tables' order (`Setting.sort_key`)."""
    return Setting.parse(name).sort_key


def ordered_settings(names: Sequence[str]) -> list[str]:
    return sorted(set(names), key=setting_key)


def setting_label(name: str) -> str:
    """``4-similar-cot`` → ``4-Sim+CoT``, as in Table 1."""
    s = Setting.parse(name)
    base = (
        f"{s.shots}-Shot"
        if s.shots == 0
        else f"{s.shots}-" + {"random": "Rand", "similar": "Sim"}.get(s.demos or "", str(s.demos))
    )
    return base + ("+CoT" if s.cot else "") + _ablation_label(s)


def _ablation_label(s: Setting) -> str:
    """`` blind``, `` blank#p1``…: a shortcut check must never read as its full-vision setting."""
    return ("" if s.vision == "full" else f" {s.vision}") + (f"#p{s.option_order}" if s.option_order else "")


def _pct(value: float, decimals: int = 1) -> str:
    return "–" if value is None or math.isnan(value) else f"{value * 100:.{decimals}f}"


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _write_csv(path: Path, rows: Sequence[dict]) -> Path:
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as f:
        fields = list(rows[0]) if rows else []
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


# --- Table 1 ------------------------------------------------------------------------------------


def table1_values(runs: Sequence[ModelCells], scorer: str = "generate") -> list[tuple[str, list[float]]]:
    """Per model, the ``Avg.`` accuracy (fraction) of each Table 1 column; ``nan`` where not run."""
    out = []
    for model, cells in runs:
        avg = {c.setting: c.accuracy for c in cells if c.task == AVERAGE and c.scorer == scorer}
        out.append((model, [avg.get(setting, math.nan) for _, setting in TABLE1_COLUMNS]))
    return out


def table1_markdown(runs: Sequence[ModelCells], scorer: str = "generate") -> str:
    head = ["Model"] + [h for h, _ in TABLE1_COLUMNS]
    rows = [[md(model)] + [_pct(v, 2) for v in values] for model, values in table1_values(runs, scorer)]
    return _md_table(head, rows)


def table1_rows(runs: Sequence[ModelCells], scorer: str = "generate") -> list[dict]:
    return [
        {"model": model, "scorer": scorer} | {h: v for (h, _), v in zip(TABLE1_COLUMNS, values)}
        for model, values in table1_values(runs, scorer)
    ]


# --- comparison table ---------------------------------------------------------------------------


def comparison_rows(
    runs: Sequence[ModelResults], *, per_task: bool = False, seed: int = 0
) -> list[stats.ComparisonRow]:
    return [
        row for model, results in runs for row in stats.compare_settings(model, results, per_task=per_task, seed=seed)
    ]


def _p(p_value: float) -> str:
    return "–" if math.isnan(p_value) else "<0.001" if p_value < 0.001 else f"{p_value:.3f}"


def comparison_markdown(rows: Sequence[stats.ComparisonRow]) -> str:
    """One line per (model, scorer, question). Δ in points; ``*`` p < 0.05, ``**`` p < 0.01 (McNemar)."""
    head = [
        "Model",
        "Scorer",
        "Comparison",
        "Baseline",
        "Treatment",
        "Δ (pp)",
        "95% CI (pp)",
        "n",
        "+/−",
        "p",
        "Dropped",
    ]
    body = []
    for row in rows:
        r = row.result
        delta = "–" if math.isnan(r.difference) else f"{r.difference * 100:+.1f}{r.mark}"
        ci = "–" if math.isnan(r.ci_low) else f"[{r.ci_low * 100:+.1f}, {r.ci_high * 100:+.1f}]"
        label = md(row.question if row.task == AVERAGE else f"{row.question} · {row.task}")
        body.append(
            [
                md(row.model),
                md(row.scorer),
                label,
                f"{md(r.baseline)} {_pct(r.baseline_accuracy)}",
                f"{md(r.treatment)} {_pct(r.treatment_accuracy)}",
                delta,
                ci,
                str(r.n),
                f"{r.only_treatment}/{r.only_baseline}",
                f"{_p(r.p_value)} ({r.test})",
                str(r.dropped),
            ]
        )
    notes = (
        "Δ = treatment − baseline accuracy on the items both settings answered (mean over tasks), "
        "95% paired bootstrap CI; +/− = items only the treatment / only the baseline got right; "
        "p: McNemar's test (exact binomial below 25 discordant items); * p < 0.05, ** p < 0.01. "
        "Dropped: items with an error or no response in either setting.\n"
    )
    return _md_table(head, body) + "\n" + notes


def comparison_csv_rows(rows: Sequence[stats.ComparisonRow]) -> list[dict]:
    return [
        {"model": r.model, "scorer": r.scorer, "question": r.question, "task": r.task}
        | asdict(r.result)
        | {"mark": r.result.mark}
        for r in rows
    ]


# --- uncertainty and difficulty -----------------------------------------------------------------


def _by_setting(results: Sequence[SampleResult]) -> dict[str, list[SampleResult]]:
    """The ``ppl`` results with option probabilities, per setting (the paper's C.2 reads raw ppl;
    ``ppl-calibrated`` results carry probabilities too, of another distribution)."""
    groups: dict[str, list[SampleResult]] = defaultdict(list)
    for r in results:
        if r.probs and r.scorer == "ppl":
            groups[r.setting].append(r)
    return {s: groups[s] for s in ordered_settings(list(groups))}


def uncertainty(
    runs: Sequence[ModelResults], n_bins: int = stats.N_BINS
) -> list[tuple[str, list[stats.ConfidenceSplit], list[stats.ReliabilityDiagram]]]:
    """Per model with option probabilities (ppl results): per setting, the split and the diagram."""
    out = []
    for model, results in runs:
        groups = _by_setting(results)
        if groups:
            splits = [stats.confidence_split(s, rs) for s, rs in groups.items()]
            diagrams = [stats.reliability_diagram(s, rs, n_bins) for s, rs in groups.items()]
            out.append((model, splits, diagrams))
    return out


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def uncertainty_rows(
    data: Sequence[tuple[str, list[stats.ConfidenceSplit], list[stats.ReliabilityDiagram]]],
) -> list[dict]:
    return [
        {
            "model": model,
            "setting": split.setting,
            "n_correct": len(split.correct),
            "mean_p_correct": _mean(split.correct),
            "n_incorrect": len(split.incorrect),
            "mean_p_incorrect": _mean(split.incorrect),
            "ece": diagram.ece,
            "brier": diagram.brier,
        }
        for model, splits, diagrams in data
        for split, diagram in zip(splits, diagrams)
    ]


def reliability_rows(
    data: Sequence[tuple[str, list[stats.ConfidenceSplit], list[stats.ReliabilityDiagram]]],
) -> list[dict]:
    return [
        {
            "model": model,
            "setting": d.setting,
            "bin": i,
            "low": d.edges[i],
            "high": d.edges[i + 1],
            "count": d.counts[i],
            "accuracy": d.accuracy[i],
            "confidence": d.confidence[i],
        }
        for model, _, diagrams in data
        for d in diagrams
        for i in range(len(d.counts))
    ]


def uncertainty_markdown(rows: Sequence[dict]) -> str:
    head = ["Model", "Setting", "n correct", "mean p (correct)", "n incorrect", "mean p (incorrect)", "ECE", "Brier"]
    body = [
        [
            md(r["model"]),
            md(r["setting"]),
            str(r["n_correct"]),
            _num(r["mean_p_correct"]),
            str(r["n_incorrect"]),
            _num(r["mean_p_incorrect"]),
            _num(r["ece"]),
            _num(r["brier"]),
        ]
        for r in rows
    ]
    return _md_table(head, body)


def _num(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f}"


def difficulty_counts(runs: Sequence[ModelResults]) -> list[stats.DifficultyCounts]:
    """Figure 10 per (scorer, setting) planned in every run; buckets scaled to the number of runs."""
    present = [{(r.setting, r.scorer) for r in results} for _, results in runs]
    common = set.intersection(*present) if present else set()
    pairs = sorted(common, key=lambda p: (p[1] != "generate", p[1], setting_key(p[0])))
    return [stats.difficulty([results for _, results in runs], setting, scorer) for setting, scorer in pairs]


def difficulty_rows(counts: Sequence[stats.DifficultyCounts]) -> list[dict]:
    return [
        {"scorer": d.scorer, "setting": d.setting, "bucket": label, "low": low, "high": high, "items": n}
        | {"n_models": d.n_models, "unscored": d.unscored}
        for d in counts
        for label, (low, high), n in zip(d.labels, d.buckets, d.counts)
    ]


def difficulty_markdown(counts: Sequence[stats.DifficultyCounts]) -> str:
    if not counts:
        return ""
    out = []
    for scorer in dict.fromkeys(d.scorer for d in counts):
        mine = [d for d in counts if d.scorer == scorer]
        head = ["Setting"] + list(mine[0].labels) + ["Items", "Unscored"]
        body = [[md(d.setting)] + [str(n) for n in d.counts] + [str(d.n_items), str(d.unscored)] for d in mine]
        out.append(f"{md(scorer)} — items by number of models (of {mine[0].n_models}) answering correctly:\n\n")
        out.append(_md_table(head, body) + "\n")
    return "".join(out)
