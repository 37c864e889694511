"""The papers' tables as LaTeX (booktabs): pure functions from ``(model, cells)`` lists to a string.

- `accuracy_table_latex`: Table 4 (``scorer="generate"``) or Table 5 (``"ppl"``): one tabular
  per shot count (Zero-shot, 4-shot, 8-shot), columns task × setting (R, S, S+C) and Avg.
- `table1_latex`: Table 1's evaluation columns (0-Shot … 8-Sim+CoT, ``Avg.`` per model).

Marks, as in the papers: in every column the best value is ``\\textbf{}`` and the second best
``\\underline{}``. Ranks are taken on the values *as printed* (rounded), with dense ranking:
every cell tied for best is bold, every cell tied at the next distinct value is underlined.
A column with fewer than two printed numbers, or whose numbers all print the same, gets no
marks (there is nothing to beat).
Empty cells print as ``--``. Needs ``\\usepackage{booktabs}`` and ``\\usepackage{graphicx}``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from mmctx.reporting.summary import TABLE1_COLUMNS, ModelCells, ordered_settings, table1_values
from mmctx.reporting.tables import TASK_HEADERS, _short
from mmctx.run.settings import Setting
from mmctx.schema import TASKS
from mmctx.scoring.results import AVERAGE, CellMetrics

__all__ = ["accuracy_table_latex", "escape", "rank_marks", "table1_latex", "table4_latex", "table5_latex"]

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # not special to LaTeX, but OT1-encoded fonts print them as other glyphs (¡, ¿, —)
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_BREAKS = re.compile(r"[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")

CAPTIONS = {
    "generate": "Accuracy on the benchmark with 0, 4 and 8 shots: Random (R), Similar (S) and Similar with CoT (S+C).",
    "ppl": "Perplexity-ranked (pairwise) accuracy: the option with the lowest per-token perplexity is the prediction.",
}


def escape(text: str) -> str:
    """Free text such as a model or task name as LaTeX that prints it: the special characters
    escaped, and line breaks (a blank line would end the paragraph, inside a table an error) as spaces."""
    return "".join(_SPECIAL.get(ch, ch) for ch in _BREAKS.sub(" ", str(text)))


def rank_marks(values: Sequence[float], decimals: int = 1) -> list[str]:
    """``"best"``, ``"second"`` or ``""`` per value (higher is better), on the values rounded to ``decimals``.

    Dense ranking with ties: all values equal (as printed) to the maximum are ``"best"``; all
    equal to the next distinct value are ``"second"``. ``nan`` is never marked. Fewer than two
    numbers, or all of them equal as printed: no marks (nothing is best).
    """
    shown = [None if v is None or math.isnan(v) else round(v, decimals) for v in values]
    distinct = sorted({v for v in shown if v is not None}, reverse=True)
    if sum(v is not None for v in shown) < 2 or len(distinct) < 2:
        return [""] * len(values)
    best = distinct[0]
    second = distinct[1] if len(distinct) > 1 else None
    return ["best" if v == best else "second" if v is not None and v == second else "" for v in shown]


def _cell(value: float, mark: str, decimals: int) -> str:
    if value is None or math.isnan(value):
        return "--"
    text = f"{value:.{decimals}f}"
    return {"best": rf"\textbf{{{text}}}", "second": rf"\underline{{{text}}}"}.get(mark, text)


def _body(models: Sequence[str], columns: Sequence[Sequence[float]], decimals: int) -> list[str]:
    """Rows ``model & v1 & v2 ... \\\\`` with per-column marks; ``columns[j][i]`` is model i, column j."""
    marks = [rank_marks(col, decimals) for col in columns]
    return [
        " & ".join([escape(model)] + [_cell(col[i], m[i], decimals) for col, m in zip(columns, marks)]) + r" \\"
        for i, model in enumerate(models)
    ]


def _tasks(cells: Sequence[tuple[str, CellMetrics]]) -> list[str]:
    present = {c.task for _, c in cells}
    return [t for t in TASKS if t in present] + sorted(present - set(TASKS) - {AVERAGE})


def _block(shots: int, settings: list[str], runs: Sequence[ModelCells], scorer: str, decimals: int) -> list[str]:
    mine = [(m, c) for m, cs in runs for c in cs if c.scorer == scorer]
    index = {(m, c.task, c.setting): c.accuracy for m, c in mine}
    tasks = _tasks(mine) + [AVERAGE]
    columns = [(t, s) for t in tasks for s in settings]
    values = [[index.get((model, t, s), math.nan) * 100 for model, _ in runs] for t, s in columns]
    width = len(settings)
    title = "Zero-shot" if shots == 0 else f"{shots}-shot"
    spec = "l" + "".join("c" * width for _ in tasks)
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    if width > 1:
        groups = [rf"\multicolumn{{{width}}}{{c}}{{{escape(TASK_HEADERS.get(t, t))}}}" for t in tasks]
        rules = [rf"\cmidrule(lr){{{2 + i * width}-{1 + (i + 1) * width}}}" for i in range(len(tasks))]
        lines += [" & ".join([""] + groups) + r" \\", " ".join(rules)]
        lines.append(" & ".join(["Model"] + [escape(_short(Setting.parse(s))) for _, s in columns]) + r" \\")
    else:
        lines.append(" & ".join(["Model"] + [escape(TASK_HEADERS.get(t, t)) for t in tasks]) + r" \\")
    lines.append(r"\midrule")
    lines += _body([m for m, _ in runs], values, decimals)
    lines += [r"\bottomrule", r"\end{tabular}"]
    return [rf"\textit{{{title}}}\\[2pt]", r"\resizebox{\textwidth}{!}{%"] + lines + ["}"]


def accuracy_table_latex(runs: Sequence[ModelCells], scorer: str = "generate", decimals: int = 1) -> str:
    """Table 4 (``generate``) or Table 5 (``ppl``) layout; accuracies in %, marks per column per block."""
    settings = ordered_settings([c.setting for _, cs in runs for c in cs if c.scorer == scorer])
    if not settings:
        return ""
    shot_counts = sorted({Setting.parse(s).shots for s in settings})
    lines = [
        "% Needs \\usepackage{booktabs} and \\usepackage{graphicx}.",
        r"\begin{table*}[t]",
        r"\centering",
        r"\small",
    ]
    for i, shots in enumerate(shot_counts):
        if i:
            lines.append(r"\\[6pt]")
        lines += _block(shots, [s for s in settings if Setting.parse(s).shots == shots], runs, scorer, decimals)
    label = {"generate": "tab:accuracy", "ppl": "tab:pairwise-accuracy"}.get(scorer, f"tab:{scorer}")
    lines += [rf"\caption{{{CAPTIONS.get(scorer, escape(scorer))}}}", rf"\label{{{label}}}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def table4_latex(runs: Sequence[ModelCells]) -> str:
    return accuracy_table_latex(runs, "generate")


def table5_latex(runs: Sequence[ModelCells]) -> str:
    return accuracy_table_latex(runs, "ppl")


def table1_latex(runs: Sequence[ModelCells], scorer: str = "generate", decimals: int = 2) -> str:
    """Table 1's evaluation columns: each model's ``Avg.`` accuracy (%) per setting."""
    rows = table1_values(runs, scorer)
    columns = [[values[j] * 100 for _, values in rows] for j in range(len(TABLE1_COLUMNS))]
    lines = [
        "% Needs \\usepackage{booktabs}.",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{l" + "c" * len(TABLE1_COLUMNS) + "}",
        r"\toprule",
        " & ".join(["Model"] + [escape(h) for h, _ in TABLE1_COLUMNS]) + r" \\",
        r"\midrule",
        *_body([m for m, _ in rows], columns, decimals),
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{Average accuracy (\%) over tasks under zero-shot and few-shot prompting.}",
        r"\label{tab:models}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"
