"""U+2028, U+2029 and U+0085 inside a question and inside a model's reply survive every command.

``json.dumps(..., ensure_ascii=False)`` writes these characters raw, and ``str.splitlines``
breaks at them; every run file is read with `mmctx.jsonl` (split on ``\\n`` only), so a record
holding them is one record. Both pipelines run against the real local chat server, end to end
through the command line: ``clbench run/score/report`` and ``mmctx run/merge/report``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai")

from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.data.clbench.loader import load_clbench, write_clbench
from mmctx.data.clbench.toy import write_toy_suite
from mmctx.data.disk import load_benchmark, save_benchmark
from mmctx.jsonl import read_jsonl
from tests.fixtures.chat_server import ChatServer, prompt_text

SEPARATORS = "\u2028\u2029\u0085"
runner = CliRunner()


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _raw_lines(path: Path) -> int:
    """Records as a reader that splits on ``\\n`` only counts them (never ``splitlines``)."""
    return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())


def test_context_run_score_and_reports_keep_separator_characters_inside_records(tmp_path):
    suite = tmp_path / "suite"
    bench = write_toy_suite(suite)
    kept = [q for q in bench.queries if q.task == "Insight-O3"]
    odd = [
        q.model_copy(update={"question": q.question.replace("?", f"?{SEPARATORS} Look{SEPARATORS}closely.", 1)})
        for q in kept
    ]
    write_clbench(odd, suite)
    assert all(SEPARATORS in q.question for q in load_clbench(suite).queries)

    def answer(body: dict) -> str:
        text = prompt_text(body)
        letter = "A" if "kite" in text else "D"
        return f"Looked{SEPARATORS}closely.{SEPARATORS}\nAnswer: {letter}"

    run = tmp_path / "run"
    with ChatServer(answer=answer) as server:
        model = f"openai:mock-vlm@{server.base_url}"
        _ok("clbench", "run", str(suite), "--model", model, "--out", str(run), "--no-progress",
            "--max-new-tokens", "64")  # fmt: skip
    requests = read_jsonl(run / "requests.jsonl")
    assert len(requests) == _raw_lines(run / "requests.jsonl") == 2
    assert all(SEPARATORS in r["prompt_text"] for r in requests)
    rows = read_jsonl(run / "results.jsonl")
    assert len(rows) == 2 and all(SEPARATORS in r["response"] for r in rows)
    assert [(r["outcome"], r["score"]) for r in rows] == [("scored", 1.0), ("scored", 1.0)]

    _ok("clbench", "score", str(run))
    assert read_jsonl(run / "results.jsonl") == rows
    for output in (_ok("clbench", "report", str(run)), _ok("report", str(run))):
        assert "Insight-O3" in output and "1.0000" in output


def test_fewshot_run_merge_and_report_keep_separator_characters_inside_records(shapes_bench, tmp_path):
    bench = load_benchmark(shapes_bench)
    bench.queries = [
        q.model_copy(update={"question": f"{q.question}{SEPARATORS}Think{SEPARATORS}twice."}) for q in bench.queries
    ]
    odd = save_benchmark(bench, tmp_path / "bench")

    def answer(body: dict) -> str:
        return f"Thinking{SEPARATORS}done.{SEPARATORS}\nAnswer: A"

    common = ["--settings", "0-shot,4-random", "--scorers", "generate", "--limit", "1", "--no-progress"]
    with ChatServer(answer=answer) as server:
        model = ["--model", f"openai:mock-vlm@{server.base_url}"]
        _ok("run", str(odd), *model, "--out", str(tmp_path / "whole"), *common)
        for i in range(2):
            _ok("run", str(odd), *model, "--out", str(tmp_path / f"s{i}"), "--shard", f"{i}/2", *common)
    merged = tmp_path / "merged"
    _ok("merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(merged))

    whole = tmp_path / "whole"
    requests = read_jsonl(whole / "requests.jsonl")
    assert len(requests) == _raw_lines(whole / "requests.jsonl") > 0
    assert any(SEPARATORS in json.dumps(r["prompt"], ensure_ascii=False) for r in requests)
    assert read_jsonl(merged / "requests.jsonl") == requests
    rows = read_jsonl(whole / "results.jsonl")
    assert len(rows) == len(requests) and all(SEPARATORS in r["response"] for r in rows)
    assert read_jsonl(merged / "results.jsonl") == rows
    report = _ok("report", str(whole), str(merged))
    assert "mock-vlm" in report


def test_reference_findings_keep_separator_characters_inside_an_item():
    from mmctx.data.clbench.construct import parse_findings

    reply = f"1. Response rises{SEPARATORS}with dose.\r\n2. Drug X is well tolerated.\n"
    assert parse_findings(reply) == [f"Response rises{SEPARATORS}with dose.", "Drug X is well tolerated."]
