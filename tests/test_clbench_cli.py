"""`mmctx clbench …` from the command line: toy suite → run (model + judge over local HTTP) →
report, judge comparison, complexity, failure taxonomy; validation and construction commands."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("openai")

from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.data.clbench.loader import load_clbench
from tests.fixtures.chat_server import ChatServer, prompt_text
from tests.fixtures.clbench import scripted_judge, scripted_model

runner = CliRunner()


def _ok(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy")
    _ok("clbench", "toy", "--out", str(out))
    return out


@pytest.fixture(scope="module")
def scored_run(toy, tmp_path_factory):
    run = tmp_path_factory.mktemp("run") / "run"
    bench = load_clbench(toy)
    with (
        ChatServer(answer=scripted_model(bench.queries, "wrong_reply")) as model,
        ChatServer(answer=scripted_judge(bench.queries)) as judge,
    ):
        result = _ok(
            "clbench",
            "run",
            str(toy),
            "--model",
            f"openai:mock-vlm@{model.base_url}",
            "--out",
            str(run),
            "--judge",
            f"openai:judge-a@{judge.base_url}",
            "--no-progress",
            "--max-new-tokens",
            "64",
        )
        yield run, result.output, judge.base_url, bench


def test_suite_lists_the_fourteen_subsets():
    out = runner.invoke(app, ["clbench", "suite"], env={"COLUMNS": "200"}).output
    for name in ("ReasonMap-Short", "CourtSI", "MIRBench", "PRISMM-Bench", "CL-Bench-Table", "Paper Conclusion"):
        assert name in out
    assert "L0–L1" in out and "L1–L2" in out


def test_validate_passes_the_toy_suite_and_names_a_bad_record(toy, tmp_path):
    assert "28 items" in _ok("clbench", "validate", str(toy)).output
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "samples.jsonl").write_text(
        json.dumps({"id": "x1", "subset": "CL-Bench-Table", "question": "q", "gold": [], "answer": "a"}) + "\n"
    )
    result = runner.invoke(app, ["clbench", "validate", str(bad)])
    assert result.exit_code == 1 and "queries[x1].gold" in result.output


def test_run_prints_tables_two_and_three(scored_run):
    run, output, _, _ = scored_run
    assert "| Model | L0 | L1 | L2 | Overall |" in output.replace("**", "")
    assert "ReasonMap-Short" in output and "mock-vlm" in output
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 28 and {r["outcome"] for r in rows} == {"scored"}
    assert json.loads((run / "manifest.json").read_text())["judge"]["name"] == "judge-a"


def test_report_writes_tables_and_heatmap(scored_run, tmp_path):
    run, _, _, _ = scored_run
    _ok("clbench", "report", str(run), "--out", str(tmp_path))
    for name in ("table2.md", "table2.csv", "table2.tex", "table3.md", "table3.tex", "capability_heatmap.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "\\toprule" in (tmp_path / "table2.tex").read_text()


def test_judges_compares_two_judges_and_reports_agreement(scored_run, tmp_path):
    run, _, judge_url, bench = scored_run
    strict = scripted_judge(bench.queries)

    def generous(body: dict) -> str:
        return "True" if "Gold answer:" in prompt_text(body) else strict(body)

    with ChatServer(answer=generous) as other:
        out = _ok(
            "clbench",
            "judges",
            str(run),
            "--judge",
            f"openai:judge-a@{judge_url}",
            "--judge",
            f"openai:judge-b@{other.base_url}",
            "--out",
            str(tmp_path),
        ).output
    assert "judge-a" in out and "judge-b" in out and "Cohen's κ" in out and "Krippendorff" in out
    data = json.loads((tmp_path / "judges.json").read_text())
    assert data["macro"]["judge-b"] > data["macro"]["judge-a"]  # the generous judge accepts every wrong answer
    assert (tmp_path / "judge-a" / "results.jsonl").exists()


def test_complexity_and_failures_from_the_cli(scored_run, tmp_path):
    run, _, _, _ = scored_run
    out = _ok("clbench", "complexity", str(run), "--exclude", "Financial Report ROE", "--out", str(tmp_path)).output
    assert "Tokenizer: whitespace" in out and "Financial Report ROE" in out
    assert (tmp_path / "complexity.json").exists()
    template = tmp_path / "tags.csv"
    _ok("clbench", "failures", str(run), "--template", str(template))
    with open(template, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 28
    rows[0]["tag"] = "format_failure"
    rows[1]["tag"] = "evidence missing"
    with open(template, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = _ok("clbench", "failures", str(run), "--tags", str(template)).output
    assert "| format failure | 1 | 1 |" in out and "| evidence missing | 1 | 1 |" in out


def test_paper_and_roe_items_are_built_from_pdfs_into_a_suite(tmp_path):
    pytest.importorskip("pymupdf")
    from tests.test_construct import write_paper, write_report

    suite = tmp_path / "suite"
    findings = tmp_path / "findings.txt"
    findings.write_text("Response rises with dose\nThe drug is well tolerated\n")
    _ok("clbench", "paper", str(write_paper(tmp_path / "paper.pdf")), "--out", str(suite), "--findings", str(findings))
    _ok(
        "clbench",
        "roe",
        str(write_report(tmp_path / "report.pdf")),
        "--out",
        str(suite),
        "--net-profit",
        "60",
        "--revenue",
        "800",
        "--total-assets",
        "1200",
        "--equity",
        "480",
    )
    bench = load_clbench(suite)
    by_task = {q.task: q for q in bench.queries}
    assert set(by_task) == {"Paper Conclusion", "Financial Report ROE"}
    assert by_task["Paper Conclusion"].gold == ["Response rises with dose", "The drug is well tolerated"]
    assert by_task["Financial Report ROE"].gold["value"] == pytest.approx(12.5)
    assert "1 problem" not in _ok("clbench", "validate", str(suite)).output


def test_the_main_report_command_gives_tables_two_and_three_for_context_runs(scored_run, shapes_bench, tmp_path):
    run, _, _, _ = scored_run
    out = _ok("report", str(run)).output
    assert "| Model | L0 | L1 | L2 | Overall |" in out.replace("**", "")
    fewshot = tmp_path / "fewshot"
    fewshot.mkdir()
    (fewshot / "manifest.json").write_text(json.dumps({"model": {"name": "m"}, "config": {}}))
    mixed = runner.invoke(app, ["report", str(run), str(fewshot)])
    assert mixed.exit_code == 2 and "mix few-shot and context-learning" in mixed.output


def test_failures_proposed_by_a_judge_model_are_counted_per_level(scored_run):
    run, _, _, _ = scored_run

    def tagger(body: dict) -> str:
        text = prompt_text(body)
        if text.startswith("Reply with OK"):
            return "OK"
        return json.dumps({"tag": "prior_override" if "Paper Conclusion" in text else "context_misuse", "why": "x"})

    with ChatServer(answer=tagger) as server:
        out = _ok("clbench", "failures", str(run), "--judge", f"openai:tagger@{server.base_url}").output
    assert "proposed by tagger" in out
    assert "| context misuse | " in out and "| prior override | 0 | 0 | 2 | 2 |" in out


def test_a_judge_that_never_parses_is_reported_not_counted_as_agreeing(scored_run, tmp_path):
    run, _, judge_url, _ = scored_run

    def broken(body: dict) -> str:
        return "OK" if prompt_text(body).startswith("Reply with OK") else "maybe"

    with ChatServer(answer=broken) as other:
        _ok(
            "clbench",
            "judges",
            str(run),
            "--judge",
            f"openai:judge-a@{judge_url}",
            "--judge",
            f"openai:judge-c@{other.base_url}",
            "--out",
            str(tmp_path),
        )
    data = json.loads((tmp_path / "judges.json").read_text())
    assert data["decided_by_call"]["judge-c"] == 0 and data["judge_errors"]["judge-c"] > 0
    assert data["shared"] == 0  # nothing both judges decided: no agreement claimed
    duplicate = runner.invoke(
        app,
        [
            "clbench",
            "judges",
            str(run),
            "--judge",
            f"openai:judge-a@{judge_url}",
            "--judge",
            f"openai:judge-a@{judge_url}",
            "--out",
            str(tmp_path / "dup"),
        ],
    )
    assert duplicate.exit_code == 2 and "distinct names" in duplicate.output
