"""``ppl-calibrated``: contextual calibration of the ppl scorer by a content-free prompt's option prior."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mmctx
from mmctx.data.disk import load_benchmark
from mmctx.jsonl import read_jsonl
from mmctx.models.store import ResponseStore
from mmctx.prompts.ablation import AblationError
from mmctx.prompts.presets import get_preset
from mmctx.run.plan import CONTENT_FREE_TEXT, GenerationLimits, plan_requests
from mmctx.run.settings import CONTENT_FREE, parse_scorers, parse_settings
from mmctx.scoring import metrics
from mmctx.scoring.results import score_request, score_run

PRESET = get_preset("fewmmbench")

# --- the arithmetic ------------------------------------------------------------------------------


def test_calibration_divides_by_the_prior_and_renormalises():
    # Raw: A 0.6, B 0.4; the content-free prompt says A 0.8, B 0.2 -> 0.75 vs 2.0 -> B wins.
    out = metrics.calibrated_probabilities([0.6, 0.4], [0.8, 0.2])
    assert out == pytest.approx([0.75 / 2.75, 2.0 / 2.75])
    # A uniform prior changes nothing.
    assert metrics.calibrated_probabilities([0.2, 0.5, 0.3], [1 / 3] * 3) == pytest.approx([0.2, 0.5, 0.3])


def test_a_zero_prior_or_an_undefined_distribution_never_divides_by_zero():
    out = metrics.calibrated_probabilities([0.5, 0.5], [1.0, 0.0])
    assert np.isfinite(out).all() and out[1] == pytest.approx(1.0)
    assert np.isnan(metrics.calibrated_probabilities([math.nan, 0.5], [0.5, 0.5])).all()
    with pytest.raises(ValueError, match="2 option probabilities against a prior over 3"):
        metrics.calibrated_probabilities([0.5, 0.5], [0.2, 0.3, 0.5])


def _request(scorer="ppl-calibrated", gold=1):
    return {"id": f"0-shot/{scorer}/q", "query_id": "q", "task": "t", "setting": "0-shot", "scorer": scorer,
            "gold": gold, "options": ["a", "b"], "labels": ["A", "B"]}  # fmt: skip


def _scores(*lls, error=None):
    return {"loglikelihoods": list(lls), "token_counts": [1] * len(lls), "error": error}


def test_a_calibrated_result_reads_both_responses():
    raw = score_request(_request("ppl"), _scores(math.log(0.6), math.log(0.4)))
    calibrated = score_request(_request(), _scores(math.log(0.6), math.log(0.4)), _scores(math.log(0.8), math.log(0.2)))
    assert (raw.pred, raw.outcome) == (0, "wrong")
    assert (calibrated.pred, calibrated.outcome, calibrated.rule) == (1, "correct", "calibrated_ppl")
    assert calibrated.probs == pytest.approx([0.75 / 2.75, 2.0 / 2.75])


def test_a_missing_or_failed_content_free_response_is_never_a_prediction():
    scores = _scores(-1.0, -2.0)
    assert score_request(_request(), scores, None).outcome == "missing"
    failed = score_request(_request(), scores, _scores(error="HTTP 500"))
    assert failed.outcome == "error" and "content-free request: HTTP 500" in failed.error
    short = score_request(_request(), scores, _scores(-1.0))
    assert short.outcome == "error" and "for 2 options" in short.error


# --- planning ------------------------------------------------------------------------------------


def test_scorers_all_keeps_the_papers_two_and_calibrated_is_asked_by_name():
    assert parse_scorers("all") == ["generate", "ppl"]
    assert parse_scorers("ppl,ppl-calibrated") == ["ppl", "ppl-calibrated"]
    with pytest.raises(ValueError, match="unknown scorer 'ppl-content-free'"):
        parse_scorers(CONTENT_FREE)


@pytest.fixture(scope="module")
def planned(shapes_bench, tmp_path_factory):
    bench = load_benchmark(shapes_bench)
    blank = tmp_path_factory.mktemp("blank")
    settings = parse_settings("0-shot,4-similar,2-similar-blind")
    return bench, plan_requests(
        bench, settings, ["ppl", "ppl-calibrated"], PRESET, 0, GenerationLimits(), blank_dir=blank
    )


def _text(prompt) -> str:
    return "".join(m.text for m in prompt.messages)


def test_each_calibrated_request_shares_the_ppl_call_and_has_a_content_free_one(planned):
    bench, plan = planned
    by_id = {r.id: r for r in plan}
    queries = {q.id: q for q in bench.queries}
    calibrated = [r for r in plan if r.scorer == "ppl-calibrated"]
    assert calibrated and len([r for r in plan if r.scorer == CONTENT_FREE]) == len(calibrated)
    for r in calibrated:
        raw = by_id[r.id.replace("/ppl-calibrated/", "/ppl/")]
        free = by_id[r.id.replace("/ppl-calibrated/", f"/{CONTENT_FREE}/")]
        assert r.fingerprint == raw.fingerprint  # one model call serves both scorers
        assert r.content_free == free.fingerprint != r.fingerprint
        assert free.prompt.demo_ids == r.prompt.demo_ids and free.prompt.options == r.prompt.options
        text = queries[r.query_id].question or queries[r.query_id].statement
        if text:  # the query's text, and nothing else, reads N/A (demos may ask the same question)
            assert _text(free.prompt) == CONTENT_FREE_TEXT.join(_text(raw.prompt).rsplit(text, 1))
        last = free.prompt.messages[-1]
        assert last.images and all("/grey-" in i.path for i in last.images)
    # A shortcut check's prompt already lacks the content: divided by itself it would tie.
    assert {r.setting for r in calibrated} == {"0-shot", "4-similar"}
    assert any(r.setting == "2-similar-blind" and r.scorer == "ppl" for r in plan)


def test_calibrated_needs_a_folder_for_its_grey_images(shapes_bench):
    bench = load_benchmark(shapes_bench)
    with pytest.raises(AblationError, match="ppl-calibrated"):
        plan_requests(bench, parse_settings("0-shot"), ["ppl-calibrated"], PRESET, 0, GenerationLimits())


# --- a real run --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibrated_run(shapes_bench, tmp_path_factory):
    run = tmp_path_factory.mktemp("calibrated") / "run"
    result = mmctx.evaluate(
        shapes_bench, out=run, grid=["0-shot", "2-similar"], scorers=["ppl", "ppl-calibrated"], limit=1
    )
    return run, result


def test_a_run_asks_each_key_once_and_scores_calibrated_beside_raw(calibrated_run):
    run, result = calibrated_run
    requests = read_jsonl(run / "requests.jsonl")
    keys = {r["key"] for r in requests}
    assert result.stats.done == len(keys) < len(requests)  # the shared ppl calls were asked once
    assert (result.stats.cached, result.stats.shared) == (0, len(requests) - len(keys))
    with ResponseStore(run / "responses.sqlite", read_only=True) as store:
        assert store.keys() == keys
    results = score_run(run)
    assert CONTENT_FREE not in {r.scorer for r in results}
    raw = {(r.setting, r.query_id): r for r in results if r.scorer == "ppl"}
    by_key = {r["id"]: r for r in requests}
    with ResponseStore(run / "responses.sqlite", read_only=True) as store:
        stored = store.get_all()
    for r in (r for r in results if r.scorer == "ppl-calibrated"):
        assert r.outcome in ("correct", "wrong") and r.rule == "calibrated_ppl"
        free = stored[by_key[r.request_id]["content_free_key"]]
        prior = metrics.option_probabilities(free["loglikelihoods"], free["token_counts"])
        expected = metrics.calibrated_probabilities(raw[(r.setting, r.query_id)].probs, prior)
        assert r.probs == pytest.approx(expected) and r.pred == int(np.argmax(expected))


def test_the_report_puts_calibrated_beside_raw_and_compares_them(calibrated_run, tmp_path):
    run, _ = calibrated_run
    mmctx.report([run], out=tmp_path / "report", latex=False, figures=False)
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Table 1 columns (ppl-calibrated" in text and "contextually calibrated (Table 5 layout)" in text
    assert "0-shot: calibrated vs raw ppl" in text and "2-similar: calibrated vs raw ppl" in text


def test_a_model_without_log_likelihoods_is_refused_for_calibrated_too(shapes_bench, tmp_path):
    from mmctx.models.base import Capabilities
    from mmctx.run.runner import RunError, check_capabilities

    bench = load_benchmark(shapes_bench)
    plan = plan_requests(
        bench, parse_settings("0-shot"), ["ppl-calibrated"], PRESET, 0, GenerationLimits(), limit=1, blank_dir=tmp_path
    )

    class GenerateOnly:
        capabilities = Capabilities(
            max_images=None, interleaved=True, loglikelihood=False, chat_template=True, context_window=None
        )

        class info:
            name = "generate-only"

    with pytest.raises(RunError, match=r"drop the scorer\(s\) \['ppl-calibrated'\]"):
        check_capabilities(plan, GenerateOnly())


def test_under_a_prompt_budget_the_content_free_prompt_keeps_the_demos_its_partner_kept(shapes_bench, tmp_path):
    from mmctx.run.budget import fit_plan

    bench = load_benchmark(shapes_bench)
    plan = plan_requests(
        bench, parse_settings("16-similar"), ["ppl", "ppl-calibrated"], PRESET, 0, GenerationLimits(), limit=1,
        blank_dir=tmp_path,
    )  # fmt: skip

    def count(messages) -> int:  # characters, so "N/A" makes the content-free prompt the shorter one
        return sum(len(m.text) for m in messages)

    budget = sorted(count(r.prompt.messages) for r in plan if r.scorer == "ppl")[0] // 2
    fitted = {r.id: r for r in fit_plan(plan, count, budget, bench=bench, preset=PRESET, seed=0, blank_dir=tmp_path)}
    calibrated = [r for r in fitted.values() if r.scorer == "ppl-calibrated"]
    assert calibrated
    for r in calibrated:
        free = fitted[r.id.replace("/ppl-calibrated/", f"/{CONTENT_FREE}/")]
        raw = fitted[r.id.replace("/ppl-calibrated/", "/ppl/")]
        assert r.fit.demos_dropped and len(r.prompt.demo_ids) < 16  # the budget cut it
        assert free.prompt.demo_ids == r.prompt.demo_ids == raw.prompt.demo_ids
        assert free.fit.demos_dropped == r.fit.demos_dropped
        assert r.content_free == free.fingerprint and r.fingerprint == raw.fingerprint


def test_the_viewer_pairs_each_result_with_its_own_request(calibrated_run, tmp_path):
    from mmctx.reporting.viewer import load_run

    run, _ = calibrated_run
    loaded = load_run(run)
    assert len(loaded.requests) == len(loaded.results)
    assert [r["id"] for r in loaded.requests] == [r.request_id for r in loaded.results]
    assert CONTENT_FREE not in {r["scorer"] for r in loaded.requests}
    index = mmctx.view([run], tmp_path / "viewer")
    assert index.is_file() and f"/{CONTENT_FREE}/" not in (tmp_path / "viewer" / "samples.html").read_text()


@pytest.mark.parametrize(("grid", "scorers"), [("0-shot-blind", ["ppl-calibrated"]), ("4-similar-cot", ["ppl"])])
def test_a_grid_no_scorer_applies_to_is_refused_rather_than_run_empty(shapes_bench, tmp_path, grid, scorers):
    bench = load_benchmark(shapes_bench)
    with pytest.raises(ValueError, match="takes a scorer of .* so the run would ask nothing"):
        plan_requests(bench, parse_settings(grid), scorers, PRESET, 0, GenerationLimits(), blank_dir=tmp_path)
