"""Demonstration strategies and orders: setting names, what the plan picks, and refusals."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mmctx.curate.retrieve import mmr_demos, random_demos, similar_demos
from mmctx.data.disk import load_benchmark
from mmctx.data.shapes import build_benchmark
from mmctx.prompts.build import shown_options
from mmctx.prompts.presets import get_preset
from mmctx.run.plan import GenerationLimits, plan_requests
from mmctx.run.settings import Setting, parse_settings
from mmctx.run.strategies import DEFAULT_MMR_LAMBDA, STRATEGIES, resolve_strategy
from mmctx.schema import Benchmark, BenchmarkError

PRESET = get_preset("fewmmbench")


@pytest.fixture(scope="module")
def bench(shapes_bench) -> Benchmark:
    return load_benchmark(shapes_bench)


def plan(bench: Benchmark, names: str) -> dict[str, list]:
    """Per setting name, the demo ids each generate request shows (in prompt order)."""
    requests = plan_requests(bench, parse_settings(names), ["generate"], PRESET, 0, GenerationLimits())
    out: dict[str, list] = {}
    for r in requests:
        out.setdefault(r.setting, []).append((r.query_id, list(r.prompt.demo_ids)))
    return out


# --- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["8-similar", "8-similar-cot", "8-similar-last", "8-similar-cot-last", "4-random#o2", "8-mmr", "8-mmr0.3",
     "4-image-similar", "4-text-similar-last", "8-balanced", "16-different-answer-cot", "64-random"],
)  # fmt: skip
def test_every_setting_name_round_trips(name):
    assert Setting.parse(name).name == name


def test_mmr_at_the_default_lambda_has_one_name():
    assert Setting.parse(f"8-mmr{DEFAULT_MMR_LAMBDA}").name == "8-mmr"
    assert resolve_strategy("mmr0.30").source_key == "mmr0.3"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("8-nearest", "unknown demo strategy 'nearest'"),
        ("8-mmr1.5", "MMR λ must lie in"),
        ("0-shot-last", "zero-shot setting has no demos to order"),
        ("8-similar-last#o2", "-last and #o<n> are two orders"),
        ("8-shot", "unknown setting"),
    ],
)
def test_bad_setting_names_are_refused_saying_why(name, message):
    with pytest.raises(ValueError, match=message):
        Setting.parse(name)


def test_the_registry_knows_every_documented_strategy():
    assert {"random", "similar", "image-similar", "text-similar", "mmr", "balanced", "different-answer"} <= set(
        STRATEGIES
    )


# --- what the plan picks ---------------------------------------------------------------------------


def test_stored_strategies_take_the_first_k_of_their_list(bench):
    picked = plan(bench, "4-image-similar,4-text-similar,8-mmr,16-similar,32-random")
    by_id = {q.id: q for q in bench.queries}
    for setting, key, k in (("4-image-similar", "image-similar", 4), ("4-text-similar", "text-similar", 4),
                            ("8-mmr", "mmr", 8), ("16-similar", "similar", 16), ("32-random", "random", 32)):  # fmt: skip
        for qid, demo_ids in picked[setting]:
            assert demo_ids == by_id[qid].demo_keys[key][:k]


def test_last_puts_the_most_similar_demo_next_to_the_query(bench):
    picked = plan(bench, "8-similar,8-similar-last")
    for (qid, first), (qid2, last) in zip(picked["8-similar"], picked["8-similar-last"], strict=True):
        assert qid == qid2 and last == list(reversed(first))


def test_balanced_shows_each_gold_label_equally_often(bench):
    for qid, demo_ids in plan(bench, "8-balanced")["8-balanced"]:
        labels = Counter()
        for d in demo_ids:
            options = shown_options(bench.demo(d), PRESET, 0)
            labels[options.labels[options.gold]] += 1
        assert sum(labels.values()) == 8 and max(labels.values()) - min(labels.values()) <= 1, (qid, labels)
        if bench.demo(demo_ids[0]).format != "mcqa":  # two labels (caption/foil position, Yes/No): 4 and 4
            assert sorted(labels.values()) == [4, 4], (qid, labels)


def test_different_answer_never_shows_the_query_answer(bench):
    by_id = {q.id: q for q in bench.queries}
    for qid, demo_ids in plan(bench, "8-different-answer")["8-different-answer"]:
        assert all(bench.demo(d).answer != by_id[qid].answer for d in demo_ids)
        ranked = [d for d in by_id[qid].demo_keys["similar"] if bench.demo(d).answer != by_id[qid].answer]
        assert demo_ids == ranked[:8]  # the most similar of those, in similarity order


# --- refusals ---------------------------------------------------------------------------------------


def test_more_demos_than_a_query_stores_is_refused_naming_the_query(bench):
    with pytest.raises(BenchmarkError, match=r"queries\[.+\]\.demo_keys\.similar: needs 65 demos, has 64"):
        plan(bench, "65-similar")


def test_a_list_the_benchmark_never_stored_is_named(bench):
    with pytest.raises(BenchmarkError, match=r"demo_keys\.mmr0\.3: no such list"):
        plan(bench, "4-mmr0.3")


def test_a_shapes_pool_smaller_than_the_demos_asked_stores_what_it_holds_and_refuses_more(tmp_path):
    small = build_benchmark(tmp_path / "small", queries_per_task=1, pool_per_task=20)
    eight = build_benchmark(tmp_path / "eight", queries_per_task=1, pool_per_task=20, demos_per_query=8)
    for q, q8 in zip(small.queries, eight.queries):
        for key, ranked in q.demo_keys.items():
            assert len(ranked) == 19, (q.id, key)  # the other 19 of its task and format's 20
            assert ranked[:8] == q8.demo_keys[key], (q.id, key)  # a longer list changes no demo shown
    with pytest.raises(BenchmarkError, match=r"queries\[.+\]\.demo_keys\.similar: needs 64 demos, has 19"):
        plan(small, "64-similar")
    with pytest.raises(ValueError, match="no candidate demo"):
        build_benchmark(tmp_path / "none", queries_per_task=3, pool_per_task=3)


def test_cot_deeper_than_the_rationale_depth_is_refused_not_filled_from_further_down(bench):
    from mmctx.curate.pipeline import rationale_targets

    eight = {d.id for d in rationale_targets(bench, 8)}
    assert {d.id for d in rationale_targets(bench, 4)} < eight < {d.id for d in rationale_targets(bench, None)}
    kept = [d if d.id in eight else d.model_copy(update={"rationale": None}) for d in bench.demos]
    curated = Benchmark(bench.name, bench.queries, kept, bench.root)
    assert plan(curated, "8-similar-cot")  # the depth covers 8 shots
    with pytest.raises(BenchmarkError, match=r"demo_keys\.similar: needs 16 demos with a rationale, has \d+"):
        plan(curated, "16-similar-cot")


# --- MMR at curation ---------------------------------------------------------------------------------


def test_mmr_at_lambda_one_is_similarity_and_greedy_prefixes_agree():
    rng = np.random.default_rng(0)
    cands = rng.normal(size=(60, 8))
    queries = rng.normal(size=(3, 8))
    assert mmr_demos(queries, cands, 10, 1.0).indices.tolist() == similar_demos(queries, cands, 10).indices.tolist()
    long, short = mmr_demos(queries, cands, 20, 0.5), mmr_demos(queries, cands, 5, 0.5)
    assert long.indices[:, :5].tolist() == short.indices.tolist()
    # Diversity costs relevance: MMR's picks are on average no closer to the query than the nearest ones.
    assert long.scores.mean() <= similar_demos(queries, cands, 20).scores.mean() + 1e-9
    with pytest.raises(ValueError, match="MMR λ must lie in"):
        mmr_demos(queries, cands, 5, 1.5)


def test_random_draws_of_fewer_are_prefixes_of_more():
    cands = [f"d{i}" for i in range(100)]
    assert random_demos("q", "counting", cands, 64, 0)[:8] == random_demos("q", "counting", cands, 8, 0)


# --- reports: order sensitivity and paired comparisons ---------------------------------------------


def _result(q: str, setting: str, pred: int, gold: int = 0):
    from mmctx.scoring.results import SampleResult

    return SampleResult(f"{setting}/ppl/{q}", q, "counting", "s", setting, "ppl", gold, pred,
                        "correct" if pred == gold else "wrong")  # fmt: skip


def test_order_sensitivity_covers_nearest_last_and_seeded_orders():
    from mmctx.scoring.stats import order_sensitivity

    results = [_result("a", "4-similar", 0), _result("b", "4-similar", 1),
               _result("a", "4-similar-last", 0), _result("b", "4-similar-last", 0),
               _result("a", "4-similar#o1", 1), _result("b", "4-similar#o1", 1)]  # fmt: skip
    (s,) = order_sensitivity(results)
    assert s.setting == "4-similar" and s.orders == ("stored", "last", "#o1")
    assert s.accuracies == (0.5, 1.0, 0.0) and s.agreement == 0.0


def test_the_comparison_table_asks_each_strategy_against_similar():
    from mmctx.scoring.stats import compare_settings

    items = "abcdef"
    results = [_result(q, "16-similar", 0) for q in items] + [_result(q, "16-mmr", int(q > "c")) for q in items]
    results += [_result(q, "16-similar-last", 0) for q in items]
    rows = {r.question: r.result for r in compare_settings("m", results)}
    assert set(rows) == {"16-shot mmr vs similar", "16-shot similar: nearest last vs first"}
    assert rows["16-shot mmr vs similar"].n == 6 and rows["16-shot mmr vs similar"].only_baseline == 3
