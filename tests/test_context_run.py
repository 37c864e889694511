"""The CLBench-V pipeline end to end: toy suite → real local chat server (model and judge) →
results, tables; repair, invalid items, overflow, truncation, resume, unreachable judges."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("openai")

from mmctx.data.clbench.loader import load_clbench, write_clbench
from mmctx.data.clbench.toy import write_toy_suite
from mmctx.models.openai import OpenAIBackend
from mmctx.models.retry import RetryPolicy
from mmctx.prompts.messages import ImagePart
from mmctx.run.context import ContextConfig, plan_context
from mmctx.run.runner import RunError
from mmctx.schema import ContextBlock
from mmctx.scoring.levels import aggregate
from mmctx.tasks.context import run_context
from tests.fixtures.chat_server import ChatServer, prompt_text
from tests.fixtures.clbench import scripted_judge, scripted_model

FAST = RetryPolicy(max_attempts=2, timeout=5.0, base_delay=0.01, max_delay=0.05)
RULE_SUBSETS = [
    "ReasonMap-Short",
    "ReasonMap-Long",
    "ReasonMap-Plus",
    "Insight-O3",
    "ZeroBench",
    "CourtSI",
    "MIRBench",
    "Financial Report ROE",
    "PRISMM-Bench",
]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_suite(tmp_path_factory.mktemp("toy"))


def _config(bench, **kw) -> ContextConfig:
    return ContextConfig(
        suite=str(bench.root), suite_name=bench.name, suite_sha256=bench.fingerprint(), **{"max_new_tokens": 256, **kw}
    )


def _backend(server: ChatServer) -> OpenAIBackend:
    return OpenAIBackend("mock-vlm", base_url=server.base_url, retry=FAST, temperature=0.0)


def _results(run: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}


def test_the_toy_suite_is_valid_and_round_trips(toy, tmp_path):
    assert toy.validate() == []
    assert len(toy.queries) == 28 and len(set(toy.tasks)) == 14
    write_clbench(toy.queries, tmp_path)
    again = load_clbench(tmp_path)
    assert [q.model_dump() for q in again.queries] == [q.model_dump() for q in toy.queries]


def test_prompts_carry_system_context_in_order_task_and_suffix(toy):
    plan = {r.id: r for r in plan_context(toy, _config(toy))}
    mir = plan["toy-mir-1"].prompt
    assert mir[0].role == "system" and "careful multimodal assistant" in mir[0].text
    images = [p for p in mir[1].content if isinstance(p, ImagePart)]
    assert [Path(i.path).name for i in images] == ["mir-a.png", "mir-b.png"]
    assert mir[1].text.rstrip().endswith("Reason: <reason>")
    route = plan["toy-reasonmap-short"].prompt[1].text
    assert "Route Name: <line>" in route and route.index("Harbor Station to Park") < route.index("Route Name: <line>")
    roe = plan["toy-roe-1"].prompt[1].text
    assert "DuPont" in roe and roe.rstrip().endswith("ROE: <value>%") and roe.count("ROE: <value>%") == 1
    sources = plan["toy-bc-1"].prompt[1].text
    assert sources.index("Reference Source [1]") < sources.index("Reference Source [2]") < sources.index("[Question]")


def test_reference_replies_score_full_marks_and_wrong_ones_zero(toy, tmp_path):
    with (
        ChatServer(answer=scripted_model(toy.queries)) as model,
        ChatServer(answer=scripted_judge(toy.queries)) as jserver,
    ):
        stats = run_context(
            toy, _backend(model), tmp_path / "right", _config(toy), judge=_backend(jserver), show_progress=False
        )
    rows = _results(tmp_path / "right")
    assert stats.outcomes == {"scored": 28}
    assert {i: r["score"] for i, r in rows.items() if r["score"] != 1.0} == {}
    scores = aggregate(rows.values())
    assert scores.overall == 1.0
    with (
        ChatServer(answer=scripted_model(toy.queries, "wrong_reply")) as model,
        ChatServer(answer=scripted_judge(toy.queries)) as jserver,
    ):
        run_context(
            toy, _backend(model), tmp_path / "wrong", _config(toy), judge=_backend(jserver), show_progress=False
        )
    wrong = _results(tmp_path / "wrong")
    assert {r["outcome"] for r in wrong.values()} == {"scored"}
    assert max(r["score"] for r in wrong.values()) == 0.0
    assert wrong["toy-reasonmap-short"]["detail"]["map_score"] > 0  # endpoints and first line still earn points


def test_repair_asks_once_more_and_keeps_both_attempts(toy, tmp_path):
    with ChatServer(answer=scripted_model(toy.queries, "I cannot tell.", repaired="reference_reply")) as model:
        stats = run_context(
            toy, _backend(model), tmp_path / "run", _config(toy, repair=True, subsets=RULE_SUBSETS), show_progress=False
        )
        asked = [prompt_text(r.body) for r in model.chat_records()]
    rows = _results(tmp_path / "run")
    assert stats.repairs_asked == len(rows) == 18
    assert all(r["repaired"] and r["score"] == 1.0 for r in rows.values())
    repair_prompts = [t for t in asked if "could not be parsed for evaluation" in t]
    assert len(repair_prompts) == 18 and all("I cannot tell." in t for t in repair_prompts)
    assert any("Required format: End with exactly one final line: ROE: <value>%" in t for t in repair_prompts)
    # CourtSI's subset suffix is the generic "Answer: <answer>"; a point item is asked for its point
    (court_point,) = [t for t in repair_prompts if "player B's head" in t]
    assert "Required format: End with exactly one final line: Answer: (x, y, z)" in court_point
    with sqlite3.connect(tmp_path / "run" / "responses.sqlite") as db:
        kinds = dict(db.execute("SELECT kind, COUNT(*) FROM responses GROUP BY kind").fetchall())
    assert kinds == {"generate": 18, "repair": 18}


def test_without_repair_an_unformatted_answer_is_unparsed_never_guessed(toy, tmp_path):
    with ChatServer(answer=scripted_model(toy.queries, "I cannot tell.")) as model:
        run_context(toy, _backend(model), tmp_path / "run", _config(toy, subsets=RULE_SUBSETS), show_progress=False)
    rows = _results(tmp_path / "run")
    assert {r["outcome"] for r in rows.values()} == {"unparsed"}
    assert all(r["score"] == 0.0 and r["detail"]["reason"] for r in rows.values())


def test_a_resumed_run_sends_nothing_again(toy, tmp_path):
    with ChatServer(answer=scripted_model(toy.queries)) as model:
        run_context(toy, _backend(model), tmp_path / "run", _config(toy, subsets=RULE_SUBSETS), show_progress=False)
        first = len(model.chat_records())
        stats = run_context(
            toy, _backend(model), tmp_path / "run", _config(toy, subsets=RULE_SUBSETS), show_progress=False
        )
        assert len(model.chat_records()) == first
    assert stats.cached == 18 and stats.done == 0


def test_bad_items_are_invalid_samples_counted_and_never_sent(toy, tmp_path):
    items = {q.id: q for q in toy.queries}
    broken = [
        items["toy-clb-1"].model_copy(update={"gold": []}),
        items["toy-o3-1"].model_copy(update={"blocks": [ContextBlock(kind="image", image="images/missing.png")]}),
        items["toy-zb-1"],
    ]
    root = tmp_path / "suite"
    write_toy_suite(root)
    write_clbench(broken, root)
    bench = load_clbench(root)
    with (
        ChatServer(answer=scripted_model(bench.queries)) as model,
        ChatServer(answer=scripted_judge(bench.queries)) as jserver,
    ):
        run_context(
            bench, _backend(model), tmp_path / "run", _config(bench), judge=_backend(jserver), show_progress=False
        )
        sent = "\n".join(prompt_text(r.body) for r in model.chat_records())
    rows = _results(tmp_path / "run")
    assert rows["toy-clb-1"]["outcome"] == rows["toy-o3-1"]["outcome"] == "invalid_sample"
    assert "gold" in rows["toy-clb-1"]["detail"]["reason"] and "missing.png" in rows["toy-o3-1"]["detail"]["reason"]
    assert rows["toy-zb-1"]["score"] == 1.0
    assert "colour is the kite" not in sent and "Apply Glorp" not in sent
    scores = aggregate(rows.values())
    assert scores.overall == pytest.approx(1 / 3)


def test_judged_subsets_need_a_judge_and_an_unreachable_one_fails_at_start(toy, tmp_path):
    with ChatServer(answer=scripted_model(toy.queries)) as model:
        with pytest.raises(RunError, match="--judge"):
            run_context(toy, _backend(model), tmp_path / "a", _config(toy), show_progress=False)
        dead = ChatServer().start()
        url = dead.base_url
        dead.stop()
        gone = OpenAIBackend("judge", base_url=url, retry=FAST)
        with pytest.raises(RunError, match="unreachable"):
            run_context(toy, _backend(model), tmp_path / "b", _config(toy), judge=gone, show_progress=False)
        assert model.chat_records() == []


def test_a_context_beyond_the_window_is_context_overflow_unless_truncated(tiny_models, tmp_path):
    from mmctx.analysis.complexity import load_tokenizer
    from mmctx.models import load_backend

    root = tmp_path / "suite"
    write_toy_suite(root)
    bench = load_clbench(root)
    long = bench.queries[[q.id for q in bench.queries].index("toy-roe-1")]
    huge = long.model_copy(update={"id": "huge", "blocks": [ContextBlock(kind="text", text="revenue 800 " * 3000)]})
    write_clbench([huge, long], root)
    bench = load_clbench(root)
    backend = load_backend(str(tiny_models["idefics3"]), device="cpu")
    run_context(bench, backend, tmp_path / "plain", _config(bench, max_new_tokens=4), show_progress=False)
    rows = _results(tmp_path / "plain")
    assert rows["huge"]["outcome"] == "context_overflow" and rows["huge"]["score"] == 0.0
    assert rows["toy-roe-1"]["outcome"] != "context_overflow"
    name, count = load_tokenizer("whitespace")
    cfg = _config(bench, max_new_tokens=4, truncation="middle", truncation_budget=300, tokenizer=name)
    run_context(bench, backend, tmp_path / "cut", cfg, count_tokens=count, show_progress=False)
    rows = _results(tmp_path / "cut")
    assert rows["huge"]["outcome"] != "context_overflow" and rows["huge"]["truncated_tokens"] == 6000 - 300
    manifest = json.loads((tmp_path / "cut" / "manifest.json").read_text())
    assert manifest["config"]["truncation"] == "middle" and manifest["config"]["tokenizer"] == "whitespace"


def test_free_form_answers_go_to_the_extractor_model_when_rules_find_none(toy, tmp_path):
    prose = "Reading the sign and the page, the founder was Anna Berg and the year 1897."

    def extractor(body: dict) -> str:
        text = prompt_text(body)
        if text.startswith("Reply with OK"):
            return "OK"
        return "Anna Berg" if "Who founded" in text else "[NO_FINAL_ANSWER]"

    cfg = _config(toy, subsets=["Pix2Fact"])
    with ChatServer(answer=lambda body: prose) as model, ChatServer(answer=extractor) as ext:
        run_context(toy, _backend(model), tmp_path / "without", cfg, show_progress=False)
        run_context(toy, _backend(model), tmp_path / "with", cfg, extractor=_backend(ext), show_progress=False)
        asked = [prompt_text(r.body) for r in ext.chat_records()]
    without, with_ = _results(tmp_path / "without"), _results(tmp_path / "with")
    assert {r["outcome"] for r in without.values()} == {"unparsed"}
    assert with_["toy-p2f-1"]["outcome"] == "scored" and with_["toy-p2f-1"]["score"] == 1.0
    assert with_["toy-p2f-1"]["extracted_by"].startswith("extractor") and with_["toy-p2f-1"]["extracted_by"].endswith(
        "@mock-vlm"
    )
    assert with_["toy-p2f-2"]["outcome"] == "unparsed"  # the extractor found no final answer: never guessed
    assert any(prose in t and "[NO_FINAL_ANSWER]" in t for t in asked)


def test_reasoning_traces_are_stripped_before_scoring_and_kept_in_the_store(toy, tmp_path):
    def thinking(body: dict) -> str:
        return "<think>Maybe Answer: B? No.</think>\nAnswer: A" if "colour is the kite" in prompt_text(body) else "x"

    with ChatServer(answer=thinking) as model:
        run_context(toy, _backend(model), tmp_path / "run", _config(toy, subsets=["Insight-O3"]), show_progress=False)
    row = _results(tmp_path / "run")["toy-o3-1"]
    assert row["score"] == 1.0 and row["response"].startswith("<think>")


def test_repair_and_truncation_together_score_and_rescore(toy, tmp_path):
    from mmctx.analysis.complexity import load_tokenizer
    from mmctx.scoring.context import score_context_run

    name, count = load_tokenizer("whitespace")
    cfg = _config(
        toy, repair=True, truncation="head", truncation_budget=12, tokenizer=name, subsets=["Financial Report ROE"]
    )
    with ChatServer(answer=scripted_model(toy.queries, "I cannot tell.", repaired="reference_reply")) as model:
        run_context(toy, _backend(model), tmp_path / "run", cfg, count_tokens=count, show_progress=False)
    rows = _results(tmp_path / "run")
    assert all(r["truncated_tokens"] > 0 and r["repaired"] and r["score"] == 1.0 for r in rows.values())
    again = {r["id"]: r for r in score_context_run(tmp_path / "run", toy)}
    assert again == rows


def test_an_evaluator_failing_on_odd_gold_makes_that_item_invalid_not_the_run(toy, tmp_path):
    items = {q.id: q for q in toy.queries}
    odd = items["toy-reasonmap-short"]
    gold = {**odd.gold, "routes": {"plan-0": ["not a segment"]}}
    root = tmp_path / "suite"
    write_toy_suite(root)
    write_clbench([odd.model_copy(update={"gold": gold}), items["toy-zb-1"]], root)
    bench = load_clbench(root)
    with ChatServer(answer=scripted_model(bench.queries)) as model:
        run_context(bench, _backend(model), tmp_path / "run", _config(bench), show_progress=False)
    rows = _results(tmp_path / "run")
    assert rows["toy-zb-1"]["score"] == 1.0
    assert rows["toy-reasonmap-short"]["outcome"] == "invalid_sample"
    assert (
        "gold" in rows["toy-reasonmap-short"]["detail"]["reason"]
        and "routes" in rows["toy-reasonmap-short"]["detail"]["reason"]
    )


def test_an_evaluator_that_raises_marks_its_item_invalid_and_the_rest_is_scored(toy, tmp_path):
    from dataclasses import dataclass

    from mmctx.scoring.evaluators import Extraction, register
    from mmctx.scoring.evaluators.base import _REGISTRY

    @dataclass(frozen=True)
    class Explodes:
        name: str = "explodes-in-test"
        free_form: bool = False
        judge: None = None

        def extract(self, sample, response):
            return Extraction(response)

        def score(self, sample, answer):
            raise ZeroDivisionError("gold of a shape this evaluator never saw")

    register(Explodes())
    try:
        items = {q.id: q for q in toy.queries}
        root = tmp_path / "suite"
        write_toy_suite(root)
        write_clbench([items["toy-zb-2"].model_copy(update={"evaluator": "explodes-in-test"}), items["toy-zb-1"]], root)
        bench = load_clbench(root)
        with ChatServer(answer=scripted_model(bench.queries)) as model:
            run_context(bench, _backend(model), tmp_path / "run", _config(bench), show_progress=False)
    finally:
        _REGISTRY.pop("explodes-in-test")
    rows = _results(tmp_path / "run")
    assert rows["toy-zb-1"]["score"] == 1.0
    assert (
        rows["toy-zb-2"]["outcome"] == "invalid_sample" and "ZeroDivisionError" in rows["toy-zb-2"]["detail"]["reason"]
    )
