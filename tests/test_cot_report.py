"""CoT failure tags counted per task × setting: the counts, the Markdown table, the CSV, the report folder."""

from __future__ import annotations

import csv
from dataclasses import asdict
from pathlib import Path

from mmctx.analysis.cot_failures import ALL_TASKS, cot_tag_counts
from mmctx.reporting.cot_tables import cot_tags_markdown, cot_tags_rows
from mmctx.reporting.folder import write_report_results
from mmctx.scoring.results import SampleResult
from tests.test_cot_tags import BUILTIN_TAGS


def _result(qid: str, setting: str, task: str, tags: tuple[str, ...] | None) -> SampleResult:
    return SampleResult(
        request_id=f"{setting}/{qid}", query_id=qid, task=task, source="hand", setting=setting, scorer="generate",
        gold=0, pred=0, outcome="correct", cot_tags=tags,
    )  # fmt: skip


HAND_RESULTS = [
    _result("q1", "4-similar-cot", "counting", ("no_reasoning",)),
    _result("q2", "4-similar-cot", "counting", ("repetition_loop", "truncated")),
    _result("q3", "4-similar-cot", "counting", ()),
    _result("q4", "4-similar-cot", "plurality", ("truncated",)),
    _result("q1", "8-similar-cot", "counting", ()),
    _result("q5", "4-similar-cot", "counting", None),  # an error: no response, no tags
    _result("q1", "4-similar", "counting", None),  # not CoT
]


def test_counts_per_task_and_setting() -> None:
    rows = {(r.task, r.setting): r for r in cot_tag_counts(HAND_RESULTS)}
    assert list(rows) == [
        ("plurality", "4-similar-cot"),
        ("counting", "4-similar-cot"),
        (ALL_TASKS, "4-similar-cot"),
        ("counting", "8-similar-cot"),
        (ALL_TASKS, "8-similar-cot"),
    ]  # fmt: skip  (FewMMBench's task order: plurality before counting)
    counting = rows[("counting", "4-similar-cot")]
    assert (counting.responses, counting.no_tag) == (3, 1)
    assert counting.tags == dict.fromkeys(BUILTIN_TAGS, 0) | {"no_reasoning": 1, "repetition_loop": 1, "truncated": 1}
    total = rows[(ALL_TASKS, "4-similar-cot")]
    assert (total.responses, total.no_tag, total.tags["truncated"]) == (4, 1, 2)
    assert rows[("counting", "8-similar-cot")].no_tag == 1
    assert cot_tag_counts([r for r in HAND_RESULTS if r.cot_tags is None]) == []


def test_counts_keep_tags_no_longer_registered() -> None:
    rows = cot_tag_counts([_result("q1", "4-similar-cot", "counting", ("plugin_tag", "truncated"))])
    assert list(rows[0].tags)[-1] == "plugin_tag" and rows[0].tags["plugin_tag"] == 1


def test_markdown_and_csv_rows() -> None:
    runs = [("model|a", cot_tag_counts(HAND_RESULTS))]
    text = cot_tags_markdown(runs)
    head = text.splitlines()[0]
    assert head.startswith("| Model | Task | Setting | CoT responses | no tag | empty_response |")
    assert "| model\\|a | counting | 4-similar-cot | 3 | 1 (33%) | 0 (0%) | 1 (33%) |" in text
    assert "- repetition_loop: at least 40% of its word 4-grams repeat an earlier one" in text
    rows = cot_tags_rows(runs)
    assert rows[1] == {"model": "model|a", "task": "counting", "setting": "4-similar-cot", "responses": 3,
                       "no_tag": 1} | dict.fromkeys(BUILTIN_TAGS, 0) | {"no_reasoning": 1, "repetition_loop": 1,
                                                                           "truncated": 1}  # fmt: skip
    assert cot_tags_markdown([("m", [])]) == "" and cot_tags_rows([("m", [])]) == []


def test_report_folder_has_the_table_and_csv(tmp_path: Path) -> None:
    paths = write_report_results([("a", HAND_RESULTS), ("b", HAND_RESULTS[:1])], tmp_path, latex=False, figures=False)
    assert tmp_path / "cot_tags.csv" in paths
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "## CoT failure tags" in report
    assert "| a | All tasks | 4-similar-cot | 4 | 1 (25%) |" in report
    assert "| b | counting | 4-similar-cot | 1 | 0 (0%) | 0 (0%) | 1 (100%) |" in report
    with open(tmp_path / "cot_tags.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 + 2 and {r["model"] for r in rows} == {"a", "b"}
    assert rows[0].keys() == {"model", "task", "setting", "responses", "no_tag", *BUILTIN_TAGS}

    # no CoT responses: no section, no CSV
    plain = [r for r in HAND_RESULTS if r.setting == "4-similar"]
    paths = write_report_results([("a", plain)], tmp_path / "plain", latex=False, figures=False)
    assert not any(p.name == "cot_tags.csv" for p in paths)
    assert "CoT failure tags" not in (tmp_path / "plain" / "report.md").read_text(encoding="utf-8")


def test_asdict_round_trip_keeps_tags() -> None:
    r = HAND_RESULTS[1]
    assert SampleResult(**(asdict(r) | {"cot_tags": tuple(asdict(r)["cot_tags"])})) == r
