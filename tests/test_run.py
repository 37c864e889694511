"""Runs end to end on shapes-world with real tiny checkpoints: resume, SIGKILL, errors, refusals."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmctx.data.disk import load_benchmark, save_benchmark
from mmctx.jsonl import read_jsonl
from mmctx.models import load_backend
from mmctx.models.base import Capabilities
from mmctx.run.plan import GenerationLimits
from mmctx.run.runner import STORE, RunError
from mmctx.schema import BenchmarkError
from mmctx.scoring.results import rescore
from mmctx.tasks.fewshot import evaluate

SMALL = dict(settings="0-shot,4-random,4-similar-cot", scorers="generate,ppl", limit=1, show_progress=False)
LIMITS = GenerationLimits(max_new_tokens=6, cot_max_new_tokens=12)


def _comparable(results):
    return [
        (r.request_id, r.outcome, r.pred, r.rule, r.response, tuple(round(x, 4) for x in r.loglikelihoods))
        for r in results
    ]


def _stored_rows(run_dir: Path) -> int:
    try:
        with sqlite3.connect(run_dir / STORE) as db:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.OperationalError:  # polled before the run created its table
        return 0


def test_run_scores_every_request_and_resumes_from_the_store(shapes_bench, tmp_path):
    run = tmp_path / "run"
    first = evaluate(shapes_bench, "builtin:tiny-idefics3", run, limits=LIMITS, **SMALL)
    n_tasks = len(load_benchmark(shapes_bench).tasks)
    # 3 settings, CoT generate-only: 5 requests per query; one query per task with --limit 1.
    assert first.stats.planned == 5 * n_tasks
    assert first.stats.cached == 0 and first.stats.done == first.stats.planned
    assert _stored_rows(run) == first.stats.planned
    assert {r.outcome for r in first.results} <= {"correct", "wrong", "unparsed"}
    ppl = [r for r in first.results if r.scorer == "ppl"]
    assert ppl and all(abs(sum(r.probs) - 1) < 1e-6 and r.rule == "lowest_ppl" for r in ppl)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["model"]["name"] == "builtin:tiny-idefics3"
    assert manifest["config"]["preset"] == "fewmmbench" and manifest["config"]["seed"] == 0
    assert manifest["config"]["limits"] == {"max_new_tokens": 6, "cot_max_new_tokens": 12}
    requests = read_jsonl(run / "requests.jsonl")
    assert all(r["key"] and r["options"] and "demo_ids" in r for r in requests)
    assert any(len(r["demo_ids"]) == 4 for r in requests)

    again = evaluate(shapes_bench, "builtin:tiny-idefics3", run, limits=LIMITS, **SMALL)
    assert again.stats.cached == again.stats.planned and again.stats.done == 0
    assert _comparable(again.results) == _comparable(first.results)
    assert _stored_rows(run) == first.stats.planned


def test_a_different_run_in_the_same_folder_is_refused(shapes_bench, tmp_path):
    run = tmp_path / "run"
    evaluate(
        shapes_bench,
        "builtin:tiny-idefics3",
        run,
        limits=LIMITS,
        settings="0-shot",
        scorers="ppl",
        limit=1,
        show_progress=False,
    )
    with pytest.raises(RunError, match="different run"):
        evaluate(
            shapes_bench,
            "builtin:tiny-idefics3",
            run,
            limits=LIMITS,
            settings="0-shot",
            scorers="ppl",
            limit=1,
            seed=1,
            show_progress=False,
        )


def test_bad_benchmark_fails_before_the_model_is_loaded(shapes_bench, tmp_path):
    bench = load_benchmark(shapes_bench)
    q = bench.queries[0]
    bench.queries[0] = q.model_copy(
        update={"answer": "not a choice", "demo_keys": {**q.demo_keys, "random": ["ghost"]}}
    )
    bad = save_benchmark(bench, tmp_path / "bad")
    loaded = []

    def factory(*args, **kwargs):
        loaded.append(args)
        return load_backend(*args, **kwargs)

    with pytest.raises(BenchmarkError) as err:
        evaluate(bad, "builtin:tiny-idefics3", tmp_path / "run", backend_factory=factory, show_progress=False)
    assert not loaded
    message = str(err.value)
    assert f"queries[{q.id}].answer" in message and "unknown demo key 'ghost'" in message


def test_capability_mismatch_is_refused_before_any_request(shapes_bench, tmp_path):
    def one_image_model(*args, **kwargs):
        backend = load_backend(*args, **kwargs)
        backend.capabilities = Capabilities(1, True, True, True, 4096)
        return backend

    with pytest.raises(RunError, match="at most 1 images"):
        evaluate(shapes_bench, "builtin:tiny-llava", tmp_path / "run", backend_factory=one_image_model, **SMALL)
    assert not (tmp_path / "run" / STORE).exists()


def test_failed_requests_are_errors_not_wrong_answers_and_can_be_retried(shapes_bench, tmp_path):
    def short_window(*args, **kwargs):
        backend = load_backend(*args, **kwargs)
        backend.capabilities = Capabilities(None, True, True, True, 300)
        return backend

    run = tmp_path / "run"
    out = evaluate(shapes_bench, "builtin:tiny-llava", run, limits=LIMITS, backend_factory=short_window, **SMALL)
    errors = [r for r in out.results if r.outcome == "error"]
    assert errors and all(r.error.startswith("context_overflow") for r in errors)
    assert any(r.outcome != "error" for r in out.results)  # zero-shot prompts still fit
    avg = {(c.setting, c.scorer): c for c in out.cells if c.task != "Avg."}
    for c in avg.values():
        group = [r for r in out.results if (r.task, r.setting, r.scorer) == (c.task, c.setting, c.scorer)]
        assert c.errors == sum(r.outcome == "error" for r in group)
        assert c.n == sum(r.outcome != "error" for r in group)
    again = evaluate(shapes_bench, "builtin:tiny-llava", run, limits=LIMITS, retry_errors=True, **SMALL)
    assert again.stats.errors_retried == len(errors)
    assert not any(r.outcome == "error" for r in again.results)


def _run_cli(bench: Path, run: Path) -> list[str]:
    return [
        sys.executable, "-m", "mmctx", "run", str(bench), "--model", "builtin:tiny-idefics3", "--out", str(run),
        "--settings", "0-shot,4-similar,8-random", "--scorers", "generate,ppl", "--limit", "2",
        "--max-new-tokens", "24", "--batch-size", "2", "--no-progress",
    ]  # fmt: skip


# The child: the real `mmctx` command line, instrumented to stop itself (SIGSTOP) when it is
# about to commit a batch while STOP_AFTER responses are already stored, i.e. with a batch in
# flight. The parent kills it only once it is stopped, so the kill lands mid-run on any machine,
# however loaded, instead of after a guessed number of seconds.
STOP_AFTER = 8
_STOPPING_CHILD = f"""
import os, signal, sys
from mmctx.models.store import ResponseStore

commit = ResponseStore.put_many

def stop_with_a_batch_in_flight(self, rows):
    if len(self) >= {STOP_AFTER}:
        os.kill(os.getpid(), signal.SIGSTOP)
    commit(self, rows)

ResponseStore.put_many = stop_with_a_batch_in_flight
from mmctx.cli import main
main()
"""


def _wait_until_stopped(proc: subprocess.Popen, deadline_s: float) -> None:
    """Block until ``proc`` stops itself; fail if it exits first or the (generous) deadline passes."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        pid, status = os.waitpid(proc.pid, os.WUNTRACED | os.WNOHANG)
        if pid:
            assert os.WIFSTOPPED(status), f"the run ended (status {status}) before it stored {STOP_AFTER} responses"
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the run did not store {STOP_AFTER} responses within {deadline_s:.0f}s")


def test_sigkill_then_resume_equals_an_uninterrupted_run(shapes_bench, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    whole = tmp_path / "whole"
    subprocess.run(_run_cli(shapes_bench, whole), check=True, env=env, capture_output=True)
    killed = tmp_path / "killed"
    child = [sys.executable, "-c", _STOPPING_CHILD, *_run_cli(shapes_bench, killed)[3:]]
    proc = subprocess.Popen(child, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_until_stopped(proc, deadline_s=1800)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _stored_rows(killed)
    total = len(read_jsonl(whole / "requests.jsonl"))
    assert STOP_AFTER <= partial < total, "the kill must land mid-run for this test to mean anything"
    subprocess.run(_run_cli(shapes_bench, killed), check=True, env=env, capture_output=True)
    assert _stored_rows(killed) == total  # nothing lost, nothing duplicated
    assert read_jsonl(whole / "results.jsonl") == read_jsonl(killed / "results.jsonl")
    assert rescore(killed)[0] == rescore(whole)[0]


def test_a_request_that_raises_is_stored_as_an_error_and_the_run_goes_on(shapes_bench, tmp_path):
    bench = load_benchmark(shapes_bench)
    target = bench.queries[0]
    bench.queries[0] = target.model_copy(update={"question": target.question + " BOOM"})
    bad = save_benchmark(bench, tmp_path / "bench")

    def exploding_template(*args, **kwargs):
        backend = load_backend(*args, **kwargs)
        backend.processor.chat_template = (
            "{% for m in messages %}{% for p in m['content'] %}{% if p['type'] == 'text' and 'BOOM' in p['text'] %}"
            "{{ raise_exception('template refuses this prompt') }}{% endif %}{% endfor %}{% endfor %}"
            + backend.processor.chat_template
        )
        return backend

    out = evaluate(bad, "builtin:tiny-idefics3", tmp_path / "run", limits=LIMITS, backend_factory=exploding_template,
                   settings="0-shot", scorers="generate,ppl", limit=1, show_progress=False)  # fmt: skip
    failed = [r for r in out.results if r.query_id == target.id]
    assert failed and all(r.outcome == "error" and "template refuses this prompt" in r.error for r in failed)
    others = [r for r in out.results if r.query_id != target.id]
    assert others and all(r.outcome != "error" for r in others)
    assert _stored_rows(tmp_path / "run") == len(out.results)  # nothing lost


def test_shards_merged_equal_a_single_process_run(shapes_bench, tmp_path):
    from mmctx.run.runner import merge_runs

    common = dict(limits=LIMITS, settings="0-shot,4-random", scorers="generate,ppl", limit=2, show_progress=False)
    whole = evaluate(shapes_bench, "builtin:tiny-idefics3", tmp_path / "whole", **common)
    parts = [
        evaluate(shapes_bench, "builtin:tiny-idefics3", tmp_path / f"s{i}", shard=f"{i}/3", **common) for i in range(3)
    ]
    sizes = [p.stats.planned for p in parts]
    assert sum(sizes) == whole.stats.planned and all(sizes)  # a partition: every request in exactly one shard
    assert not set.intersection(*({r.query_id for r in p.results} for p in parts))
    n = merge_runs([tmp_path / f"s{i}" for i in (2, 0, 1)], tmp_path / "merged")
    assert n == whole.stats.planned
    merged, _ = rescore(tmp_path / "merged")
    assert _comparable(merged) == _comparable(whole.results)
    # A shard of another run is refused.
    evaluate(shapes_bench, "builtin:tiny-idefics3", tmp_path / "other", shard="0/3", seed=5, **common)
    with pytest.raises(RunError, match="different run"):
        merge_runs([tmp_path / "s1", tmp_path / "other"], tmp_path / "bad")
    with pytest.raises(RunError, match="distinct parts"):
        merge_runs([tmp_path / "s1", tmp_path / "s1"], tmp_path / "bad2")
    with pytest.raises(RunError, match=r"shards \['2/3'\] are missing"):
        merge_runs([tmp_path / "s0", tmp_path / "s1"], tmp_path / "partial")
    with pytest.raises(RunError, match="already holds a run"):
        merge_runs([tmp_path / f"s{i}" for i in range(3)], tmp_path / "merged")


def test_a_run_whose_every_request_failed_exits_non_zero_and_keeps_the_errors(shapes_bench, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from mmctx.cli import app
    from tests.fixtures.chat_server import ChatServer, Fault

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = ChatServer(rule=lambda body, attempt: Fault("400"))
    run = tmp_path / "run"
    args = ["run", str(shapes_bench), "--out", str(run), "--settings", "0-shot", "--scorers", "generate",
            "--limit", "1", "--no-progress"]  # fmt: skip
    with server:
        result = CliRunner().invoke(app, [*args, "--model", f"openai:mock-vlm@{server.base_url}"])
    assert result.exit_code == 1 and "every request failed" in result.output, result.output
    outcomes = {r["outcome"] for r in read_jsonl(run / "results.jsonl")}
    assert outcomes == {"error"}  # stored and scored: --retry-errors asks them again
