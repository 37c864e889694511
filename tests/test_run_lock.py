"""Two processes started on one run folder: the second refuses at once, naming the folder and
the holder's pid, and every request is computed exactly once.

Real processes (``python -m mmctx``) against the real local chat server. The first process's
first request is held by the server until the second process has exited, so the two overlap
by construction, not by timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("openai")

from mmctx.data.clbench.toy import write_toy_suite
from mmctx.jsonl import read_jsonl
from mmctx.run.runner import RunError, merge_runs
from tests.fixtures.chat_server import ChatServer, request_key

DEADLINE = 300.0  # seconds: generous for a loaded machine; the test never sleeps on purpose


class HoldFirst:
    """``answer=`` for `ChatServer`: the first chat request waits until `release`; all get "Answer: A"."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.released = threading.Event()
        self._lock = threading.Lock()
        self._first = True

    def __call__(self, body: dict) -> str:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.arrived.set()
            self.released.wait(DEADLINE)
        return "Answer: A"

    def release(self) -> None:
        self.released.set()


def _mmctx(*args: str) -> list[str]:
    return [sys.executable, "-m", "mmctx", *args]


def _two_processes_on_one_folder(command: list[str], hold: HoldFirst) -> tuple[subprocess.CompletedProcess, int]:
    """Start ``command``; once its first request is at the server, run it again to the end; then
    let the first finish. Returns the second's result and the first's pid."""
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert hold.arrived.wait(DEADLINE), "the first run never sent a request"
        second = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE)
    finally:
        hold.release()
        out, err = first.communicate(timeout=DEADLINE)
    assert first.returncode == 0, err
    return second, first.pid


def _computed_once(server: ChatServer) -> None:
    keys = [request_key(r.body) for r in server.chat_records()]
    assert len(keys) == len(set(keys)), "a request was computed by both processes"


def test_a_second_context_run_on_a_busy_folder_refuses_at_once(tmp_path):
    suite = tmp_path / "suite"
    write_toy_suite(suite)
    run = tmp_path / "run"
    hold = HoldFirst()
    with ChatServer(answer=hold) as server:
        command = _mmctx("clbench", "run", str(suite), "--model", f"openai:mock-vlm@{server.base_url}",
                         "--out", str(run), "--subset", "Insight-O3", "--batch-size", "1", "--no-progress")  # fmt: skip
        second, holder = _two_processes_on_one_folder(command, hold)
        assert second.returncode == 2, second.stderr
        message = " ".join(second.stderr.split())
        assert str(run) in message and f"pid {holder}" in message and "in use" in message
        _computed_once(server)
        assert len(server.chat_records()) == 2
        # The lock goes with its holder: a third run resumes the finished folder.
        again = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE)
        assert again.returncode == 0, again.stderr
        assert len(server.chat_records()) == 2  # everything was stored: nothing asked again
    assert len(read_jsonl(run / "results.jsonl")) == 2


def test_a_second_fewshot_run_on_a_busy_folder_refuses_at_once(shapes_bench, tmp_path):
    run = tmp_path / "run"
    hold = HoldFirst()
    with ChatServer(answer=hold) as server:
        command = _mmctx("run", str(shapes_bench), "--model", f"openai:mock-vlm@{server.base_url}", "--out", str(run),
                         "--settings", "0-shot", "--scorers", "generate", "--limit", "1", "--batch-size", "1",
                         "--no-progress")  # fmt: skip
        second, holder = _two_processes_on_one_folder(command, hold)
        assert second.returncode == 2, second.stderr
        message = " ".join(second.stderr.split())
        assert str(run) in message and f"pid {holder}" in message and "in use" in message
        _computed_once(server)
    assert len(read_jsonl(run / "results.jsonl")) == len(read_jsonl(run / "requests.jsonl"))


def _shard(folder: Path, spec: str) -> Path:
    folder.mkdir()
    manifest = {"model": {"name": "m", "revision": "r", "backend": "hf", "settings": {}}, "config": {"shard": spec}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "requests.jsonl").write_text("")
    return folder


def test_a_merge_into_a_folder_another_process_holds_is_refused(tmp_path):
    shards = [_shard(tmp_path / "s0", "0/2"), _shard(tmp_path / "s1", "1/2")]
    out = tmp_path / "merged"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from mmctx.run.runner import run_lock\n"
         f"with run_lock({str(out)!r}):\n    print('held', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunError, match=rf"in use by another mmctx process \(pid {holder.pid}\)"):
            merge_runs(shards, out)
    finally:
        holder.communicate("\n", timeout=DEADLINE)
    assert not (out / "manifest.json").exists()
