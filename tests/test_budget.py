"""A prompt budget per model (``max_prompt_tokens``): many-shot prompts cut from the least similar
end, counted by a real tiny model, recorded per request, and every bad input refused by name."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from mmctx import api
from mmctx.cli import app
from mmctx.data.disk import load_benchmark
from mmctx.jsonl import read_jsonl
from mmctx.models import load_backend
from mmctx.models.base import GenerateRequest, prompt_counter
from mmctx.models.store import ResponseStore
from mmctx.prompts.presets import get_preset
from mmctx.run.budget import BudgetError, OverBudget, PromptCountError, check_max_prompt_tokens, fit_demos
from mmctx.run.files import MANIFEST, REQUESTS, STORE
from mmctx.run.plan import GenerationLimits, plan_requests, request_prompt
from mmctx.run.runner import RunError
from mmctx.run.settings import Setting
from mmctx.tasks.fewshot import evaluate
from tests.fixtures.chat_server import ChatServer

MODEL = "builtin:tiny-llava"
LIMITS = GenerationLimits(max_new_tokens=2, cot_max_new_tokens=4)
PRESET = get_preset("fewmmbench")


@pytest.fixture(scope="module")
def counter():
    return load_backend(MODEL, device="cpu")


@pytest.fixture(scope="module")
def bench(shapes_bench):
    return load_benchmark(shapes_bench)


def _run(shapes_bench, bench, run_dir, **kwargs):
    kwargs = {"settings": "16-similar", "scorers": "generate", "limit": 1, "tasks": [bench.tasks[0]], **kwargs}
    return evaluate(shapes_bench, MODEL, run_dir, limits=LIMITS, show_progress=False, **kwargs)


def _tokens(bench, counter, setting: str) -> int:
    """The count of the run's one query's generate prompt under ``setting``."""
    [request] = plan_requests(bench, [Setting.parse(setting)], ["generate"], PRESET, 0, LIMITS, limit=1,
                              tasks=[bench.tasks[0]])  # fmt: skip
    return counter.prompt_tokens(request.prompt.messages)


# ---- the search, without a model ----------------------------------------------------------------


def _fake(per_demo: int, base: int):
    calls = []

    def build(demos):
        return SimpleNamespace(messages=len(demos))

    def count(n):
        calls.append(n)
        return base + per_demo * n

    return build, count, calls


def test_the_binary_search_keeps_the_longest_fitting_prefix_in_log_k_counts():
    demos = [SimpleNamespace(id=f"d{i}") for i in range(64)]
    for budget in (150, 151, 1000, 3249, 3250, 3300):
        build, count, calls = _fake(50, 100)
        fitted = fit_demos(demos, build, count, budget)
        assert fitted.kept == min(64, (budget - 100) // 50) and fitted.tokens == 100 + 50 * fitted.kept
        assert fitted.prompt.messages == fitted.kept
        assert len(calls) <= 1 + math.ceil(math.log2(64)) and calls[0] == 64  # all demos first
    build, count, calls = _fake(50, 100)
    assert fit_demos(demos, build, count, 10_000).kept == 64 and calls == [64]  # a prompt that fits: one count


def test_a_budget_below_one_demo_or_a_zero_shot_prompt_over_it_raises_with_the_count():
    build, count, _ = _fake(50, 100)
    with pytest.raises(OverBudget) as over:
        fit_demos([SimpleNamespace(id="d")] * 16, build, count, 149)
    assert (over.value.demos, over.value.tokens) == (1, 150)
    with pytest.raises(OverBudget) as over:
        fit_demos([], build, count, 99)
    assert (over.value.demos, over.value.tokens) == (0, 100)


@pytest.mark.parametrize("bad", [0, -5, True, 2.5, "100", "Window"])
def test_a_budget_that_is_not_a_positive_whole_number_is_refused_naming_the_option(bad):
    with pytest.raises(ValueError, match="max_prompt_tokens is a whole number of tokens, at least 1"):
        check_max_prompt_tokens(bad)
    assert check_max_prompt_tokens(None) is None and check_max_prompt_tokens(1) == 1


# ---- counting -----------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["tiny-llava", "tiny-idefics3"])
def test_the_hf_backend_counts_a_prompt_as_generate_feeds_it(bench, family):
    counter = load_backend(f"builtin:{family}", device="cpu")
    [zero, one] = plan_requests(bench, [Setting.parse("0-shot"), Setting.parse("1-similar")], ["generate"], PRESET, 0,
                                LIMITS, limit=1, tasks=[bench.tasks[0]])  # fmt: skip
    for request in (zero, one):
        [generation] = counter.generate([GenerateRequest(request.prompt.messages, 1)])
        assert counter.prompt_tokens(request.prompt.messages) == generation.prompt_tokens > 0
    # Each image is counted as the tokens the processor expands it into, not as its placeholder.
    for request in (zero, one):
        text, _ = counter._rendered(request.prompt.messages)
        assert counter.prompt_tokens(request.prompt.messages) > len(counter.tokenizer(text)["input_ids"])
    assert prompt_counter(counter) is not None and prompt_counter(type(counter)) is not None


# ---- runs ---------------------------------------------------------------------------------------


def test_a_budget_cuts_16_shot_prompts_from_the_least_similar_end_and_records_it(shapes_bench, bench, counter,
                                                                                 tmp_path):  # fmt: skip
    budget = _tokens(bench, counter, "8-similar")
    run = tmp_path / "run"
    out = _run(shapes_bench, bench, run, settings="16-similar,16-similar-last", scorers="generate,ppl",
               max_prompt_tokens=budget)  # fmt: skip
    assert out.stats.done == 4 and out.stats.errors == 0
    assert json.loads((run / MANIFEST).read_text())["config"]["max_prompt_tokens"] == budget
    queries = {q.id: q for q in bench.queries}
    records = read_jsonl(run / REQUESTS)
    assert len(records) == 4
    for record in records:
        query = queries[record["query_id"]]
        stored = [d.id for d in bench.ranked_demos(query, "similar")][:16]
        setting = Setting.parse(record["setting"])
        kept = record["demo_ids"][::-1] if setting.last else record["demo_ids"]
        assert 1 <= len(kept) < 16 and kept == stored[: len(kept)]  # a prefix of the stored similar list
        assert record["demos_dropped"] == stored[len(kept) :]  # the least similar end, recorded
        assert record["max_prompt_tokens"] == budget and record["prompt_tokens_counted"] <= budget
        if setting.last:
            assert record["demo_ids"][-1] == stored[0]  # the nearest demo still sits next to the query
        # The most demos that fit: one more would be over the budget.
        demos_by_id = {d.id: d for d in bench.demos}
        more = [demos_by_id[d] for d in stored[: len(kept) + 1]]
        longer = request_prompt(bench, query, more, setting, record["scorer"], PRESET, 0, None)
        assert counter.prompt_tokens(longer.messages) > budget
    first_generate = next(r for r in records if r["setting"] == "16-similar" and r["scorer"] == "generate")
    assert len(first_generate["demo_ids"]) == 8 and first_generate["prompt_tokens_counted"] == budget
    # Each response is stored under its cut prompt's key, not the whole prompt's.
    whole = {r.id: r.key(counter.info) for r in plan_requests(
        bench, [Setting.parse("16-similar"), Setting.parse("16-similar-last")], ["generate", "ppl"], PRESET, 0,
        LIMITS, limit=1, tasks=[bench.tasks[0]])}  # fmt: skip
    with ResponseStore(run / STORE) as store:
        assert store.keys() == {r["key"] for r in records}
    assert all(whole[r["id"]] != r["key"] for r in records)


def test_prompts_that_fit_are_kept_whole_and_record_nothing_dropped(shapes_bench, bench, counter, tmp_path):
    budget = _tokens(bench, counter, "16-similar")
    _run(shapes_bench, bench, tmp_path / "run", max_prompt_tokens=budget)
    [record] = read_jsonl(tmp_path / "run" / REQUESTS)
    assert len(record["demo_ids"]) == 16 and record["demos_dropped"] == []
    assert record["prompt_tokens_counted"] == budget


def test_a_budget_below_one_demo_is_an_error_naming_query_setting_budget_and_count(shapes_bench, bench, counter,
                                                                                   tmp_path):  # fmt: skip
    one_demo = _tokens(bench, counter, "1-similar")
    zero_shot = _tokens(bench, counter, "0-shot")
    budget = zero_shot - 1
    run = tmp_path / "run"
    with pytest.raises(BudgetError) as err:
        _run(shapes_bench, bench, run, settings="0-shot,16-similar", max_prompt_tokens=budget)
    message = str(err.value)
    query = next(q.id for q in bench.queries if q.task == bench.tasks[0])  # --limit 1: the task's first
    assert f"queries[{query}].max_prompt_tokens" in message
    one = f"setting 16-similar, scorer generate: the prompt with one demo takes {one_demo} tokens, over the budget"
    assert f"{one} of {budget}" in message
    assert f"setting 0-shot, scorer generate: the zero-shot prompt takes {zero_shot} tokens" in message
    assert "2 prompt(s) over the prompt budget" in message
    assert not (run / MANIFEST).exists() and not (run / STORE).exists()  # before any generation


def test_a_zero_budget_is_refused_before_the_model_loads(shapes_bench, bench, tmp_path):
    loaded = []

    def factory(*args, **kwargs):
        loaded.append(args)
        return load_backend(*args, **kwargs)

    with pytest.raises(ValueError, match="max_prompt_tokens is a whole number"):
        _run(shapes_bench, bench, tmp_path / "run", max_prompt_tokens=0, backend_factory=factory)
    with pytest.raises(ValueError, match=r"max_prompt_tokens .* \(got 0\)"):
        api.evaluate(shapes_bench, MODEL, tmp_path / "api", max_prompt_tokens=0)
    assert not loaded and not (tmp_path / "api").exists()


def test_a_budget_on_ray_is_refused_before_anything_starts(shapes_bench, bench, tmp_path):
    from mmctx.run.distributed import RayOptions

    with pytest.raises(ValueError, match="max_prompt_tokens counts prompts with the model loaded here"):
        _run(shapes_bench, bench, tmp_path / "run", max_prompt_tokens=100, ray=RayOptions(workers=1))
    assert not (tmp_path / "run").exists()


def test_a_backend_that_cannot_count_is_refused_before_any_request(shapes_bench, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ChatServer() as server:
        with pytest.raises(PromptCountError, match="model 'openai:mock-vlm' cannot count prompt tokens"):
            api.evaluate(shapes_bench, "openai:mock-vlm", tmp_path / "spec", grid=["4-similar"], scorers=["generate"],
                         limit=1, options={"base_url": server.base_url}, max_prompt_tokens=500)  # fmt: skip
        # A backend already loaded, handed to the API, is refused too: it has no prompt_tokens.
        loaded = load_backend("openai:mock-vlm", base_url=server.base_url)
        assert prompt_counter(loaded) is None
        with pytest.raises(PromptCountError, match="max_prompt_tokens needs"):
            api.evaluate(shapes_bench, loaded, tmp_path / "loaded", grid=["4-similar"], scorers=["generate"], limit=1,
                         max_prompt_tokens=500)  # fmt: skip
        assert server.chat_records() == []
    assert not (tmp_path / "spec").exists() and not (tmp_path / "loaded").exists()


def test_a_context_task_refuses_the_few_shot_budget_by_name(tmp_path):
    with pytest.raises(ValueError, match="few-shot tasks only: max_prompt_tokens"):
        api.evaluate("clbench-v-toy", MODEL, tmp_path / "run", max_prompt_tokens=100)


def test_resuming_with_another_budget_is_refused_and_old_runs_read_as_unbudgeted(shapes_bench, bench, counter,
                                                                                  tmp_path):  # fmt: skip
    budget = _tokens(bench, counter, "8-similar")
    run = tmp_path / "run"
    _run(shapes_bench, bench, run, max_prompt_tokens=budget)
    assert _run(shapes_bench, bench, run, max_prompt_tokens=budget).stats.done == 0  # same budget: resumes
    for other in (budget + 100, None):
        with pytest.raises(RunError, match="holds a different run"):
            _run(shapes_bench, bench, run, max_prompt_tokens=other)
    # A run made before the budget existed has no such field: it reads as a run without a budget.
    old = tmp_path / "old"
    _run(shapes_bench, bench, old)
    manifest = json.loads((old / MANIFEST).read_text())
    del manifest["config"]["max_prompt_tokens"]
    (old / MANIFEST).write_text(json.dumps(manifest))
    assert _run(shapes_bench, bench, old).stats.done == 0
    with pytest.raises(RunError, match="holds a different run"):
        _run(shapes_bench, bench, old, max_prompt_tokens=budget)


def test_the_cli_takes_the_budget_and_refuses_zero_naming_the_flag(shapes_bench, bench, counter, tmp_path):
    runner = CliRunner()
    budget = _tokens(bench, counter, "8-similar")
    common = ["--model", MODEL, "--settings", "16-similar", "--scorers", "generate", "--limit", "1",
              "--tasks", bench.tasks[0], "--max-new-tokens", "2", "--no-progress"]  # fmt: skip
    r = runner.invoke(app, ["run", str(shapes_bench), "--out", str(tmp_path / "run"), *common,
                            "--max-prompt-tokens", str(budget)])  # fmt: skip
    assert r.exit_code == 0, r.output
    [record] = read_jsonl(tmp_path / "run" / REQUESTS)
    assert len(record["demo_ids"]) == 8 and len(record["demos_dropped"]) == 8
    for command in (["run", str(shapes_bench), "--out", str(tmp_path / "zero"), *common],
                    ["eval", str(shapes_bench), "--out", str(tmp_path / "zero"), "--model", MODEL]):  # fmt: skip
        r = runner.invoke(app, [*command, "--max-prompt-tokens", "0"])
        assert r.exit_code == 2 and "--max-prompt-tokens" in r.output, r.output
    assert not (tmp_path / "zero").exists()
    r = runner.invoke(app, ["eval", str(shapes_bench), "--out", str(tmp_path / "api"), "--model", "openai:mock-vlm",
                            "--base-url", "http://127.0.0.1:9/v1", "--max-prompt-tokens", "100"])  # fmt: skip
    assert r.exit_code == 2 and "cannot count prompt tokens" in r.output, r.output


def test_a_window_budget_is_the_window_less_the_longest_generation(shapes_bench, tmp_path):
    from mmctx.models.base import Capabilities
    from mmctx.run.budget import window_budget

    def backend(window):
        caps = Capabilities(max_images=None, interleaved=True, loglikelihood=True, chat_template=True,
                            context_window=window)  # fmt: skip
        return SimpleNamespace(capabilities=caps)

    assert window_budget(backend(4096), "m", 512) == 3584
    with pytest.raises(PromptCountError, match="'m' reports no context window"):
        window_budget(backend(None), "m", 16)
    with pytest.raises(PromptCountError, match="leaves no room"):
        window_budget(backend(512), "m", 512)
    # Through a run: the manifest records "window", each request the number it came to.
    run = tmp_path / "run"
    api.evaluate(shapes_bench, MODEL, run, grid=["4-similar"], scorers=["ppl"], limit=1, max_prompt_tokens="window")
    assert json.loads((run / MANIFEST).read_text())["config"]["max_prompt_tokens"] == "window"
    window = load_backend(MODEL).capabilities.context_window - GenerationLimits().cot_max_new_tokens
    assert {r["max_prompt_tokens"] for r in read_jsonl(run / REQUESTS)} == {window}


def test_the_report_says_which_prompts_were_cut_and_by_how_much(shapes_bench, bench, counter, tmp_path):
    budget = _tokens(bench, counter, "8-similar")
    run = tmp_path / "run"
    _run(shapes_bench, bench, run, settings="0-shot,16-similar", max_prompt_tokens=budget)
    api.report([run], tmp_path / "report", latex=False, figures=False)
    text = (tmp_path / "report" / "report.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith(f"| {MODEL} | 16-similar |")]
    assert row == f"| {MODEL} | 16-similar | generate | {budget} | 1 | 1 | 8 | {budget} |"
    assert f"| {MODEL} | 0-shot |" not in text.split("## Prompt budget")[1]  # sent whole: not listed
    unbudgeted = tmp_path / "plain"
    _run(shapes_bench, bench, unbudgeted, settings="0-shot")
    api.report([unbudgeted], tmp_path / "plain-report", latex=False, figures=False)
    assert "## Prompt budget" not in (tmp_path / "plain-report" / "report.md").read_text()
