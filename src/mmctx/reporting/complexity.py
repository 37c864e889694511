"""The context-complexity report (CLBench-V §6.1) on disk: correlations as ``complexity.csv`` and
``complexity.json``, score-against-measure scatters as PNG and PDF, and the terminal's table.

The numbers come from `mmctx.analysis.complexity`; this module only writes and formats them.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mmctx.analysis.clbench import complexity_runs
from mmctx.analysis.complexity import ComplexityRow, complexity_results, correlations, kept_rows
from mmctx.reporting.paper_figures import complexity_scatter

__all__ = ["complexity_report", "write_complexity_figures", "write_complexity_report"]


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text).strip("_") or "run"


def _fmt(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def write_complexity_figures(
    rows: Sequence[ComplexityRow], out_dir: str | Path, name: str = "", exclude_subsets: Iterable[str] = ()
) -> list[Path]:
    """Two scatters (score vs tokens, score vs images) via `complexity_scatter`; PNG and PDF each."""
    excluded = list(exclude_subsets)
    kept = kept_rows(rows, excluded)
    stem = f"complexity_{_slug(name)}" if name else "complexity"
    suffix = "_excl" if excluded else ""
    tokenizer = ", ".join(sorted({r.tokenizer for r in kept if r.tokenizer})) or "unnamed tokenizer"
    title = f"{name}: context complexity" if name else "Context complexity"
    out = Path(out_dir)
    paths = complexity_scatter(
        [(r.tokens, r.score) for r in kept], out / f"{stem}_tokens{suffix}", f"context tokens ({tokenizer})", title
    )
    paths += complexity_scatter([(r.images, r.score) for r in kept], out / f"{stem}_images{suffix}", "images", title)
    return paths


def write_complexity_report(
    runs: Mapping[str, Sequence[ComplexityRow]], out_dir: str | Path, exclude_subsets: Sequence[str] = ()
) -> list[Path]:
    """Per model: correlations over all samples and (if asked) without ``exclude_subsets``, to
    ``complexity.csv`` and ``complexity.json``, plus the scatter figures of each view."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = complexity_results(runs, exclude_subsets)
    views: list[Sequence[str]] = [()] + ([list(exclude_subsets)] if exclude_subsets else [])
    paths = [
        p for model, rows in runs.items() for view in views for p in write_complexity_figures(rows, out, model, view)
    ]
    with open(out / "complexity.json", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, ensure_ascii=False)
    with open(out / "complexity.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(results[0]) if results else ["model"])
        writer.writeheader()
        for r in results:
            writer.writerow(
                {k: ("; ".join(v) if isinstance(v, list) else "" if v is None else v) for k, v in r.items()}
            )
    return [out / "complexity.csv", out / "complexity.json"] + paths


def complexity_report(run_dirs: list[Path], tokenizer: str, exclude: list[str], out: Path | None) -> str:
    """Pearson and Spearman of token length and image count against score, per run, as Markdown;
    with ``out``, the correlations and scatters are written there too (`write_complexity_report`)."""
    name, runs = complexity_runs(run_dirs, tokenizer)
    lines = [
        f"Tokenizer: {name}",
        "",
        "| Model | Excluded | n | tokens r | tokens ρ | images r | images ρ |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, rows in runs.items():
        for view in [()] + ([exclude] if exclude else []):
            c = correlations(rows, view)
            lines.append(
                f"| {model} | {', '.join(view) or '–'} | {c['n']} | {_fmt(c['tokens_pearson'])} | "
                f"{_fmt(c['tokens_spearman'])} | {_fmt(c['images_pearson'])} | {_fmt(c['images_spearman'])} |"
            )
    if out:
        write_complexity_report(runs, out, exclude)
    return "\n".join(lines)
