"""CLBench-V's Tables 2 and 3 from several runs, as Markdown, CSV and LaTeX, plus the capability heatmap.

- Table 2: Model | L0 | L1 | L2 | Overall (level scores are sample-weighted, see `mmctx.scoring.levels`).
- Table 3: one column per dataset, grouped by capability level in the paper's order: the L0
  datasets, the boundary L0–L1 column(s) (MIRBench), L1, the boundary L1–L2 column(s)
  (PRISMM-Bench), L2. Boundary datasets keep their own group, as the paper's caption says,
  even though Table 2 counts them in L0 and L1.

Marks, as in the paper: in each column the best value is bold and the second best underlined,
ranked on the values as printed (4 decimals, dense ranking with ties; `mmctx.reporting.latex.rank_marks`).
Markdown writes them as ``**0.2847**`` and ``<u>0.2710</u>`` (GitHub renders ``<u>``); LaTeX as
``\\textbf{}`` and ``\\underline{}``. CSVs hold unrounded floats and no marks, so they parse back.
A missing cell (a model without that dataset) prints as ``–`` (``--`` in LaTeX) and is blank in CSV.
Model, dataset, level and outcome names are escaped for the format (`markdown_text` in Markdown,
`mmctx.reporting.latex.escape` in LaTeX), so they print as text and never split a row.

Under Table 3 a note lists every non-scored outcome per model ("context_overflow: Financial
Report ROE 206"), because such samples count as 0 and a 0.0000 must be explained, and the ROE
mean absolute error where a run has one.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from mmctx.data.clbench.suite import LEVEL_ORDER
from mmctx.reporting.escaping import markdown_text as md
from mmctx.reporting.latex import _body, escape, rank_marks
from mmctx.reporting.paper_figures import capability_heatmap
from mmctx.scoring.evaluators.base import OUTCOMES
from mmctx.scoring.levels import LevelScores, dataset_order

__all__ = [
    "GROUP_ORDER",
    "datasets_csv",
    "table2_csv",
    "table2_latex",
    "table2_markdown",
    "table3_columns",
    "table3_csv",
    "table3_latex",
    "table3_markdown",
    "table3_notes",
    "write_clbench_report",
]

DECIMALS = 4  # the paper prints scores as 0.2847
GROUP_ORDER: tuple[str, ...] = ("L0", "L0–L1", "L1", "L1–L2", "L2")
OVERALL = "Overall"
CAPTION2 = (
    "Main results aggregated by multimodal context learning level. Dataset scores are weighted by their numbers "
    "of instances; MIRBench is assigned to L0 and PRISMM-Bench to L1. Best in each column in bold, second underlined."
)
CAPTION3 = (
    "Dataset-level results grouped by capability level; boundary datasets are shown in separate columns. "
    "Best in each column in bold, second underlined."
)

Runs = Mapping[str, LevelScores]


# --- values ---------------------------------------------------------------------------------------


def _table2_columns(runs: Runs) -> list[str]:
    present = {lv for s in runs.values() for lv in s.level_scores}
    return [lv for lv in LEVEL_ORDER if lv in present] + sorted(present - set(LEVEL_ORDER)) + [OVERALL]


def _table2_value(scores: LevelScores, column: str) -> float:
    return scores.overall if column == OVERALL else scores.level_scores.get(column, math.nan)


def table3_columns(runs: Runs) -> list[tuple[str, list[str]]]:
    """``[(group, [dataset, ...]), ...]`` in `GROUP_ORDER`; datasets in suite order; unknown groups last."""
    level_of: dict[str, str] = {}
    for scores in runs.values():
        for d, level in scores.dataset_level.items():
            level_of.setdefault(d, level or scores.dataset_table_level[d])
    groups: dict[str, list[str]] = {}
    for d in dataset_order(level_of):
        groups.setdefault(level_of[d], []).append(d)
    order = [g for g in GROUP_ORDER if g in groups] + sorted(set(groups) - set(GROUP_ORDER))
    return [(g, groups[g]) for g in order]


def _datasets(runs: Runs) -> list[str]:
    return [d for _, ds in table3_columns(runs) for d in ds]


def _grid(runs: Runs, columns: Sequence[str], value) -> list[list[float]]:
    """``grid[j][i]``: column j, model i (the layout `rank_marks` and the LaTeX body take)."""
    return [[value(scores, c) for scores in runs.values()] for c in columns]


def _fmt(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.{DECIMALS}f}"


def _md_cell(value: float, mark: str) -> str:
    text = _fmt(value)
    return {"best": f"**{text}**", "second": f"<u>{text}</u>"}.get(mark, text)


def _md_rows(models: Sequence[str], grid: Sequence[Sequence[float]]) -> list[str]:
    marks = [rank_marks(col, DECIMALS) for col in grid]
    return [
        "| " + " | ".join([md(m)] + [_md_cell(col[i], mk[i]) for col, mk in zip(grid, marks)]) + " |"
        for i, m in enumerate(models)
    ]


def _csv_value(value: float) -> str:
    return "" if math.isnan(value) else repr(float(value))


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _tex(text: str) -> str:
    """Escaped LaTeX text; an en dash (level ranges like L0–L1) as ``--`` so plain pdflatex reads it."""
    return escape(text).replace("–", "--")


# --- Table 2 --------------------------------------------------------------------------------------


def table2_markdown(runs: Runs) -> str:
    columns = _table2_columns(runs)
    lines = ["| " + " | ".join(["Model"] + [md(c) for c in columns]) + " |", "|" + "---|" * (len(columns) + 1)]
    lines += _md_rows(list(runs), _grid(runs, columns, _table2_value))
    note = "Level and overall scores are sample-weighted (every sample counts once, non-scored ones as 0)."
    return "\n".join(lines) + f"\n\n{note}\n"


def table2_csv(runs: Runs, path: Path) -> Path:
    """``model, L0, L1, L2, Overall, n_L0, n_L1, n_L2, n`` with unrounded scores."""
    columns = _table2_columns(runs)
    levels = columns[:-1]
    header = ["model"] + columns + [f"n_{lv}" for lv in levels] + ["n"]
    rows = [
        [model]
        + [_csv_value(_table2_value(s, c)) for c in columns]
        + [str(s.level_n.get(lv, "")) for lv in levels]
        + [str(s.n)]
        for model, s in runs.items()
    ]
    return _write_csv(path, header, rows)


def table2_latex(runs: Runs) -> str:
    columns = _table2_columns(runs)
    lines = [
        "% Needs \\usepackage{booktabs}.",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{l" + "c" * len(columns) + "}",
        r"\toprule",
        " & ".join(["Model"] + [_tex(c) for c in columns]) + r" \\",
        r"\midrule",
        *_body(list(runs), _grid(runs, columns, _table2_value), DECIMALS),
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{_tex(CAPTION2)}}}",
        r"\label{tab:clbench-levels}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


# --- Table 3 --------------------------------------------------------------------------------------


def _dataset_value(scores: LevelScores, dataset: str) -> float:
    return scores.dataset_scores.get(dataset, math.nan)


def table3_notes(runs: Runs) -> list[str]:
    """One line per model with non-scored outcomes or a ROE MAE, e.g.
    ``"M: context_overflow: Financial Report ROE 206; unparsed: CourtSI 3"``; all-scored models get none."""
    notes = []
    for model, scores in runs.items():
        parts = [
            f"{outcome}: " + ", ".join(f"{d} {c}" for d, c in hits.items())
            for outcome, hits in scores.non_scored().items()
        ]
        parts += [f"{d} MAE {mae:.2f} pp (n={scores.roe_mae_n[d]})" for d, mae in scores.roe_mae.items()]
        parts += [
            f"{d} {name} {mean:.4f} (n={n})"
            for d, metrics in scores.sub_scores.items()
            for name, (mean, n) in metrics.items()
        ]
        if parts:
            notes.append(f"{model}: " + "; ".join(parts))
    return notes


def _notes_text(runs: Runs) -> str:
    notes = table3_notes(runs)
    if not notes:
        return "All samples were scored."
    return "Non-scored samples count as 0 (outcome: dataset count); ROE error over scored samples.\n" + "\n".join(
        f"- {md(line)}" for line in notes
    )


def table3_markdown(runs: Runs) -> str:
    groups = table3_columns(runs)
    datasets = [d for _, ds in groups for d in ds]
    head = ["Model"] + [md(f"{d} ({g})") for g, ds in groups for d in ds]
    lines = [
        "Columns by level: " + "; ".join(f"{md(g)}: {', '.join(md(d) for d in ds)}" for g, ds in groups) + "\n",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += _md_rows(list(runs), _grid(runs, datasets, _dataset_value))
    return "\n".join(lines) + "\n\n" + _notes_text(runs) + "\n"


def table3_csv(runs: Runs, path: Path) -> Path:
    """``model, <dataset>...`` in Table 3's column order, unrounded (the group of each column: `table3_columns`)."""
    datasets = _datasets(runs)
    rows = [[model] + [_csv_value(_dataset_value(s, d)) for d in datasets] for model, s in runs.items()]
    return _write_csv(path, ["model"] + datasets, rows)


def datasets_csv(runs: Runs, path: Path) -> Path:
    """Long form, one row per model and dataset: levels, n, score, every outcome count, ROE MAE."""
    header = ["model", "dataset", "level", "table_level", "n", "score", *OUTCOMES, "roe_mae", "roe_mae_n"]
    rows = []
    for model, s in runs.items():
        for d in _datasets(runs):
            if d not in s.dataset_scores:
                continue
            mae = s.roe_mae.get(d)
            rows.append(
                [model, d, s.dataset_level[d], s.dataset_table_level[d], str(s.dataset_n[d])]
                + [_csv_value(s.dataset_scores[d])]
                + [str(s.dataset_outcomes[d][o]) for o in OUTCOMES]
                + ["" if mae is None else repr(mae), str(s.roe_mae_n.get(d, ""))]
            )
    return _write_csv(path, header, rows)


def table3_latex(runs: Runs) -> str:
    groups = table3_columns(runs)
    datasets = [d for _, ds in groups for d in ds]
    spans, start = [], 2
    for g, ds in groups:
        spans.append((g, start, start + len(ds) - 1))
        start += len(ds)
    notes = table3_notes(runs)
    lines = [
        "% Needs \\usepackage{booktabs} and \\usepackage{graphicx}.",
        r"\begin{table*}[t]",
        r"\centering",
        r"\resizebox{\textwidth}{!}{%",
        r"\begin{tabular}{l" + "c" * len(datasets) + "}",
        r"\toprule",
        " & ".join([""] + [rf"\multicolumn{{{b - a + 1}}}{{c}}{{{_tex(g)}}}" for g, a, b in spans]) + r" \\",
        " ".join(rf"\cmidrule(lr){{{a}-{b}}}" for _, a, b in spans),
        " & ".join(["Model"] + [_tex(d) for d in datasets]) + r" \\",
        r"\midrule",
        *_body(list(runs), _grid(runs, datasets, _dataset_value), DECIMALS),
        r"\bottomrule",
        r"\end{tabular}",
        "}",
    ]
    if notes:
        text = ". ".join(_tex(n) for n in notes)  # one sentence per model
        lines += [r"\par\smallskip", rf"{{\footnotesize Non-scored samples count as 0. {text}.}}"]
    lines += [rf"\caption{{{_tex(CAPTION3)}}}", r"\label{tab:clbench-datasets}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


# --- report ---------------------------------------------------------------------------------------


def write_clbench_report(runs: Runs, out_dir: str | Path) -> list[Path]:
    """Tables 2 and 3 (``.md``, ``.csv``, ``.tex``), ``datasets.csv`` and the capability heatmap (PNG, PDF)."""
    if not runs:
        raise ValueError("no runs to report")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for name, text in (
        ("table2.md", table2_markdown(runs)),
        ("table2.tex", table2_latex(runs)),
        ("table3.md", table3_markdown(runs)),
        ("table3.tex", table3_latex(runs)),
    ):
        (out / name).write_text(text, encoding="utf-8")
        paths.append(out / name)
    paths += [table2_csv(runs, out / "table2.csv"), table3_csv(runs, out / "table3.csv")]
    paths.append(datasets_csv(runs, out / "datasets.csv"))
    heat = {model: dict(s.dataset_scores) for model, s in runs.items()}
    paths += capability_heatmap(heat, out / "capability_heatmap", title="CLBench-V capability profile")
    return paths
