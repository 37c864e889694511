"""`mmctx study`: one command, a report with a table for every analysis beyond the papers."""

from __future__ import annotations

import csv
import json
import re

import pytest
from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.curate.annotation.export import EXPORT_FILE, load_export
from mmctx.jsonl import read_jsonl
from mmctx.reporting.annotation_forms import CSV_COLUMNS
from mmctx.study import run_study


@pytest.fixture(scope="module")
def study(shapes_bench, tmp_path_factory):
    # The study only reads its benchmark: runs, forms and report go to ``out``.
    out = tmp_path_factory.mktemp("study") / "study"
    return shapes_bench, out, run_study(out, benchmark=shapes_bench, limit=1, annotators=2, sample=2, blind_orders=2)


SECTIONS = (
    "## Shortcut checks",  # §1
    "## CoT failure tags",  # §2
    "## Human validation of demonstrations",  # §3
    "## Paired comparisons",  # §4: strategies and calibration
    "## Demo-order sensitivity",  # §4: orders
    "## Table 1 columns (ppl-calibrated",
)


def test_one_call_writes_a_report_with_every_section(study):
    _, out, outcome = study
    text = outcome.report.read_text()
    for section in SECTIONS:
        assert section in text, section
    for question in ("4-shot mmr vs similar", "4-shot balanced vs similar", "4-shot different-answer vs similar",
                     "4-shot image-similar vs similar", "4-shot text-similar vs similar",
                     "4-shot similar: nearest last vs first", "64-shot similar vs 0-shot", "4-similar: calibrated vs raw ppl"):  # fmt: skip
        assert question in text, question
    assert "Ratings not imported yet" in text and (out / "annotation" / EXPORT_FILE).is_file()
    assert (out / "report" / "shots_similar.png").stat().st_size > 0  # accuracy against 0 to 64 similar demos
    # Every prompt was fitted to shapes-vlm's window (4096) less the CoT limit (128).
    requests = read_jsonl(out / "run" / "requests.jsonl")
    assert {r["max_prompt_tokens"] for r in requests} == {4096 - 128}
    assert all(r["prompt_tokens_counted"] <= 4096 - 128 for r in requests)
    assert all(r["demos_dropped"] == [] for r in requests if not r["setting"].startswith(("32-", "64-")))


def _fill(path, reasoning: str) -> None:
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["answer_correctness"], row["reasoning_quality"] = "true", reasoning
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def test_imported_ratings_join_the_report_and_a_second_call_asks_nothing(study):
    bench, out, _ = study
    annotation = out / "annotation"
    export = load_export(annotation / EXPORT_FILE)
    forms = (annotation / export.annotators[0].html).read_bytes()
    for form, rating in zip(export.annotators, ("4", "5")):
        _fill(annotation / form.csv, rating)
    r = CliRunner().invoke(app, ["annotate", "import", str(annotation)])
    assert r.exit_code == 0, r.output
    args = ["study", "--out", str(out), "--benchmark", str(bench), "--limit", "1", "--annotators", "2",
            "--sample", "2", "--blind-orders", "2"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    planned, stored, shared, new = re.search(r"(\d+) requests \((\d+) already stored, (\d+) sharing another's call, (\d+) new", r.output).groups()  # fmt: skip
    assert (int(stored), int(shared), int(new)) == (int(planned), 0, 0)  # everything was stored by the first call
    text = (out / "report" / "report.md").read_text()
    assert "Fleiss' κ" in text and "| reasoning_quality | ordinal | 4.50" in text
    assert (annotation / export.annotators[0].html).read_bytes() == forms  # the forms were kept


def test_a_damaged_validation_file_is_an_error_naming_it(study, tmp_path):
    from mmctx.reporting.annotation_section import annotation_markdown

    _, out, _ = study
    folder = tmp_path / "annotation"
    folder.mkdir()
    (folder / EXPORT_FILE).write_bytes((out / "annotation" / EXPORT_FILE).read_bytes())
    assert "Ratings not imported yet" in annotation_markdown(folder)
    for damaged in ("not json", '{"annotators": []}', '{"annotators": [], "demos": 2, "criteria": []}'):
        (folder / "validation.json").write_text(damaged)
        with pytest.raises(
            ValueError, match=r"validation\.json: not the validation\.json `mmctx annotate import` writes"
        ):
            annotation_markdown(folder)


def test_an_api_model_runs_the_study_without_a_budget_and_with_the_scorers_it_has(shapes_bench, tmp_path, monkeypatch):
    from tests.fixtures.chat_server import ChatServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ChatServer() as server:
        outcome = run_study(tmp_path / "study", f"openai:mock-vlm@{server.base_url}", benchmark=shapes_bench, limit=1,
                            scorers=("generate",), annotators=2, sample=1)  # fmt: skip
    manifest = json.loads((outcome.run / "manifest.json").read_text())
    assert manifest["config"]["max_prompt_tokens"] is None and manifest["config"]["scorers"] == ["generate"]
    assert outcome.result.stats.errors == 0 and "## Shortcut checks" in outcome.report.read_text()


def test_the_report_is_the_same_whatever_the_hash_seed(study, tmp_path):
    import os
    import subprocess
    import sys

    _, out, _ = study
    texts = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        folder = tmp_path / f"report-{seed}"
        command = [sys.executable, "-m", "mmctx", "report", str(out / "run"), "--out", str(folder), "--no-latex",
                   "--no-figures"]  # fmt: skip
        subprocess.run(command, env=env, check=True, capture_output=True)
        texts.append([(folder / name).read_text() for name in ("report.md", "metrics.csv", "uncertainty.csv")])
    assert texts[0] == texts[1]  # settings that tie on shots and strategy (blind, blank, orders) keep one order


def test_a_benchmark_built_for_8_shots_runs_the_rest_and_says_what_it_could_not(tmp_path):
    from mmctx.data.shapes import build_benchmark

    bench = tmp_path / "bench"
    build_benchmark(bench, queries_per_task=1, demos_per_query=8, seed=0)
    outcome = run_study(tmp_path / "study", benchmark=bench, limit=1, annotators=2, sample=1, blind_orders=1)
    assert {"16-similar", "32-similar", "64-similar"} <= set(outcome.skipped)
    assert "needs 16 demos, has 8" in outcome.skipped["16-similar"]
    assert "4-similar" not in outcome.skipped and "8-similar-cot" not in outcome.skipped
    ran = json.loads((outcome.run / "manifest.json").read_text())["config"]["settings"]
    assert "8-similar" in ran and not set(outcome.skipped) & set(ran)
    assert "## Study settings not run" in outcome.report.read_text()
