"""Report outputs: LaTeX marks, the summary tables, and `write_report` end to end on two tiny runs."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

from mmctx.reporting.folder import write_report, write_report_results
from mmctx.reporting.latex import accuracy_table_latex, escape, rank_marks, table1_latex
from mmctx.reporting.summary import (
    comparison_markdown,
    comparison_rows,
    setting_label,
    table1_markdown,
)
from mmctx.scoring.results import AVERAGE, CellMetrics, SampleResult
from mmctx.scoring.stats import COMPARISONS


def cell(task: str, setting: str, accuracy: float, scorer: str = "generate") -> CellMetrics:
    return CellMetrics(
        task=task, setting=setting, scorer=scorer, n=10, accuracy=accuracy, ci_low=accuracy - 0.1,
        ci_high=accuracy + 0.1, unparsed_rate=0.0, truncation_rate=0.0, errors=0, missing=0,
    )  # fmt: skip


def sample(qid: str, setting: str, correct: bool, scorer: str = "generate", task: str = "counting") -> SampleResult:
    probs = (0.7, 0.3) if correct else (0.4, 0.6)
    return SampleResult(
        request_id=f"{setting}/{scorer}/{qid}", query_id=qid, task=task, source="hand", setting=setting,
        scorer=scorer, gold=0, pred=0 if correct else 1, outcome="correct" if correct else "wrong",
        probs=probs if scorer == "ppl" else (),
    )  # fmt: skip


# --- LaTeX marks --------------------------------------------------------------------------------


def test_rank_marks_with_ties_and_gaps() -> None:
    assert rank_marks([80.0, 75.0, 80.0, 70.0]) == ["best", "second", "best", ""]  # tie for best: both bold
    assert rank_marks([90.0, 70.0, 70.0, 60.0]) == ["best", "second", "second", ""]  # dense: ties share second
    assert rank_marks([75.04, 75.01, 60.0]) == ["best", "best", "second"]  # ranked as printed (75.0)
    assert rank_marks([math.nan, 50.0, 40.0]) == ["", "best", "second"]
    assert rank_marks([50.0]) == [""]  # nothing to beat
    assert rank_marks([50.0, 50.0]) == ["", ""]  # all equal: nothing is best
    assert rank_marks([math.nan, 50.0]) == ["", ""]


def test_table1_latex_marks_the_right_cells() -> None:
    runs = [
        ("model_a", [cell(AVERAGE, "0-shot", 0.70), cell(AVERAGE, "4-random", 0.60)]),
        ("model&b", [cell(AVERAGE, "0-shot", 0.80), cell(AVERAGE, "4-random", 0.55)]),
        ("c", [cell(AVERAGE, "0-shot", 0.75), cell(AVERAGE, "4-random", 0.65)]),
    ]
    tex = table1_latex(runs)
    rows = {line.split(" & ")[0]: line for line in tex.splitlines() if " & " in line and "Model" not in line}
    assert set(rows) == {r"model\_a", r"model\&b", "c"}
    assert rows[r"model\&b"].startswith(r"model\&b & \textbf{80.00} & 55.00 & --")
    assert rows["c"].startswith(r"c & \underline{75.00} & \textbf{65.00} & --")
    assert rows[r"model\_a"].startswith(r"model\_a & 70.00 & \underline{60.00} & --")
    assert all(line.count(" & ") == 5 for line in rows.values())  # Model + 5 Table 1 columns
    assert r"\toprule" in tex and r"\bottomrule" in tex and tex.count("{") == tex.count("}")
    assert escape("a_b%c") == r"a\_b\%c"


def test_accuracy_table_latex_blocks_and_marks() -> None:
    def run(acc: float) -> list[CellMetrics]:
        return [
            cell(task, setting, acc + (0.1 if setting == "4-similar" else 0.0))
            for task in ("counting", "plurality", AVERAGE)
            for setting in ("0-shot", "4-random", "4-similar")
        ]

    tex = accuracy_table_latex([("x", run(0.5)), ("y", run(0.6)), ("z", run(0.4))], "generate")
    assert tex.count(r"\begin{tabular}") == 2  # zero-shot block and 4-shot block
    assert r"\textit{Zero-shot}" in tex and r"\textit{4-shot}" in tex
    assert r"\multicolumn{2}{c}{Counting}" in tex and r"\cmidrule(lr){2-3}" in tex
    body = [line for line in tex.splitlines() if line[:2] in ("x ", "y ", "z ")]
    assert len(body) == 6
    zero_y, four_y = [line for line in body if line.startswith("y ")]
    assert zero_y == r"y & \textbf{60.0} & \textbf{60.0} & \textbf{60.0} \\"
    assert four_y.count(r"\textbf") == 6 and four_y.count(" & ") == 6
    zero_x = next(line for line in body if line.startswith("x "))
    assert zero_x.count(r"\underline") == 3
    assert tex.count("{") == tex.count("}")
    assert accuracy_table_latex([("x", run(0.5))], "ppl") == ""  # no ppl cells: no table


# --- summary tables -----------------------------------------------------------------------------


def test_table1_markdown_and_setting_labels() -> None:
    text = table1_markdown([("m", [cell(AVERAGE, "0-shot", 0.7527), cell(AVERAGE, "8-similar-cot", 0.7398)])])
    assert "| Model | 0-Shot | 4-Rand | 4-Sim | 4-Sim+CoT | 8-Sim+CoT |" in text
    assert "| m | 75.27 | – | – | – | 73.98 |" in text
    assert [setting_label(s) for s in ("0-shot", "4-random", "8-similar-cot")] == ["0-Shot", "4-Rand", "8-Sim+CoT"]


def _hand_run(improve: int) -> list[SampleResult]:
    """30 items; the 4-random setting answers ``improve`` more items correctly than 0-shot."""
    rs = [sample(f"q{i}", "0-shot", i < 10) for i in range(30)]
    rs += [sample(f"q{i}", "4-random", i < 10 + improve) for i in range(30)]
    rs += [sample(f"q{i}", s, i % 2 == 0, scorer="ppl") for s in ("0-shot", "4-random") for i in range(30)]
    return rs


def test_comparison_markdown_marks_significance() -> None:
    rows = comparison_rows([("strong", _hand_run(12)), ("same", _hand_run(0))])
    assert [(r.model, r.scorer, r.question) for r in rows] == [
        (m, s, "4-shot random vs 0-shot") for m in ("strong", "same") for s in ("generate", "ppl")
    ]
    text = comparison_markdown(rows)
    strong = next(line for line in text.splitlines() if line.startswith("| strong | generate"))
    assert "+40.0**" in strong and "| 12/0 |" in strong  # exact binomial: p = 2 / 2^12
    same = next(line for line in text.splitlines() if line.startswith("| same | generate"))
    assert "+0.0 |" in same and "1.000 (none)" in same


def test_write_report_results_without_figures(tmp_path: Path) -> None:
    paths = write_report_results([("a", _hand_run(3)), ("b", _hand_run(5))], tmp_path, latex=True, figures=False)
    names = {p.name for p in paths}
    assert {"report.md", "table1.tex", "table4.tex", "table5.tex", "comparisons.csv", "difficulty.csv"} <= names
    assert not any(p.suffix in (".png", ".pdf") for p in paths)
    report = (tmp_path / "report.md").read_text()
    for heading in ("Table 1 columns", "Paired comparisons", "Uncertainty", "Difficulty (Figure 10)"):
        assert heading in report
    with pytest.raises(ValueError):
        write_report_results([("a", []), ("a", [])], tmp_path)


# --- end to end on two real tiny runs -----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_runs(shapes_bench, tmp_path_factory) -> list[tuple[str, Path]]:
    from mmctx.run.plan import GenerationLimits
    from mmctx.tasks.fewshot import evaluate

    root = tmp_path_factory.mktemp("report-runs")
    runs = []
    for model in ("builtin:tiny-idefics3", "builtin:tiny-llava"):
        run_dir = root / model.split(":")[1]
        evaluate(
            shapes_bench, model, run_dir,
            settings="0-shot,4-random,4-similar,4-similar-cot", scorers="generate,ppl", limit=2,
            # one task and short generations keep this test in seconds; the report does not care
            tasks=["attribute_recognition"], limits=GenerationLimits(4, 4), show_progress=False,
        )  # fmt: skip
        runs.append((model.split(":")[1], run_dir))
    return runs


def test_write_report_end_to_end(tiny_runs, tmp_path: Path) -> None:
    out = tmp_path / "report"
    paths = write_report(tiny_runs, out, latex=True, figures=True)
    assert all(p.parent == out and p.stat().st_size > 0 for p in paths)
    names = {p.name for p in paths}
    figures = (
        "accuracy_generate",
        "accuracy_ppl",
        "difficulty_generate",
        "difficulty_ppl",
        "uncertainty",
        "reliability",
    )
    expected = {f"{f}.{ext}" for f in figures for ext in ("png", "pdf")}
    expected |= {"table1.tex", "table4.tex", "table5.tex", "report.md", "metrics.csv", "table1.csv"}
    expected |= {"comparisons.csv", "comparisons_by_task.csv", "uncertainty.csv", "reliability.csv", "difficulty.csv"}
    expected |= {"cot_tags.csv"}  # the runs have a CoT setting
    assert names == expected
    for name in (n for n in names if n.endswith(".png")):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert all((out / n).read_bytes()[:5] == b"%PDF-" for n in names if n.endswith(".pdf"))

    # one comparison row per model x (scorer, question) the settings allow: CoT has no ppl row
    with open(out / "comparisons.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    asked = [c for c in COMPARISONS if c.treatment in ("4-random", "4-similar", "4-similar-cot")]  # the run's grid
    per_model = len(asked) + len([c for c in asked if "cot" not in c.treatment])
    assert len(rows) == len(tiny_runs) * per_model
    assert {r["model"] for r in rows} == {m for m, _ in tiny_runs}
    assert all(int(r["n"]) + int(r["dropped"]) == 2 for r in rows)  # limit=2 items, one task
    report = (out / "report.md").read_text()
    assert re.search(r"\| tiny-llava \| ppl \| 4-shot similar vs random \|", report)
    assert r"\begin{table*}" in (out / "table4.tex").read_text()
    # CoT failure tags: the one CoT setting, its one task and all tasks, per model; 2 responses each
    with open(out / "cot_tags.csv", encoding="utf-8") as f:
        cot = list(csv.DictReader(f))
    assert [(r["model"], r["task"], r["setting"], r["responses"]) for r in cot] == [
        (m, task, "4-similar-cot", "2") for m, _ in tiny_runs for task in ("attribute_recognition", "All tasks")
    ]
    assert "## CoT failure tags" in report


def test_capability_heatmap_and_complexity_scatter_are_written(tmp_path):
    """CLBench-V's Figure 2 and the complexity analysis, from synthetic scores (its runs come with issue 6)."""
    from mmctx.reporting.paper_figures import capability_heatmap, complexity_scatter

    scores = {"model-a": {"ReasonMap": 0.4, "ZeroBench": 0.1}, "model-b": {"ReasonMap": 0.6, "ZeroBench": 0.05}}
    paths = capability_heatmap(scores, tmp_path / "heatmap")
    points = [(100.0 * i, 1.0 - i / 20) for i in range(20)]
    paths += complexity_scatter(points, tmp_path / "scatter")
    assert {p.name for p in paths} == {"heatmap.png", "heatmap.pdf", "scatter.png", "scatter.pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)


def test_the_shots_curve_takes_plain_settings_of_one_strategy_only():
    from mmctx.reporting.paper_figures import shots_by_strategy
    from mmctx.scoring.results import AVERAGE, CellMetrics

    def cell(setting, scorer="ppl"):
        return CellMetrics(AVERAGE, setting, scorer, 10, 0.5, 0.4, 0.6, 0.0, math.nan, 0, 0)

    names = ["0-shot", "4-similar", "16-similar", "4-random", "4-similar-cot", "4-similar-last", "0-shot-blind",
             "4-similar#o1"]  # fmt: skip
    curves = shots_by_strategy([("m", [cell(n) for n in names] + [cell("8-similar", "generate")])], "similar")
    assert {key: sorted(cells) for key, cells in curves.items()} == {("m", "ppl"): [0, 4, 16], ("m", "generate"): [8]}


def test_a_shot_count_with_many_settings_gets_a_row_per_setting_not_a_column_per_task_and_setting():
    import math

    from mmctx.reporting.tables import markdown_tables
    from mmctx.scoring.results import CellMetrics

    def cell(setting, accuracy):
        return CellMetrics("counting", setting, "ppl", 10, accuracy, 0.0, 1.0, 0.0, math.nan, 0, 0)

    few = markdown_tables([("m", [cell("4-random", 0.5), cell("4-similar", 0.6)])])
    assert "| Model | Counting R | Counting S |" in few  # the papers' layout
    names = ["4-random", "4-similar", "4-mmr", "4-balanced", "4-similar-last"]
    many = markdown_tables([("m", [cell(n, 0.1 * i) for i, n in enumerate(names)])])
    assert "| Model | Setting | Counting | Avg. |" in many
    assert "| m | 4-mmr | 20.0 | – |" in many and "| m | 4-similar-last | 40.0 | – |" in many
