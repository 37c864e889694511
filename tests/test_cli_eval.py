"""`mmctx eval`: one command over `mmctx.api.evaluate` for every kind of task, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mmctx.cli import app

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "colour_quiz"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_eval_a_benchmark_folder_prints_the_tables_and_records_the_flags(shapes_bench, tmp_path):
    run = tmp_path / "run"
    r = invoke("eval", shapes_bench, "--out", run, "--grid", "0-shot,4-similar", "--scorers", "ppl", "--limit", 1,
               "--batch-size", 4, "--no-progress")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "| builtin:shapes-vlm |" in r.output and "already stored" in r.output
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["settings"] == ["0-shot", "4-similar"] and manifest["config"]["scorers"] == ["ppl"]
    again = invoke("eval", shapes_bench, "--out", run, "--grid", "0-shot,4-similar", "--scorers", "ppl", "--limit", 1,
                   "--batch-size", 4, "--no-progress")  # fmt: skip
    assert again.exit_code == 0 and " 0 new " in again.output
    wrong_kind = invoke("clbench", "report", run)
    assert wrong_kind.exit_code == 2 and "not context-learning runs" in wrong_kind.output


def test_eval_a_jsonl_with_task_options_uses_its_demos_and_wording(tmp_path):
    run = tmp_path / "run"
    r = invoke("eval", EXAMPLE / "items.jsonl", "--out", run, "--grid", "2-random", "--scorers", "generate",
               "--task-option", f"demos={EXAMPLE / 'demos.jsonl'}", "--task-option", "instruction=Say the colour.",
               "--no-progress")  # fmt: skip
    assert r.exit_code == 0, r.output
    requests = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert len(requests) == 8 and all(len(q["demo_ids"]) == 2 for q in requests)
    assert "Say the colour." in (run / "requests.jsonl").read_text()


def test_eval_a_context_task_and_its_refusals(tmp_path):
    r = invoke("eval", "clbench-v-toy", "--out", tmp_path / "ctx", "--tasks", "ZeroBench", "--max-new-tokens", 8,
               "--no-progress")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "outcomes:" in r.output and "ZeroBench" in r.output
    refused = invoke("eval", "clbench-v-toy", "--out", tmp_path / "other", "--grid", "0-shot")
    assert refused.exit_code == 2 and "context-learning task" in refused.output
    assert not (tmp_path / "other").exists()  # refused before anything is written
    cot = invoke("eval", "clbench-v-toy", "--out", tmp_path / "other", "--cot-max-new-tokens", 64)
    assert cot.exit_code == 2 and "--cot-max-new-tokens is for few-shot tasks" in cot.output


def test_eval_names_what_it_cannot_use(tmp_path):
    unknown = invoke("eval", "no-such-task", "--out", tmp_path / "run")
    assert unknown.exit_code == 2 and "shapes-world" in unknown.output and "Traceback" not in unknown.output
    bad_pair = invoke("eval", "shapes-world", "--task-option", "seed")
    assert bad_pair.exit_code == 2 and "KEY=VALUE" in bad_pair.output
    bad_option = invoke("eval", "shapes-world", "--task-option", "colour=red", "--out", tmp_path / "run")
    assert bad_option.exit_code == 2 and "colour" in bad_option.output
    bad_flag = invoke("eval", "shapes-world", "--out", tmp_path / "run", "--base-url", "http://127.0.0.1:9")
    assert bad_flag.exit_code == 2 and "base_url" in bad_flag.output
    assert not (tmp_path / "run").exists()
