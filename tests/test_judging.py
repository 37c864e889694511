"""`JudgeRunner` against a real chat server on 127.0.0.1: batching, parse retries, errors, cache, probe."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("openai")

from mmctx.models.openai import OpenAIBackend
from mmctx.models.retry import RetryPolicy
from mmctx.models.store import ResponseStore
from mmctx.schema import Sample
from mmctx.scoring.evaluators.judged import ConclusionsJudge, RubricJudge, SemanticJudge
from mmctx.scoring.judging import JudgeRunner, JudgeUnavailable, probe
from tests.fixtures.chat_server import MODEL, ChatServer, Fault, prompt_text

FAST = RetryPolicy(max_attempts=2, timeout=2.0, base_delay=0.01, max_delay=0.02)
RUBRICS = ["Gives the total.", "Uses one sentence."]
GOOD_RUBRIC = json.dumps(
    {"Grading Rationale": "ok", "List of Requirement Satisfaction Status": ["yes", "yes"], "Overall Score": 1}
)


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


@pytest.fixture
def store(tmp_path):
    with ResponseStore(tmp_path / "judges.sqlite") as s:
        yield s


class Counting:
    """A backend wrapper that records the size of every ``generate`` batch."""

    def __init__(self, backend: OpenAIBackend):
        self.inner, self.info, self.capabilities = backend, backend.info, backend.capabilities
        self.batches: list[int] = []

    def generate(self, requests):
        self.batches.append(len(requests))
        return self.inner.generate(requests)

    def score(self, requests):
        return self.inner.score(requests)


def make_backend(server: ChatServer) -> Counting:
    return Counting(OpenAIBackend(MODEL, base_url=server.base_url, retry=FAST))


def item(sid: str, gold, answer_type: str = "string", question: str = "Which city?") -> Sample:
    return Sample(
        id=sid,
        task="t",
        source="src",
        format="open",
        question=question,
        answer=str(gold),
        gold=gold,
        answer_type=answer_type,
        evaluator="semantic",
        level="L1",
    )


def per_prompt(*replies: str):
    """A scripted ``answer``: the n-th arrival of one prompt gets ``replies[n]`` (the last one repeats)."""
    seen: Counter[str] = Counter()

    def answer(body: dict) -> str:
        text = prompt_text(body)
        seen[text] += 1
        return replies[min(seen[text], len(replies)) - 1]

    return answer


def test_semantic_judging_batches_one_round_and_skips_prechecks(server, store):
    server.answer = lambda body: "True" if "the French capital" in prompt_text(body) else "False"
    backend = make_backend(server)
    items = [
        (item("a", "Paris"), "the French capital"),
        (item("b", "Paris"), "paris"),
        (item("c", "Paris"), "Lyon"),
        (item("d", "Paris"), ""),
    ]
    verdicts = JudgeRunner(backend, store).judge(SemanticJudge(), items)
    assert [(v.outcome, v.score) for v in verdicts] == [
        ("scored", 1.0),
        ("scored", 1.0),
        ("scored", 0.0),
        ("unparsed", 0.0),
    ]
    assert verdicts[0].detail["judge"] == "semantic" and verdicts[0].detail["judge_attempt"] == 1
    assert verdicts[1].detail["mode"] == "exact"
    assert backend.batches == [2] and len(server.chat_records()) == 2
    body = server.chat_records()[0].body
    assert body["max_tokens"] == 16 and [m["role"] for m in body["messages"]] == ["user"]


def test_a_reply_that_does_not_parse_is_asked_again(server, store):
    server.answer = per_prompt("The response looks fine to me.", GOOD_RUBRIC)
    backend = make_backend(server)
    sample = item("r", RUBRICS, "rubrics")
    [verdict] = JudgeRunner(backend, store).judge(RubricJudge(), [(sample, "The total is 4.")])
    assert (verdict.outcome, verdict.score, verdict.detail["judge_attempt"]) == ("scored", 1.0, 2)
    assert verdict.detail["statuses"] == ["yes", "yes"]
    assert backend.batches == [1, 1] and len(server.chat_records()) == 2
    assert len(store) == 2  # both replies kept, under different keys


def test_replies_that_never_parse_end_as_judge_error_with_the_replies(server, store):
    server.answer = lambda body: "I cannot grade this."
    backend = make_backend(server)
    items = [(item("r", RUBRICS, "rubrics"), "The total is 4."), (item("s", "Paris"), "the capital")]
    rubric = JudgeRunner(backend, store, attempts=3).judge(RubricJudge(), items[:1])[0]
    assert (rubric.outcome, rubric.score) == ("judge_error", 0.0)
    assert rubric.detail["replies"] == ["I cannot grade this."] * 3 and rubric.detail["attempts"] == 3
    assert "not JSON" in rubric.detail["reason"] and rubric.prediction == "The total is 4."
    semantic = JudgeRunner(backend, store, attempts=2).judge(SemanticJudge(), items[1:])[0]
    assert semantic.outcome == "judge_error" and len(semantic.detail["replies"]) == 2
    assert len(server.chat_records()) == 5


def test_a_count_outside_the_lists_is_asked_again(server, store):
    server.answer = per_prompt('{"correct_count": 5, "rationale": "x"}', '{"correct_count": 1, "rationale": "y"}')
    sample = item("p", ["A rises.", "B falls.", "C holds."], "conclusions")
    [verdict] = JudgeRunner(make_backend(server), store).judge(ConclusionsJudge(), [(sample, "A up\nD down")])
    assert (verdict.score, verdict.detail["n_hit"], verdict.detail["n_extra"]) == (0.0, 1, 1)
    assert verdict.detail["judge_attempt"] == 2


def test_server_errors_beyond_the_budget_are_judge_errors_with_the_cause(server, store):
    server.answer = lambda body: "True"
    server.rule = lambda body, attempt: Fault("500")
    backend = make_backend(server)
    [verdict] = JudgeRunner(backend, store, attempts=3).judge(SemanticJudge(), [(item("a", "Paris"), "Lutetia")])
    assert verdict.outcome == "judge_error" and "http_500" in verdict.detail["cause"]
    assert verdict.detail["replies"] == [] and "backend error" in verdict.detail["reason"]
    assert len(server.chat_records()) == 3 * FAST.max_attempts and len(store) == 0
    server.rule = None  # errors are not cached: the next run asks again and succeeds
    [again] = JudgeRunner(backend, store).judge(SemanticJudge(), [(item("a", "Paris"), "Lutetia")])
    assert (again.outcome, again.score) == ("scored", 1.0)


def test_a_second_run_over_the_same_store_makes_no_calls(server, tmp_path):
    server.answer = per_prompt("hmm", "False")
    items = [(item("a", "Paris"), "Lyon"), (item("b", "Rome"), "Milan")]
    backend = make_backend(server)
    with ResponseStore(tmp_path / "j.sqlite") as store:
        first = JudgeRunner(backend, store).judge(SemanticJudge(), items)
    calls = len(server.chat_records())
    assert calls == 4 and [v.detail["judge_attempt"] for v in first] == [2, 2]
    with ResponseStore(tmp_path / "j.sqlite") as store:
        second = JudgeRunner(backend, store).judge(SemanticJudge(), items)
    assert len(server.chat_records()) == calls and second == first


def test_cache_keys_depend_on_judge_model_prompt_and_attempt(server, store):
    runner = JudgeRunner(make_backend(server), store)
    prompt = SemanticJudge().prompt(item("a", "Paris"), "Lyon")
    other = SemanticJudge().prompt(item("a", "Paris"), "Nice")
    keys = {
        runner.key("semantic", prompt, 16, 1),
        runner.key("semantic", prompt, 16, 2),
        runner.key("rubric", prompt, 16, 1),
        runner.key("semantic", other, 16, 1),
    }
    assert len(keys) == 4
    assert runner.key("semantic", prompt, 16, 1) == JudgeRunner(runner.backend, store).key("semantic", prompt, 16, 1)


def test_extraction_plain_and_typed_with_retry(server, store):
    def answer(body: dict) -> str:
        text = prompt_text(body)
        if '"type"' not in text:
            return "[NO_FINAL_ANSWER]" if "no idea" in text else "12"
        return per_typed(body)

    per_typed = per_prompt("twelve, an integer", '{"answer": 12, "type": "integer"}')
    server.answer = answer
    backend = make_backend(server)
    found = JudgeRunner(backend, store).extract(
        [("How many?", "I count 12 pages.", False), ("How many?", "no idea", False), ("Pages?", "It has 12.", True)]
    )
    expected = [("12", "extractor"), (None, "extractor"), ("12", "extractor:integer")]
    assert [(f.answer, f.rule) for f in found] == expected
    assert found[1].issue and backend.batches == [3, 1]


def test_extraction_that_never_parses_is_an_extractor_error(server, store):
    server.answer = lambda body: "no json here"
    [found] = JudgeRunner(make_backend(server), store, attempts=2).extract([("Q?", "R.", True)])
    assert (found.answer, found.rule) == (None, "extractor_error") and "not JSON" in found.issue


def test_probe_passes_against_a_live_server(server):
    server.answer = lambda body: "OK"
    probe(make_backend(server))
    body = server.chat_records()[-1].body
    assert body["max_tokens"] == 4 and body["messages"][0]["content"] == "Reply with OK."


def test_probe_against_a_stopped_server_raises():
    # A backend keeps connections alive, and a stopped server's handler threads still answer on
    # them: the backend is built after the stop, so it must reach the closed port.
    with ChatServer() as gone:
        base_url = gone.base_url
    backend = OpenAIBackend(MODEL, base_url=base_url, retry=FAST)
    with pytest.raises(JudgeUnavailable, match="connection"):
        probe(backend)
