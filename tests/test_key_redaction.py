"""A server that echoes the API key inside a *successful* reply never gets it onto disk.

The key is taken out where responses enter the store (`ResponseStore.put_many`), so the response
store, the judge store, ``results.jsonl`` and the viewer built from them never hold it, whatever
the backend. The server here is the real local chat server; its replies quote the
``Authorization`` header of the very request they answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openai")

from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.data.clbench.loader import load_clbench, write_clbench
from mmctx.data.clbench.toy import write_toy_suite
from mmctx.jsonl import read_jsonl
from mmctx.models.store import ResponseStore
from tests.fixtures.chat_server import ChatServer, Fault
from tests.fixtures.clbench import scripted_judge

# Not shaped like an OpenAI key or a bearer token: only the configured key itself can hide it.
KEY = "mmctx-local-7f3a9c2e51d4b8"
runner = CliRunner()


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _echoing(server_of: list[ChatServer], reply: str | None = None, judge=None):
    """``answer=``: the reply, then the key this very request was sent with (its Authorization header)."""

    def answer(body: dict) -> str:
        server = server_of[0]
        record = next(r for r in reversed(server.records) if r.body == body)
        key = record.headers.get("authorization", "").removeprefix("Bearer ")
        assert key == KEY  # the server did see the key: what follows echoes it
        text = judge(body) if judge else (reply or "Answer: A")
        return f"{text}\nDebug: authenticated as {key} ok"

    return answer


def _leaks(folder: Path) -> list[str]:
    """Files under ``folder`` whose bytes hold the key (SQLite write-ahead logs included)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sorted(str(p.relative_to(folder)) for p in files if KEY.encode() in p.read_bytes())


def test_a_key_echoed_in_replies_and_errors_is_stored_nowhere(shapes_bench, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    holder: list[ChatServer] = []
    server = ChatServer(api_key=KEY, answer=_echoing(holder))
    server.enqueue(Fault("echo_auth", status=400))  # the first reply: an error quoting the headers
    holder.append(server)
    run = tmp_path / "run"
    with server:
        _ok("run", str(shapes_bench), "--model", f"openai:mock-vlm@{server.base_url}", "--out", str(run),
            "--settings", "0-shot", "--scorers", "generate", "--limit", "1", "--no-progress",
            "--max-new-tokens", "64")  # fmt: skip
    with ResponseStore(run / "responses.sqlite") as store:
        stored = list(store.get_all().values())
    answered = [r for r in stored if not r["error"]]
    assert answered and all("authenticated as *** ok" in r["text"] for r in answered)
    assert sum(1 for r in stored if r["error"]) == 1
    assert all("***" in r["response"] for r in read_jsonl(run / "results.jsonl") if r["outcome"] != "error")
    _ok("view", str(run), "--out", str(tmp_path / "viewer"))
    assert _leaks(tmp_path) == []


def test_a_key_echoed_by_the_model_and_the_judge_of_a_context_run_is_stored_nowhere(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    suite = tmp_path / "suite"
    bench = write_toy_suite(suite)
    kept = [q for q in bench.queries if q.task in ("Insight-O3", "BrowseComp-V3")]
    write_clbench(kept, suite)
    model_holder: list[ChatServer] = []
    judge_holder: list[ChatServer] = []
    model = ChatServer(api_key=KEY, answer=_echoing(model_holder, "Answer: Sora"))
    judge = ChatServer(api_key=KEY, answer=_echoing(judge_holder, judge=scripted_judge(load_clbench(suite).queries)))
    model_holder.append(model)
    judge_holder.append(judge)
    run = tmp_path / "run"
    with model, judge:
        _ok("clbench", "run", str(suite), "--model", f"openai:mock-vlm@{model.base_url}", "--out", str(run),
            "--judge", f"openai:judge-a@{judge.base_url}", "--no-progress", "--max-new-tokens", "64")  # fmt: skip
        assert judge.chat_records(), "the judge was asked"
        _ok("clbench", "score", str(run), "--judge", f"openai:judge-a@{judge.base_url}")
    rows = read_jsonl(run / "results.jsonl")
    assert rows and all("authenticated as *** ok" in r["response"] for r in rows)
    _ok("view", str(run), "--out", str(tmp_path / "viewer"))
    assert _leaks(tmp_path) == []


def test_the_store_takes_secrets_out_of_every_string_but_leaves_non_credentials_alone(tmp_path):
    long_key, short = "k3y-" + "9" * 12, "EMPTY"  # a local server's placeholder is no credential
    with ResponseStore(tmp_path / "s.sqlite", secrets=(short, long_key, long_key[:10])) as store:
        payload = {"text": f"EMPTY {long_key}", "meta": [{"echo": long_key}], "n": 3}
        store.put_many([("k", "r", "generate", payload, f"http_500: {long_key}")])
        stored = store.get_all()["k"]
    assert stored == {"text": "EMPTY ***", "meta": [{"echo": "***"}], "n": 3, "error": "http_500: ***"}
