"""The OpenAI-compatible backend against a real local HTTP server that injects faults on demand.

Everything talks to 127.0.0.1 only (`tests/fixtures/chat_server.py`); timeouts and backoffs are
shrunk so retries cost milliseconds, not seconds.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import sqlite3
import sys
import time
import types
from pathlib import Path

import pytest

pytest.importorskip("openai")

from PIL import Image

from mmctx.data.disk import load_benchmark
from mmctx.models import load_backend
from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.openai import (
    OpenAIBackend,
    OpenAIBackendError,
    chat_messages,
    option_span,
    parse_spec,
    redact,
)
from mmctx.models.retry import RetryPolicy, parse_retry_after
from mmctx.prompts.messages import ImagePart, Message, TextPart
from mmctx.prompts.presets import get_preset
from mmctx.run.plan import GenerationLimits, plan_requests
from mmctx.run.runner import STORE, RunError
from mmctx.run.settings import parse_scorers, parse_settings
from mmctx.tasks.fewshot import evaluate
from tests.fixtures.chat_server import MODEL, ROOT, ChatServer, Fault, prompt_key, prompt_text
from tests.fixtures.images import write_image

# Backoffs of milliseconds; a timeout generous enough that a loaded test machine does not trip it.
FAST = RetryPolicy(max_attempts=3, timeout=2.0, base_delay=0.01, max_delay=0.05)
# For the tests of slow replies: the server holds a "slow" reply SLOW_DELAY s, far past this timeout.
SHORT = RetryPolicy(max_attempts=3, timeout=0.5, base_delay=0.01, max_delay=0.05)
SLOW_DELAY = 6.0
# The end-to-end run has slow replies among its faults: a middle ground.
E2E = RetryPolicy(max_attempts=3, timeout=1.0, base_delay=0.01, max_delay=0.05)
SECRET = "sk-mmctx-test-5ecret-b6f1c2d9e8a7"


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


def backend(server: ChatServer, **kwargs) -> OpenAIBackend:
    kwargs.setdefault("retry", FAST)
    return OpenAIBackend(MODEL, base_url=server.base_url, **kwargs)


def user(text: str) -> tuple[Message, ...]:
    return (Message("user", (TextPart(text),)),)


# ---- prompts on the wire ----------------------------------------------------------------------


def _decode_data_url(url: str) -> tuple[str, bytes]:
    header, data = url.split(",", 1)
    assert header.startswith("data:") and header.endswith(";base64")
    return header[len("data:") : -len(";base64")], base64.b64decode(data)


def test_images_go_as_data_urls_in_order_with_roles_intact(server, tmp_path):
    red = write_image(tmp_path / "red.png", "red")
    blue = write_image(tmp_path / "blue.jpg", "blue", fmt="JPEG")
    green = write_image(tmp_path / "green.bmp", "green", fmt="BMP")  # not every server decodes BMP: re-encoded
    prompt = (
        Message("system", (TextPart("Answer briefly."),)),
        Message("user", (TextPart("First:"), ImagePart.from_path(red), TextPart("then:"), ImagePart.from_path(blue))),
        Message("assistant", (TextPart("ok"),)),
        Message("user", (ImagePart.from_path(green), TextPart("Which is green?"))),
    )
    assert backend(server).generate([GenerateRequest(prompt, 8)])[0].error is None

    [record] = server.chat_records()
    messages = record.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"] == "Answer briefly." and messages[2]["content"] == "ok"
    assert [p["type"] for p in messages[1]["content"]] == ["text", "image_url", "text", "image_url"]
    assert [p["type"] for p in messages[3]["content"]] == ["image_url", "text"]
    assert messages[1]["content"][0]["text"] == "First:" and messages[3]["content"][1]["text"] == "Which is green?"
    mime, data = _decode_data_url(messages[1]["content"][1]["image_url"]["url"])
    assert (mime, data) == ("image/png", red.read_bytes())
    mime, data = _decode_data_url(messages[1]["content"][3]["image_url"]["url"])
    assert (mime, data) == ("image/jpeg", blue.read_bytes())
    mime, data = _decode_data_url(messages[3]["content"][0]["image_url"]["url"])
    assert mime == "image/png" and Image.open(io.BytesIO(data)).getpixel((0, 0)) == (0, 128, 0)
    assert record.body["model"] == MODEL and record.body["max_tokens"] == 8 and record.body["temperature"] == 0.0


def test_generation_reads_text_usage_truncation_and_sends_stops(server):
    server.answer = lambda body: "the red ball is big"
    b = backend(server)
    cut, whole = b.generate(
        [GenerateRequest(user("Describe it."), 2, stop=("\n\n",)), GenerateRequest(user("Again."), 50)]
    )
    assert (cut.text, cut.truncated, cut.output_tokens) == ("the red", True, 2)
    assert (whole.text, whole.truncated, whole.output_tokens) == ("the red ball is big", False, 5)
    assert cut.prompt_tokens > 0 and cut.error is None
    # The two requests travel concurrently: find each by its prompt, not by arrival order.
    stops = {json.dumps(r.body["messages"]): r.body.get("stop") for r in server.chat_records()}
    assert len(stops) == 2
    assert [v for k, v in stops.items() if "Describe it." in k] == [["\n\n"]]
    assert [v for k, v in stops.items() if "Again." in k] == [None]


def test_a_missing_image_is_an_error_not_a_crash(server, tmp_path):
    prompt = (Message("user", (ImagePart(str(tmp_path / "gone.png"), "0" * 64), TextPart("?"))),)
    [g] = backend(server).generate([GenerateRequest(prompt, 4)])
    assert g.error.startswith("bad_input:") and g.text == ""
    assert server.chat_records() == []


# ---- concurrency --------------------------------------------------------------------------------


def test_concurrency_is_bounded_and_real_and_results_keep_request_order(server):
    server.latency = 0.2
    server.answer = prompt_text
    requests = [GenerateRequest(user(f"prompt{i}"), 16) for i in range(12)]
    started = time.perf_counter()
    out = backend(server, max_concurrency=3).generate(requests)
    elapsed = time.perf_counter() - started
    assert [g.text for g in out] == [f"prompt{i}" for i in range(12)]
    assert server.max_in_flight == 3  # never more than the limit, and more than one at a time
    assert elapsed < 12 * 0.2 * 0.8  # 4 waves of 0.2 s, not 12 in a row


def test_generate_works_from_inside_a_running_event_loop_and_not_after_close(server):
    import asyncio

    b = backend(server)

    async def notebook_cell():
        return b.generate([GenerateRequest(user("from a loop"), 8)])

    assert asyncio.run(notebook_cell())[0].error is None
    b.close()
    with pytest.raises(OpenAIBackendError, match="closed"):
        b.generate([GenerateRequest(user("too late"), 8)])


# ---- faults and retries -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["429", "500", "503", "slow", "drop", "malformed"])
def test_each_fault_is_retried_then_succeeds(server, kind):
    server.enqueue(Fault(kind, delay=SLOW_DELAY))
    [g] = backend(server, retry=SHORT if kind == "slow" else FAST).generate([GenerateRequest(user("hello"), 8)])
    assert g.error is None and g.text.startswith("answer-")
    records = server.chat_records()
    assert [(r.attempt, r.fault) for r in records] == [(1, kind), (2, None)]


def test_retry_after_is_honoured(server):
    server.enqueue(Fault("429", retry_after=1))
    [g] = backend(server).generate([GenerateRequest(user("hello"), 8)])
    first, second = server.chat_records()
    assert g.error is None
    waited = second.at - first.at
    assert 1.0 <= waited < 1.0 + 0.5  # the header's second, not the 10 ms backoff, and not much more


def test_a_retry_after_beyond_the_limit_fails_at_once(server):
    server.enqueue(Fault("429", retry_after=3600))
    policy = RetryPolicy(max_attempts=3, timeout=0.4, base_delay=0.01, max_retry_after=5)
    [g] = backend(server, retry=policy).generate([GenerateRequest(user("hello"), 8)])
    assert g.error.startswith("http_429:") and "3600" in g.error
    assert len(server.chat_records()) == 1


@pytest.mark.parametrize(
    "kind, cause, attempts",
    [
        ("500", "http_500", 3),
        ("429", "http_429", 3),
        ("drop", "connection", 3),
        ("slow", "timeout", 3),
        ("malformed", "bad_response", 3),
        ("400", "http_400", 1),  # the request itself is wrong: asking again cannot help
    ],
)
def test_a_request_failing_beyond_the_budget_returns_its_cause(server, kind, cause, attempts):
    requests = [GenerateRequest(user(f"fine {i}"), 8) for i in range(2)]
    requests.insert(1, GenerateRequest(user(f"doomed [[fault:{kind}*all]]"), 8))
    out = backend(server, retry=SHORT if kind == "slow" else FAST).generate(requests)
    assert out[1].error.startswith(f"{cause}: ") and out[1].text == ""
    assert out[0].error is None and out[2].error is None
    doomed = [r for r in server.chat_records() if "doomed" in prompt_text(r.body)]
    assert len(doomed) == attempts and all(r.fault == kind for r in doomed)


# ---- option log-likelihoods (vLLM prompt_logprobs) ----------------------------------------------


@pytest.mark.parametrize("order, decoded", [("first", "text"), ("last", "text"), ("first", "bytelevel")])
def test_score_sums_exactly_the_option_tokens(order, decoded):
    options = ("red", "big blue ball", "Green!")
    with ChatServer(prompt_logprob_order=order, decoded_style=decoded) as server:
        b = backend(server, score_mode="vllm_prompt_logprobs")
        assert b.capabilities.loglikelihood
        [scores] = b.score([ScoreRequest(user("Which colour is the ball?"), options)])
        expected = [
            server.expected_option_score([{"role": "user", "content": "Which colour is the ball?"}], o) for o in options
        ]
        bodies = [r.body for r in server.chat_records()]
    assert scores.error is None
    assert scores.token_counts == tuple(n for _, n in expected) == (1, 3, 2)
    assert scores.loglikelihoods == pytest.approx([ll for ll, _ in expected])
    assert scores.prompt_tokens > 0
    for body in bodies:
        assert body["prompt_logprobs"] == 1 and body["max_tokens"] == 1
        assert body["add_generation_prompt"] is False and body["continue_final_message"] is True
        assert body["messages"][-1]["role"] == "assistant" and body["messages"][-1]["content"] in options


def test_score_fails_clearly_against_a_server_without_prompt_logprobs():
    with ChatServer(supports_prompt_logprobs=False) as server:
        [scores] = backend(server, score_mode="vllm_prompt_logprobs").score([ScoreRequest(user("?"), ("a", "b"))])
        assert scores.error.startswith("no_prompt_logprobs:") and scores.loglikelihoods == ()
        assert len(server.chat_records()) == 2  # one per option, not retried: asking again cannot help


def test_score_retries_faults_like_generate(server):
    server.enqueue(Fault("503"), Fault("drop"))
    [scores] = backend(server, score_mode="vllm_prompt_logprobs").score([ScoreRequest(user("?"), ("yes", "no"))])
    assert scores.error is None and len(scores.loglikelihoods) == 2
    assert len(server.chat_records()) == 4


def test_option_span_needs_the_prompt_to_end_with_the_option():
    assert option_span(["<|assistant|>", "\n", "The", " red", "\n"], "red") == (3, 4)
    assert option_span(["x", ":red"], "red") == (1, 2)  # a token straddling the boundary belongs to the option
    with pytest.raises(Exception, match="does not end with"):
        option_span(["The", " red", "<|end|>"], "red")


def test_without_a_score_mode_the_backend_declares_and_refuses(server, tmp_path, shapes_one):
    b = backend(server)
    assert b.capabilities.loglikelihood is False
    with pytest.raises(OpenAIBackendError, match="score_mode"):
        b.score([ScoreRequest(user("?"), ("a", "b"))])
    with pytest.raises(RunError, match="ppl"):
        evaluate(
            shapes_one,
            f"openai:{MODEL}",
            tmp_path / "run",
            scorers="generate,ppl",
            show_progress=False,
            backend_factory=lambda spec, **kw: backend(server),
        )
    assert server.chat_records() == []  # refused before any request


# ---- identity, specs and keys -------------------------------------------------------------------


def test_model_info_names_the_served_model_and_host_not_the_key(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    b = backend(server, temperature=0.0, seed=7)
    host = server.base_url.split("//")[1].split("/")[0]
    assert (b.info.name, b.info.revision, b.info.backend) == (MODEL, ROOT, "openai")
    assert b.info.settings == {"host": host, "temperature": 0.0, "seed": 7, "scoring": "1"}
    assert SECRET not in repr(b.info) + repr(b) + repr(vars(b))
    assert b.capabilities.max_images is None and b.capabilities.interleaved and b.capabilities.chat_template
    assert b.capabilities.context_window is None
    assert OpenAIBackend("not-served", base_url=server.base_url, retry=FAST).info.revision == "api"


def test_load_backend_takes_openai_specs_and_ignores_local_options(server, monkeypatch):
    b = load_backend(
        f"openai:{MODEL}@{server.base_url}",
        device="cpu",
        dtype="auto",
        batch_size=8,
        revision=None,
        trust_remote_code=False,
    )
    assert isinstance(b, OpenAIBackend) and b.base_url == server.base_url and b.info.revision == ROOT
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    assert load_backend(f"openai:{MODEL}").base_url == server.base_url
    assert parse_spec("openai:org/model@8bit@https://h:1/v1") == ("org/model@8bit", "https://h:1/v1")
    assert parse_spec("openai:gpt-4o") == ("gpt-4o", None)
    with pytest.raises(ValueError):
        parse_spec("openai:")


def test_keys_come_from_the_named_env_var_or_the_keyring(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_SERVER_KEY", "from-env-var")
    backend(server, api_key_env="MY_SERVER_KEY").generate([GenerateRequest(user("a"), 4)])
    host = server.base_url.split("//")[1].split("/")[0]
    fake = types.SimpleNamespace(
        get_password=lambda service, user: "from-keyring" if (service, user) == ("mmctx-openai", host) else None
    )
    monkeypatch.setitem(sys.modules, "keyring", fake)
    backend(server).generate([GenerateRequest(user("b"), 4)])
    auth = [r.headers.get("authorization") for r in server.chat_records()]
    assert auth == ["Bearer from-env-var", "Bearer from-keyring"]


def test_a_refused_key_fails_at_construction_without_echoing_it(monkeypatch):
    with ChatServer(api_key="the-right-key") as server:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        with pytest.raises(OpenAIBackendError, match="http_401") as refused:
            backend(server)
        assert SECRET[:8] not in str(refused.value) and SECRET[-4:] not in str(refused.value)
        monkeypatch.setenv("OPENAI_API_KEY", "the-right-key")
        assert backend(server).generate([GenerateRequest(user("a"), 4)])[0].error is None


def test_retry_policy_backs_off_exponentially_with_jitter_and_reads_retry_after():
    import random

    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    rng = random.Random(0)
    for attempt, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
        delays = [policy.delay(attempt, None, rng) for _ in range(50)]
        assert all(full / 2 <= d <= full for d in delays) and len(set(delays)) > 1
    assert policy.delay(1, 5.0, rng) == 5.0
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert 9 <= parse_retry_after({"retry-after": _http_date(time.time() + 10)}) <= 10
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


def _http_date(ts: float) -> str:
    from email.utils import formatdate

    return formatdate(ts, usegmt=True)


def test_redact_removes_keys_and_bearer_tokens():
    text = f"headers Authorization: Bearer {SECRET}; X-Key: {SECRET}; other Bearer abc.def"
    clean = redact(text, (SECRET,))
    assert SECRET not in clean and "abc.def" not in clean and clean.count("***") == 3


# ---- end to end: an mmctx run against the server ------------------------------------------------


@pytest.fixture(scope="module")
def shapes_one(tmp_path_factory):
    from mmctx.data.shapes import build_benchmark

    out = tmp_path_factory.mktemp("shapes-one")
    build_benchmark(out, queries_per_task=1)
    return out


RUN = {
    "settings": "0-shot,4-random,4-similar-cot",
    "scorers": "generate,ppl",
    "batch_size": 4,
    "show_progress": False,
    "limits": GenerationLimits(max_new_tokens=8, cot_max_new_tokens=16),
}


def _bucket(body: dict) -> int:
    return int(prompt_key(body)[:8], 16) % 5


def _flaky(body: dict, attempt: int) -> Fault | None:
    """A fifth of the prompts always fail; another fifth fail their first attempt, each fault kind in turn.

    Slow replies only for generation: the runner scores one question at a time, so each slow
    option would cost a whole timeout in a row.
    """
    bucket = _bucket(body)
    if bucket == 0:
        return Fault("500")
    if bucket == 1 and attempt == 1:
        kinds = ["429", "drop", "malformed", "503"] + ([] if body.get("continue_final_message") else ["slow"])
        return Fault(kinds[int(prompt_key(body)[8:10], 16) % len(kinds)], delay=SLOW_DELAY)
    return None


def _rows(run: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(run / STORE) as db:
        return db.execute("SELECT key, request_id, error FROM responses").fetchall()


def test_a_run_with_faults_stores_every_request_once_and_retries_exactly_the_errors(server, shapes_one, tmp_path):
    factory = lambda spec, **kw: OpenAIBackend.from_spec(
        spec, base_url=server.base_url, retry=E2E, score_mode="vllm_prompt_logprobs", max_concurrency=8, **kw
    )
    bench = load_benchmark(shapes_one)
    plan = plan_requests(
        bench,
        parse_settings(RUN["settings"]),
        parse_scorers(RUN["scorers"]),
        get_preset("fewmmbench"),
        0,
        RUN["limits"],
    )
    doomed = {r.id for r in plan if _bucket({"messages": chat_messages(r.prompt.messages)}) == 0}
    assert 0 < len(doomed) < len(plan)

    server.rule = _flaky
    run = tmp_path / "run"
    first = evaluate(shapes_one, f"openai:{MODEL}", run, backend_factory=factory, **RUN)
    rows = _rows(run)
    assert first.stats.planned == len(plan) == len(rows) == len({k for k, _, _ in rows}) == len({i for _, i, _ in rows})
    assert {i for _, i, e in rows if e} == doomed and first.stats.errors == len(doomed)
    assert all(e.startswith("http_500: ") for _, _, e in rows if e)
    assert {r.outcome for r in first.results if r.request_id in doomed} == {"error"}
    assert "error" not in {r.outcome for r in first.results if r.request_id not in doomed}
    recovered = [r for r in server.chat_records() if r.attempt == 2 and r.fault is None]
    assert recovered, "some requests should have failed once and then succeeded"
    failed_prompts = {prompt_key(r.body) for r in server.chat_records() if r.fault == "500"}

    server.reset()
    second = evaluate(shapes_one, f"openai:{MODEL}", run, backend_factory=factory, retry_errors=True, **RUN)
    assert (second.stats.errors_retried, second.stats.done, second.stats.errors) == (len(doomed), len(doomed), 0)
    assert {prompt_key(r.body) for r in server.chat_records()} == failed_prompts  # exactly the errored ones again
    rows = _rows(run)
    assert len(rows) == len(plan) and not any(e for _, _, e in rows)


# ---- secrets never leave the process ------------------------------------------------------------


def _echo_auth(body: dict, attempt: int) -> Fault | None:
    bucket = _bucket(body)
    if bucket == 0:
        return Fault("echo_auth", status=500)  # retried, then stored as an error
    if bucket == 1:
        return Fault("echo_auth", status=400)  # stored as an error at once
    return None


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_the_api_key_never_reaches_the_run_folder_logs_or_output(
    server, shapes_one, tmp_path, monkeypatch, caplog, capsys
):
    from typer.testing import CliRunner

    from mmctx.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    server.rule = _echo_auth

    run = tmp_path / "run"
    factory = lambda spec, **kw: OpenAIBackend.from_spec(spec, base_url=server.base_url, retry=FAST, **kw)
    out = evaluate(
        shapes_one,
        f"openai:{MODEL}",
        run,
        settings="0-shot,4-random",
        scorers="generate",
        backend_factory=factory,
        show_progress=False,
    )
    # The CLI runs with the default retry policy (seconds of backoff): only errors it does not retry.
    server.rule = lambda body, attempt: Fault("echo_auth", status=400) if _bucket(body) < 2 else None
    cli_run = tmp_path / "cli-run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(shapes_one),
            "--model",
            f"openai:{MODEL}@{server.base_url}",
            "--out",
            str(cli_run),
            "--settings",
            "0-shot",
            "--scorers",
            "generate",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output

    assert _files_containing(run, SECRET.encode()) == [] and _files_containing(cli_run, SECRET.encode()) == []
    captured = capsys.readouterr()
    for text in (
        caplog.text,
        captured.out,
        captured.err,
        result.output,
        json.dumps([r.getMessage() for r in caplog.records]),
    ):
        assert SECRET not in text

    # The check had teeth: the key was really sent, the server echoed it into errors that were
    # stored (redacted), and the client's own debug logs were among those searched.
    assert {r.headers.get("authorization") for r in server.chat_records()} == {f"Bearer {SECRET}"}
    errors = [e for _, _, e in _rows(run) + _rows(cli_run) if e]
    assert (
        out.stats.errors > 0
        and any(e.startswith("http_500: ") for e in errors)
        and any(e.startswith("http_400: ") for e in errors)
    )
    assert all("authorization: bearer ***" in e.lower() for e in errors)
    assert any(r.name.startswith(("openai", "httpx")) and r.levelno == logging.DEBUG for r in caplog.records)
