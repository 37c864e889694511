"""A run against a backend that declares ``max_concurrency`` keeps that many requests in flight,
not one batch, and stays resumable; a local backend still gets one batch at a time.

Real components: the run code path (`mmctx.tasks.fewshot.evaluate`, the `mmctx run` command in
a child process, `run_context`), the OpenAI-compatible backend and the chat server on 127.0.0.1.
"""

from __future__ import annotations

import itertools
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from mmctx.data.clbench.toy import write_toy_suite
from mmctx.models.base import declared_concurrency
from mmctx.models.openai import OpenAIBackend
from mmctx.models.retry import RetryPolicy
from mmctx.run.context import ContextConfig
from mmctx.run.runner import STORE, pipelined
from mmctx.tasks.context import run_context
from mmctx.tasks.fewshot import evaluate
from tests.fixtures.chat_server import MAX_DELAY, MODEL, ChatServer, Fault, prompt_text
from tests.fixtures.clbench import scripted_model

FAST = RetryPolicy(max_attempts=2, timeout=20.0, base_delay=0.01, max_delay=0.05)
ZERO_SHOT = dict(settings="0-shot", scorers="generate", show_progress=False)


def _evaluate(bench: Path, server: ChatServer, run: Path, batch_size: int, max_concurrency: int):
    def factory(spec: str, **kw):
        return OpenAIBackend.from_spec(spec, base_url=server.base_url, retry=FAST, **kw)

    return evaluate(
        bench, f"openai:{MODEL}", run, batch_size=batch_size, backend_options={"max_concurrency": max_concurrency},
        backend_factory=factory, **ZERO_SHOT,
    )  # fmt: skip


def _rows(run: Path) -> list[tuple]:
    with sqlite3.connect(run / STORE) as db:
        return db.execute("SELECT key, request_id, kind, payload, error FROM responses ORDER BY key").fetchall()


def test_an_api_run_keeps_max_concurrency_in_flight_and_stores_what_a_sequential_run_does(shapes_bench, tmp_path):
    with ChatServer(latency=0.2) as server:
        piped = _evaluate(shapes_bench, server, tmp_path / "piped", batch_size=2, max_concurrency=6)
        # One batch at a time would never pass 2; the backend's limit is never passed.
        assert server.max_in_flight == 6
        server.reset()
        server.latency = 0.0
        sequential = _evaluate(shapes_bench, server, tmp_path / "sequential", batch_size=2, max_concurrency=1)
        assert server.max_in_flight == 1
    assert piped.stats.done == sequential.stats.done == piped.stats.planned > 6
    assert _rows(tmp_path / "piped") == _rows(tmp_path / "sequential")  # each answer under its own key
    assert (tmp_path / "piped" / "results.jsonl").read_text() == (tmp_path / "sequential" / "results.jsonl").read_text()


def test_a_context_run_keeps_max_concurrency_in_flight(tmp_path):
    toy = write_toy_suite(tmp_path / "toy")
    config = ContextConfig(
        suite=str(toy.root), suite_name=toy.name, suite_sha256=toy.fingerprint(), batch_size=2,
        subsets=["ReasonMap-Short", "ReasonMap-Long", "ReasonMap-Plus", "Insight-O3", "ZeroBench", "CourtSI", "MIRBench"],
    )  # fmt: skip
    with ChatServer(latency=0.2, answer=scripted_model(toy.queries)) as server:
        backend = OpenAIBackend(MODEL, base_url=server.base_url, retry=FAST, max_concurrency=5)
        stats = run_context(toy, backend, tmp_path / "run", config, show_progress=False)
        assert server.max_in_flight == 5
        assert len(server.chat_records()) == stats.done == len(_rows(tmp_path / "run")) > 5
    assert stats.errors == 0


# The real command line, with Ctrl-C's ordinary handler even where the test runner ignores SIGINT.
_CHILD = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
from mmctx.cli import main
main()
"""


def _count(store: Path) -> int:
    try:
        with sqlite3.connect(store) as db:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def _settle(server: ChatServer, quiet_s: float = 0.3) -> None:
    """Wait until the server has read all an ended process sent: no new request for ``quiet_s``."""
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < quiet_s:
        if len(server.records) != seen:
            seen, quiet_since = len(server.records), time.monotonic()
        time.sleep(0.02)


def test_ctrl_c_leaves_requests_in_flight_keeps_commits_and_the_resume_asks_only_the_rest(shapes_bench, tmp_path):
    run = tmp_path / "run"
    arrivals = itertools.count(1)
    with ChatServer(latency=0.05) as server:
        # The fourth request is held as long as the server holds anything: still unanswered at Ctrl-C.
        server.rule = lambda body, attempt: Fault("slow", delay=MAX_DELAY) if next(arrivals) == 4 else None
        args = [
            "run", str(shapes_bench), "--model", f"openai:{MODEL}@{server.base_url}", "--out", str(run),
            "--settings", "0-shot", "--scorers", "generate", "--batch-size", "1", "--max-concurrency", "4",
            "--no-progress",
        ]  # fmt: skip
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 120
        while _count(run / STORE) < 6 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=60)
        # Ended by Ctrl-C, without waiting for the held request, which the server has not answered.
        assert child.returncode not in (0, None), out
        assert server.in_flight >= 1, out
        _settle(server)
        stored = _count(run / STORE)
        asked_first = len(server.chat_records())
        assert 6 <= stored < asked_first, out

        server.reset()
        resumed = _evaluate(shapes_bench, server, run, batch_size=1, max_concurrency=4)
        asked = [prompt_text(r.body) for r in server.chat_records() if "_unparsed" not in r.body]
    assert (resumed.stats.cached, resumed.stats.done, resumed.stats.errors) == (stored, len(asked), 0)
    assert len(set(asked)) == len(asked) == resumed.stats.planned - stored  # nothing stored asked again
    assert len(_rows(run)) == resumed.stats.planned


# ---- the pipeline itself -------------------------------------------------------------------------


def test_without_a_declared_concurrency_batches_run_one_at_a_time_on_the_callers_thread():
    threads = []

    def run(batch: list[int]) -> int:
        threads.append(threading.current_thread())
        return sum(batch)

    assert list(pipelined([[1, 2], [3]], run, None)) == [([1, 2], 3), ([3], 3)]
    assert threads == [threading.main_thread()] * 2
    assert declared_concurrency(object()) is None and declared_concurrency(_declaring(0)) is None
    assert declared_concurrency(_declaring(4)) == 4


def _declaring(max_concurrency: object) -> object:
    return type("Declaring", (), {"max_concurrency": max_concurrency})()


def test_batches_fill_the_capacity_with_one_waiting_and_each_comes_back_once():
    running, most, lock = 0, 0, threading.Lock()
    first_wave = threading.Barrier(3)  # capacity 4, batches of 2: two fill it, a third waits

    def run(batch: list[int]) -> list[int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        if batch[0] < 6:
            first_wave.wait(timeout=30)  # fails unless the first three batches run at once
        with lock:
            running -= 1
        return [x * 10 for x in batch]

    batches = [[i, i + 1] for i in range(0, 20, 2)]
    out = list(pipelined(batches, run, 4))
    assert sorted(b[0] for b, _ in out) == list(range(0, 20, 2))
    assert all(rows == [x * 10 for x in b] for b, rows in out)
    assert most == 3


def test_a_failing_batch_reaches_the_caller_without_waiting_for_the_batches_in_flight():
    release = threading.Event()

    def run(batch: list[int]) -> int:
        if batch == [0]:
            raise KeyboardInterrupt  # as Ctrl-C would, or any failure outside a request's own error
        release.wait(timeout=30)  # held until the caller has seen the failure
        return batch[0]

    try:
        with pytest.raises(KeyboardInterrupt):
            list(pipelined([[1], [0], [2]], run, 3))
        assert not release.is_set()  # the others are still running: nobody waited for them
    finally:
        release.set()


def test_the_openai_backend_declares_its_concurrency():
    with ChatServer() as server, OpenAIBackend(MODEL, base_url=server.base_url, max_concurrency=7) as backend:
        assert declared_concurrency(backend) == 7
