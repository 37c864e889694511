"""CLBench-V level aggregation (by hand on a small set) and the Table 2 / 3 layouts."""

from __future__ import annotations

import csv
import json

import pytest

from mmctx.reporting.clbench_tables import (
    table2_csv,
    table2_latex,
    table2_markdown,
    table3_columns,
    table3_csv,
    table3_latex,
    table3_markdown,
    table3_notes,
    write_clbench_report,
)
from mmctx.scoring.levels import aggregate, load_run


def _row(i, subset, level, table_level, outcome="scored", score=0.0, evaluator="choice", **detail):
    return {
        "id": f"{subset}-{i}", "subset": subset, "level": level, "table_level": table_level, "evaluator": evaluator,
        "answer_type": "option", "outcome": outcome, "score": score, "prediction": "", "extracted_by": "rule",
        "repaired": False, "detail": detail, "judge": None, "prompt_tokens": None, "images": 1, "model": "m",
    }  # fmt: skip


def _rows():
    """L0: ReasonMap-Short 2 samples (1, 0), MIRBench 4 (1, 1, 0 unparsed, 0); L1: ROE 3 (1 scored 0.5 err 2.0,
    1 scored 1.0 err 0.0, 1 overflow), PRISMM 1 (1); L2: Paper Conclusion 2 (0.25, judge_error)."""
    return [
        _row(0, "ReasonMap-Short", "L0", "L0", score=1.0, evaluator="route"),
        _row(1, "ReasonMap-Short", "L0", "L0", score=0.0, evaluator="route"),
        _row(0, "MIRBench", "L0–L1", "L0", score=1.0),
        _row(1, "MIRBench", "L0–L1", "L0", score=1.0),
        _row(2, "MIRBench", "L0–L1", "L0", outcome="unparsed"),
        _row(3, "MIRBench", "L0–L1", "L0", score=0.0),
        _row(0, "Financial Report ROE", "L1", "L1", score=0.5, evaluator="roe", abs_error=2.0),
        _row(1, "Financial Report ROE", "L1", "L1", score=1.0, evaluator="roe", abs_error=0.0),
        _row(2, "Financial Report ROE", "L1", "L1", outcome="context_overflow", evaluator="roe", abs_error=99.0),
        _row(0, "PRISMM-Bench", "L1–L2", "L1", score=1.0),
        _row(0, "Paper Conclusion", "L2", "L2", score=0.25, evaluator="conclusions"),
        _row(1, "Paper Conclusion", "L2", "L2", outcome="judge_error", evaluator="conclusions"),
    ]


def test_aggregate_by_hand():
    s = aggregate(_rows())
    assert s.model == "m"
    assert s.dataset_scores == pytest.approx({
        "ReasonMap-Short": 0.5, "MIRBench": 0.5, "Financial Report ROE": 0.5, "PRISMM-Bench": 1.0,
        "Paper Conclusion": 0.125,
    })  # fmt: skip
    assert list(s.dataset_scores) == ["ReasonMap-Short", "MIRBench", "Financial Report ROE", "PRISMM-Bench",
                                      "Paper Conclusion"]  # fmt: skip
    # Micro-averages: MIRBench in L0, PRISMM in L1; overflow and other failures count as 0.
    assert s.level_scores == pytest.approx({"L0": 3 / 6, "L1": 2.5 / 4, "L2": 0.25 / 2})
    assert s.level_n == {"L0": 6, "L1": 4, "L2": 2}
    assert s.overall == pytest.approx(5.75 / 12)
    assert s.n == 12
    assert s.dataset_n["MIRBench"] == 4
    assert s.dataset_level["MIRBench"] == "L0–L1" and s.dataset_table_level["MIRBench"] == "L0"
    assert s.dataset_table_level["PRISMM-Bench"] == "L1"
    assert s.dataset_outcomes["Financial Report ROE"]["context_overflow"] == 1
    assert s.dataset_outcomes["MIRBench"]["unparsed"] == 1
    assert s.level_outcomes["L2"]["judge_error"] == 1
    assert s.level_outcomes["L0"] == {"scored": 5, "unparsed": 1, "judge_error": 0, "invalid_sample": 0,
                                      "context_overflow": 0, "error": 0}  # fmt: skip
    assert s.outcomes["scored"] == 9
    # ROE MAE over scored samples only: the overflow's abs_error is ignored.
    assert s.roe_mae == pytest.approx({"Financial Report ROE": 1.0})
    assert s.roe_mae_n == {"Financial Report ROE": 2}
    assert s.non_scored() == {
        "unparsed": {"MIRBench": 1}, "judge_error": {"Paper Conclusion": 1},
        "context_overflow": {"Financial Report ROE": 1},
    }  # fmt: skip


def test_level_differs_from_macro_average():
    """Sample weighting: a 4-sample dataset at 0.5 and a 1-sample one at 1.0 give 0.6, not 0.75."""
    rows = [_row(i, "MIRBench", "L0–L1", "L0", score=1.0 if i < 2 else 0.0) for i in range(4)]
    rows.append(_row(0, "ZeroBench", "L0", "L0", score=1.0))
    assert aggregate(rows).level_scores["L0"] == pytest.approx(0.6)


def test_all_overflow_scores_zero_and_table_level_filled_from_suite():
    rows = [_row(i, "Financial Report ROE", "L1", "", outcome="context_overflow", evaluator="roe") for i in range(3)]
    s = aggregate(rows)
    assert s.dataset_scores["Financial Report ROE"] == 0.0
    assert s.level_scores == {"L1": 0.0}
    assert s.roe_mae == {}


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"outcome": "wrong"}, "unknown outcome"),
        ({"score": 1.5}, "outside"),
    ],
)
def test_aggregate_rejects_bad_rows(bad, match):
    rows = _rows()
    rows[0] = {**rows[0], **bad}
    with pytest.raises(ValueError, match=match):
        aggregate(rows)


def test_aggregate_rejects_duplicates_and_empty():
    with pytest.raises(ValueError, match="twice"):
        aggregate(_rows() + [_rows()[0]])
    with pytest.raises(ValueError, match="no results"):
        aggregate([])


def test_load_run(tmp_path):
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in _rows()) + "\n\n", encoding="utf-8")
    assert load_run(tmp_path, model="named").model == "named"
    assert load_run(tmp_path).overall == pytest.approx(aggregate(_rows()).overall)


# --- tables ---------------------------------------------------------------------------------------


def _runs():
    """Three models: A best overall, B second; C has all of ROE overflowing."""
    a = _rows()
    b = [{**r, "model": "b"} for r in _rows()]
    b[2] = {**b[2], "score": 0.0}  # MIRBench-0 wrong
    c = [{**r, "model": "c"} for r in _rows()]
    for r in c:
        if r["subset"] == "Financial Report ROE":
            r.update(outcome="context_overflow", score=0.0)
    c[0] = {**c[0], "score": 0.0}
    c[1] = {**c[1], "score": 1.0}
    c[3] = {**c[3], "score": 0.0}
    return {"Model A": aggregate(a), "Model B": aggregate(b), "Model_C": aggregate(c)}


def test_table2_markdown_marks():
    runs = _runs()
    text = table2_markdown(runs)
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert lines[0] == "| Model | L0 | L1 | L2 | Overall |"
    a, b, c = lines[2:5]
    # L0: A 0.5000 best; B and C 0.3333 tied second.
    assert "**0.5000**" in a and "<u>0.3333</u>" in b and "<u>0.3333</u>" in c
    # Overall: A 0.4792 best, B 0.3958 second, C 0.2708 unmarked.
    assert f"**{runs['Model A'].overall:.4f}**" in a
    assert f"<u>{runs['Model B'].overall:.4f}</u>" in b
    assert c.endswith(f"| {runs['Model_C'].overall:.4f} |")
    # L2 is the same for all: no marks.
    assert "**0.1250**" not in text and "<u>0.1250</u>" not in text


def test_table3_groups_and_notes():
    runs = _runs()
    groups = table3_columns(runs)
    assert [g for g, _ in groups] == ["L0", "L0–L1", "L1", "L1–L2", "L2"]
    assert dict(groups)["L0–L1"] == ["MIRBench"] and dict(groups)["L1–L2"] == ["PRISMM-Bench"]
    text = table3_markdown(runs)
    header = next(line for line in text.splitlines() if line.startswith("| Model"))
    assert header.split(" | ")[1:] == ["ReasonMap-Short (L0)", "MIRBench (L0–L1)", "Financial Report ROE (L1)",
                                       "PRISMM-Bench (L1–L2)", "Paper Conclusion (L2) |"]  # fmt: skip
    notes = table3_notes(runs)
    c_note = next(n for n in notes if n.startswith("Model_C"))
    assert "context_overflow: Financial Report ROE 3" in c_note
    assert "Financial Report ROE MAE 1.00 pp (n=2)" in next(n for n in notes if n.startswith("Model A"))
    assert "context_overflow: Financial Report ROE 3" in text
    # ROE: A and B tie at 0.5000 (both bold); dense ranking makes C's 0.0000 the second value.
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in text.splitlines() if line.startswith("| Model")}
    assert rows["Model A"][3] == rows["Model B"][3] == "**0.5000**"
    assert rows["Model_C"][3] == "<u>0.0000</u>"


def test_csv_round_trip(tmp_path):
    runs = _runs()
    with open(table2_csv(runs, tmp_path / "t2.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["model"] for r in rows] == list(runs)
    for r, s in zip(rows, runs.values()):
        assert float(r["Overall"]) == s.overall
        assert float(r["L1"]) == s.level_scores["L1"]
        assert int(r["n"]) == s.n and int(r["n_L0"]) == s.level_n["L0"]
    with open(table3_csv(runs, tmp_path / "t3.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[1:] == [d for _, ds in table3_columns(runs) for d in ds]
    assert float(rows[2]["Financial Report ROE"]) == 0.0
    assert float(rows[0]["Paper Conclusion"]) == 0.125


def test_csv_blank_for_missing_dataset(tmp_path):
    runs = _runs()
    only_zb = aggregate([_row(0, "ZeroBench", "L0", "L0", score=1.0)])
    runs = {**runs, "Z": only_zb}
    with open(table3_csv(runs, tmp_path / "t3.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["MIRBench"] == "" and float(rows[-1]["ZeroBench"]) == 1.0
    assert "–" in table3_markdown(runs)
    assert "--" in table3_latex(runs)
    assert "--" in table2_latex(runs)


def test_latex_booktabs():
    runs = _runs()
    t2 = table2_latex(runs)
    for token in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{lcccc}", r"\textbf{0.5000}",
                  r"\underline{0.3333}", r"Model\_C"):  # fmt: skip
        assert token in t2
    assert t2.count(r"\\") == 4  # header + 3 models
    t3 = table3_latex(runs)
    assert r"\multicolumn{1}{c}{L0--L1}" in t3 and r"\cmidrule(lr){2-2}" in t3
    assert r"\begin{tabular}{lccccc}" in t3
    assert "context\\_overflow: Financial Report ROE 3" in t3
    assert t3.count("{") == t3.count("}")
    assert "–" not in t3


def test_write_clbench_report(tmp_path):
    paths = write_clbench_report(_runs(), tmp_path / "report")
    names = {p.name for p in paths}
    assert {"table2.md", "table2.csv", "table2.tex", "table3.md", "table3.csv", "table3.tex"} <= names
    assert {"capability_heatmap.png", "capability_heatmap.pdf", "datasets.csv"} <= names
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    with open(tmp_path / "report" / "datasets.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    roe_c = next(r for r in rows if r["model"] == "Model_C" and r["dataset"] == "Financial Report ROE")
    assert roe_c["context_overflow"] == "3" and roe_c["roe_mae"] == ""


def test_map_score_and_courtsi_metric_split_are_reported_beside_the_scores():
    from mmctx.reporting.clbench_tables import table3_notes
    from mmctx.scoring.levels import aggregate

    def row(i, subset, evaluator, outcome, score, answer_type="route", **detail):
        return {
            "id": f"{subset}-{i}",
            "subset": subset,
            "evaluator": evaluator,
            "answer_type": answer_type,
            "outcome": outcome,
            "score": score,
            "detail": detail,
            "model": "m",
        }

    rows = [
        row(0, "ReasonMap-Short", "route", "scored", 1.0, map_score=1.0),
        row(1, "ReasonMap-Short", "route", "scored", 0.0, map_score=0.25),
        row(2, "ReasonMap-Short", "route", "unparsed", 0.0),
        row(0, "CourtSI", "courtsi", "scored", 1.0, answer_type="option"),
        row(1, "CourtSI", "courtsi", "scored", 0.4, answer_type="number"),
        row(2, "CourtSI", "courtsi", "scored", 0.8, answer_type="number"),
        row(3, "CourtSI", "courtsi", "unparsed", 0.0, answer_type="point"),
        row(4, "CourtSI", "courtsi", "scored", 0.0, answer_type="number", metric="MA"),  # a counting question
    ]
    scores = aggregate(rows)
    assert scores.sub_scores["ReasonMap-Short"]["map score"] == pytest.approx((1.25 / 3, 3))
    assert scores.sub_scores["CourtSI"] == {"MA": (0.5, 2), "MRA": (pytest.approx(0.6), 2), "LocA": (0.0, 1)}
    notes = " ".join(table3_notes({"m": scores}))
    assert "ReasonMap-Short map score 0.4167 (n=3)" in notes and "CourtSI MRA 0.6000 (n=2)" in notes
