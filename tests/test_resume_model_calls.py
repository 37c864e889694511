"""Every step that calls a model keeps each answer and resumes after SIGKILL without asking again.

The wrapper every non-evaluation caller shares (`StoredBackend`) is checked first against a real
chat server on 127.0.0.1: keys, replay, errors, retries. Then each kind of model-calling step —
evaluation (`mmctx run`), CoT rationales (`mmctx rationales`), judges (`mmctx clbench run` with
judged subsets) — runs as the real command line in a child process against that server, is
SIGKILLed mid-way (the child stops itself, with a batch in flight, once some answers are
committed; the parent kills it only then, so the kill lands mid-step on any machine), and is
started again: its outputs must equal an uninterrupted run's, and the server must receive
exactly the calls that were not stored (none sent twice).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from mmctx.data.disk import load_benchmark
from mmctx.models.base import GenerateRequest, ModelInfo, ScoreRequest
from mmctx.models.keys import generate_key, score_key
from mmctx.models.openai import OpenAIBackend
from mmctx.models.retry import RetryPolicy
from mmctx.models.store import ResponseStore
from mmctx.models.stored import StoredBackend, StoredCall
from mmctx.prompts.messages import Message, TextPart
from mmctx.prompts.presets import get_preset
from mmctx.run.plan import GenerationLimits, plan_requests
from mmctx.run.settings import parse_settings
from tests.fixtures.chat_server import MODEL, ChatServer, Fault, prompt_text
from tests.fixtures.clbench import scripted_judge, scripted_model

FAST = RetryPolicy(max_attempts=1, timeout=5.0, base_delay=0.01, max_delay=0.02)
PROBE = "Reply with OK."  # the judge's reachability probe: sent by every run, never stored


def _ask(text: str, max_new_tokens: int = 8) -> GenerateRequest:
    return GenerateRequest((Message("user", (TextPart(text),)),), max_new_tokens)


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


@pytest.fixture
def backend(server):
    with OpenAIBackend(MODEL, base_url=server.base_url, retry=FAST) as b:
        yield b


# ---- the wrapper -------------------------------------------------------------------------------


def test_keys_are_the_evaluation_runs_keys(shapes_bench):
    """One keying: a call through the wrapper is filed exactly where a run files the same request."""
    bench = load_benchmark(shapes_bench)
    settings = parse_settings("0-shot,4-random-cot")
    plan = plan_requests(bench, settings, ["generate", "ppl"], get_preset("fewmmbench"), 0, GenerationLimits(), limit=1)
    model = ModelInfo("m", "r1", "hf", {"dtype": "float32"})
    generated = [r for r in plan if r.scorer == "generate"][:3]
    ranked = [r for r in plan if r.scorer == "ppl"][:3]
    assert generated and ranked
    for r in generated:
        assert generate_key(model, GenerateRequest(r.prompt.messages, r.max_new_tokens)) == r.key(model)
    for r in ranked:
        assert score_key(model, ScoreRequest(r.prompt.messages, r.prompt.options.texts)) == r.key(model)
    other = ModelInfo("m", "r2", "hf", {"dtype": "float32"})
    assert generate_key(other, GenerateRequest(generated[0].prompt.messages, 16)) != generated[0].key(model)


def test_stored_answers_are_replayed_and_only_new_requests_are_sent(server, backend, tmp_path):
    requests = [_ask(f"question {i}") for i in range(5)]
    with ResponseStore(tmp_path / "r.sqlite") as store:
        first = StoredBackend(backend, store, "test", batch_size=2)
        answers = first.generate(requests[:3])
        assert (first.stats.asked, first.stats.from_store) == (3, 0) and len(store) == 3
    assert len(server.chat_records()) == 3
    with ResponseStore(tmp_path / "r.sqlite") as store:
        again = StoredBackend(backend, store, "test", batch_size=2)
        replay = again.generate(requests)
        assert (again.stats.asked, again.stats.from_store) == (2, 3)
    assert replay[:3] == answers and all(g.text and g.error is None for g in replay)
    sent = [prompt_text(r.body) for r in server.chat_records()]
    assert sorted(sent) == sorted(f"question {i}" for i in range(5))  # each question sent once


def test_a_request_asked_twice_in_one_call_is_sent_once(server, backend, tmp_path):
    with ResponseStore(tmp_path / "r.sqlite") as store:
        out = StoredBackend(backend, store).generate([_ask("same"), _ask("other"), _ask("same")])
    assert out[0] == out[2] and len(server.chat_records()) == 2


def test_errors_are_stored_replayed_and_asked_again_only_on_request(server, backend, tmp_path):
    server.rule = lambda body, attempt: Fault("400") if "bad" in prompt_text(body) else None
    requests = [_ask("good one"), _ask("bad one"), _ask("good two")]
    path = tmp_path / "r.sqlite"
    with ResponseStore(path) as store:
        first = StoredBackend(backend, store).generate(requests)
        assert [g.error is None for g in first] == [True, False, True] and len(store) == 3
    with ResponseStore(path) as store:
        replay = StoredBackend(backend, store).generate(requests)
    assert replay[1].error == first[1].error and len(server.chat_records()) == 3  # replayed, not asked
    server.rule = None
    with ResponseStore(path) as store:
        retried = StoredBackend(backend, store, retry_errors=True)
        healed = retried.generate(requests)
        assert retried.stats.errors_retried == 1 and retried.stats.asked == 1
        assert store.get_all()[generate_key(backend.info, requests[1])]["error"] is None  # replaced
    assert healed[1].error is None and healed[1].text and len(server.chat_records()) == 4


def test_without_store_errors_a_failure_is_asked_again_next_time(server, backend, tmp_path):
    server.enqueue(Fault("400"))
    with ResponseStore(tmp_path / "r.sqlite") as store:
        wrapper = StoredBackend(backend, store, store_errors=False)
        assert wrapper.generate([_ask("x")])[0].error and len(store) == 0
        assert wrapper.generate([_ask("x")])[0].error is None and len(store) == 1


def test_a_backend_that_raises_fails_only_the_request_that_raises(tmp_path, backend):
    """A batch that raises is asked again one by one; only the request that still raises is an error."""

    class RaisesOnPoison:
        info, capabilities = backend.info, backend.capabilities

        def generate(self, requests):
            if any("poison" in r.messages[0].text for r in requests):
                raise ValueError("cannot render this prompt")
            return backend.generate(requests)

        def score(self, requests):
            raise NotImplementedError

    requests = [_ask("a"), _ask("poison"), _ask("b")]
    with ResponseStore(tmp_path / "r.sqlite") as store:
        out = StoredBackend(RaisesOnPoison(), store).generate(requests)
        rows = store.get_all()
    assert out[0].text and out[2].text and out[1].error == "ValueError: cannot render this prompt"
    assert len(rows) == 3 and sum(1 for r in rows.values() if r["error"]) == 1


def test_explicit_keys_and_extras_are_stored_as_given(backend, tmp_path):
    with ResponseStore(tmp_path / "r.sqlite") as store:
        wrapper = StoredBackend(backend, store, "judge")
        [g] = wrapper.generate_calls([StoredCall(_ask("q"), "item-1", "k-1", {"attempt": 2})])
        row = store.by_kind("judge")["item-1"]
    assert row["text"] == g.text and row["attempt"] == 2 and store.path.exists()


# ---- kill and resume, one test per kind of step ------------------------------------------------

# The child: the real `mmctx` command line, instrumented to stop itself (SIGSTOP) when it is
# about to commit a batch to the store named by STOP_IN while STOP_AFTER answers are already
# there, i.e. with a batch asked but not committed; and to commit every 2 answers, so a small
# step has several batches. STOP_AFTER=0 runs it through (the uninterrupted run).
_CHILD = """
import os, signal, sys
from mmctx.models import stored
from mmctx.models.store import ResponseStore

stored.default_batch = lambda backend: 2
stop_after, stop_in = int(os.environ["STOP_AFTER"]), os.environ["STOP_IN"]
commit = ResponseStore.put_many

def stop_with_a_batch_in_flight(self, rows, *args, **kwargs):
    if stop_after and self.path.name == stop_in and len(self) >= stop_after:
        os.kill(os.getpid(), signal.SIGSTOP)
    commit(self, rows, *args, **kwargs)

ResponseStore.put_many = stop_with_a_batch_in_flight
from mmctx.cli import main
main()
"""


def _mmctx(args: list[str], store: str, stop_after: int = 0) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STOP_AFTER": str(stop_after), "STOP_IN": store}
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    return out


def _kill_when_stopped(proc: subprocess.Popen, deadline_s: float = 600) -> None:
    """Block until ``proc`` stops itself, then SIGKILL it; fail if it exits first or never stops."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        pid, status = os.waitpid(proc.pid, os.WUNTRACED | os.WNOHANG)
        if pid:
            if not os.WIFSTOPPED(status):
                output = proc.stdout.read() if proc.stdout else ""
                pytest.fail(f"the step ended (status {status}) before it was stopped mid-way:\n{output}")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the step did not commit enough answers within {deadline_s:.0f}s")


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def _calls(server: ChatServer) -> list[str]:
    """The prompts the server was asked for, less the judge's probe and the fragments of requests
    a kill cut off mid-send (a body that is not JSON: the killed run never asked it whole)."""
    return [
        prompt_text(r.body)
        for r in server.chat_records()
        if "_unparsed" not in r.body and not prompt_text(r.body).startswith(PROBE)
    ]


def _settle(server: ChatServer, quiet_s: float = 0.3, deadline_s: float = 30) -> None:
    """Wait until the server has read all a killed process sent (runs keep requests in flight
    while they commit): nothing in flight and no new request for ``quiet_s``."""
    seen, quiet_since, deadline = -1, time.monotonic(), time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if len(server.records) != seen or server.in_flight:
            seen, quiet_since = len(server.records), time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return
        time.sleep(0.02)


def _kill_then_resume(server: ChatServer, whole_args, killed_args, store: Path, stop_after: int) -> tuple[int, int]:
    """Run uninterrupted, then killed mid-way and resumed; returns (calls of the whole run, rows at the kill).

    Asserts that the resumed run sent exactly the calls that were not stored when it was killed.
    """
    _finish(_mmctx(whole_args, store.name))
    whole = len(_calls(server))
    server.records.clear()
    _kill_when_stopped(_mmctx(killed_args, store.name, stop_after))
    _settle(server)
    stored = _rows(store)
    assert stop_after <= stored < whole, "the kill must land mid-step for this test to mean anything"
    before = len(_calls(server))
    assert before > stored  # the batches in flight were asked but never committed
    out = _finish(_mmctx(killed_args, store.name))
    resumed = _calls(server)[before:]
    assert len(resumed) == whole - stored, out  # no stored call sent again, nothing missing
    assert _rows(store) == whole  # every call stored once
    return whole, stored


def test_evaluation_killed_mid_run_resumes_to_identical_results(server, shapes_bench, tmp_path):
    def args(run: Path) -> list[str]:
        return [
            "run", str(shapes_bench), "--model", f"openai:{MODEL}@{server.base_url}", "--out", str(run),
            "--settings", "0-shot,4-similar,4-random-cot", "--scorers", "generate", "--limit", "2",
            "--batch-size", "2", "--no-progress",
        ]  # fmt: skip

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    _kill_then_resume(server, args(whole), args(killed), killed / "responses.sqlite", stop_after=4)
    assert (whole / "results.jsonl").read_text() == (killed / "results.jsonl").read_text()


def _tutor(body: dict) -> str:
    """A rationale writer: confidently answers A at first; taught the gold answer, explains it."""
    text = prompt_text(body)
    options = dict(re.findall(r"^([A-H])\. (.+)$", text, flags=re.M))
    gold = re.search(r'The correct answer is "(.+?)"', text)
    if gold is None:
        return "It looks like this to me, clearly enough.\nAnswer: A"
    label = next((k for k, v in options.items() if v == gold.group(1)), "A")
    return f"Looking at the image, the shapes and colours show that {gold.group(1)} is right.\nAnswer: {label}"


def test_rationales_killed_mid_run_resume_to_identical_rationales(shapes_bench, tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    shutil.copytree(shapes_bench, whole)
    shutil.copytree(shapes_bench, killed)
    with ChatServer(answer=_tutor) as server:

        def args(bench: Path) -> list[str]:
            return ["rationales", str(bench), "--model", f"openai:{MODEL}@{server.base_url}", "--attempts", "2"]

        calls, stored = _kill_then_resume(
            server, args(whole), args(killed), killed / "curation" / "responses.sqlite", stop_after=4
        )
        again = _finish(_mmctx(args(killed), "responses.sqlite"))
    assert f"model calls: {calls} from the store, 0 asked" in again  # a third run asks nothing
    assert (whole / "curation" / "rationales.jsonl").read_text() == (
        killed / "curation" / "rationales.jsonl"
    ).read_text()
    demos = load_benchmark(killed).demos
    assert demos == load_benchmark(whole).demos
    kept = [d for d in demos if d.rationale is not None]
    assert kept and any(d.rationale.injected for d in kept) and any(not d.rationale.injected for d in kept)


def test_judging_killed_mid_way_resumes_to_identical_verdicts(tmp_path):
    from mmctx.data.clbench.loader import load_clbench
    from mmctx.data.clbench.toy import write_toy_suite

    toy = write_toy_suite(tmp_path / "toy")
    bench = load_clbench(toy.root)
    with (
        ChatServer(answer=scripted_model(bench.queries, "wrong_reply")) as model,
        ChatServer(answer=scripted_judge(bench.queries)) as judge,
    ):

        def args(run: Path) -> list[str]:
            return [
                "clbench", "run", str(toy.root), "--model", f"openai:mock-vlm@{model.base_url}", "--out", str(run),
                "--judge", f"openai:judge-a@{judge.base_url}", "--no-progress", "--max-new-tokens", "64",
            ]  # fmt: skip

        whole, killed = tmp_path / "whole", tmp_path / "killed"
        _kill_then_resume(judge, args(whole), args(killed), killed / "judges.sqlite", stop_after=2)
        generated = len(model.chat_records())
    # The model's answers were all stored before judging began: the resumed run asked it nothing.
    assert generated == 2 * len(bench.queries)
    assert (whole / "results.jsonl").read_text() == (killed / "results.jsonl").read_text()
