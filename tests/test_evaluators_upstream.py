"""CLBench-V evaluators checked case by case against the upstream benchmarks' released scorers.

CourtSI (``protocol/CourtSI-Bench/metrics.py`` and ``vlm_evaluate.py``), ZeroBench (its
curly-brace exact match), Financial Report ROE (the paper's exact match of one final value),
MMLongBench-Doc (``eval/eval_score.py``, per answer format), and the answer-format suffix that
every answer type is asked for.
"""

from __future__ import annotations

import json
import re

import pytest

from mmctx.prompts.context import (
    ANSWER_TYPE_SUFFIXES,
    SUFFIXES,
    TaskFormat,
    required_format,
    suffix_key,
    task_text,
)
from mmctx.schema import ANSWER_TYPES, Sample
from mmctx.scoring.evaluators import judged, numeric, spatial, zerobench  # noqa: F401  (registers them)
from mmctx.scoring.evaluators.base import get_evaluator
from mmctx.scoring.evaluators.mmlongbench import anls, answer_format, float_equal, mmlongbench_score
from mmctx.scoring.evaluators.spatial import COURTSI_MRA_SLACK, courtsi_mra
from mmctx.scoring.evaluators.text import numbers_in, parse_number


def open_sample(
    subset: str, evaluator: str, answer_type: str, gold, *, question: str = "Q?", meta: dict | None = None
) -> Sample:
    display = gold if isinstance(gold, str) else json.dumps(gold)
    return Sample(
        id=f"{subset}-1",
        task=subset,
        source=subset,
        format="open",
        level="L0",
        answer_type=answer_type,
        gold=gold,
        evaluator=evaluator,
        answer=display,
        question=question,
        meta=meta or {},
    )


def run(sample: Sample, response: str):
    ev = get_evaluator(sample.evaluator)
    found = ev.extract(sample, response)
    return found, (ev.score(sample, found.answer) if found.parsed else None)


# ---------------------------------------------------------------- CourtSI


def test_courtsi_mra_has_the_015_m_slack():
    assert COURTSI_MRA_SLACK == 0.15
    # (|0.03 - 0.04| - 0.15) / 0.04 < 0: within the slack at every threshold (plain MRA gives 0.5)
    assert courtsi_mra(0.03, 0.04) == 1.0
    # (2 - 0.15) / 10 = 0.185 < 1 - θ for θ ≤ 0.80: 7 of 10 (plain MRA: 0.2 → 6 of 10)
    assert courtsi_mra(12.0, 10.0) == pytest.approx(0.7)
    assert courtsi_mra(10.0, 10.0) == 1.0 and courtsi_mra(30.0, 10.0) == 0.0
    assert courtsi_mra(0.1, 0.0) == 1.0 and courtsi_mra(0.2, 0.0) == 0.0  # a zero gold: the slack alone


def test_courtsi_distance_item_scores_with_the_slack():
    s = open_sample(
        "CourtSI",
        "courtsi",
        "number",
        {"value": 0.04, "unit": "m"},
        meta={"category": "distance_measurement_object_line"},
    )
    found, v = run(s, "Answer: 0.03")
    assert (v.score, v.detail["metric"]) == (1.0, "MRA")


def test_courtsi_counting_is_exact_match_not_mra():
    s = open_sample("CourtSI", "courtsi", "number", {"value": 3}, meta={"category": "spatial_counting_player"})
    found, v = run(s, "Answer: 4")
    assert (v.score, v.detail["metric"]) == (0.0, "MA")  # MRA would give 0.5
    assert run(s, "Answer: 3")[1].score == 1.0
    assert run(s, "Answer: 3.0")[1].score == 1.0


def test_courtsi_loca_is_a_3d_distance_strictly_under_the_radius():
    s = open_sample("CourtSI", "courtsi", "point", {"xyz": [1.0, 2.0, 0.5], "radius": 0.3})
    found, v = run(s, "The ball is at\nAnswer: (1.1, 2.1, 0.6)")
    assert found.answer == "(1.1, 2.1, 0.6)"
    assert (v.score, v.detail["metric"]) == (1.0, "LocA")
    assert v.detail["distance"] == pytest.approx(0.03**0.5)
    # the height counts: same court position, 0.4 m off in z
    assert run(s, "Answer: (1.0, 2.0, 0.9)")[1].score == 0.0
    # exactly on the radius is outside (CourtSI: distance < 0.3)
    on_radius = open_sample("CourtSI", "courtsi", "point", {"xyz": [1.0, 2.0, 0.0], "radius": 0.3})
    v = run(on_radius, "Answer: (1.0, 2.0, 0.3)")[1]
    assert v.detail["distance"] == 0.3 and v.score == 0.0
    # a 2-D answer to a 3-D gold is not a point of the asked form
    found, _ = run(s, "Answer: (1.0, 2.0)")
    assert not found.parsed and "(x, y, z)" in found.issue
    assert get_evaluator("courtsi").score(s, "(1.0, 2.0)").outcome == "unparsed"


def test_courtsi_2d_point_is_strict_too():
    s = open_sample("CourtSI", "courtsi", "point", {"xy": [1.0, 2.0], "radius": 0.5})
    assert run(s, "Answer: (1.5, 2.0)")[1].score == 0.0  # distance 0.5 == radius: outside
    assert run(s, "Answer: (1.25, 2.25)")[1].score == 1.0


# ---------------------------------------------------------------- ZeroBench


def test_zerobench_braced_decade_is_not_coerced_to_a_number():
    s = open_sample("ZeroBench", "zerobench", "string", "1990")
    found, v = run(s, "It was built in the {1990s}")
    assert found.answer == "1990s" and v.score == 0.0
    assert run(open_sample("ZeroBench", "zerobench", "string", "1990s"), "{1990s}")[1].score == 1.0


def test_zerobench_unit_or_word_suffixed_numbers_are_not_numbers():
    s = open_sample("ZeroBench", "zerobench", "string", "12")
    assert run(s, "{12 dollars}")[1].score == 0.0
    assert run(s, "{12 apples}")[1].score == 0.0
    assert run(s, "{12}")[1].score == 1.0
    # plain numbers still compare as numbers (the paper's "numeric match")
    g = open_sample("ZeroBench", "zerobench", "string", "11.90")
    assert run(g, "{11.9}")[1].detail["match"] == "numeric"
    assert run(g, "{$11.90}")[1].score == 1.0
    assert run(open_sample("ZeroBench", "zerobench", "string", "1990"), "{1,990}")[1].score == 1.0


# ---------------------------------------------------------------- ROE


def roe_sample(value: float = 12.5) -> Sample:
    return open_sample("Financial Report ROE", "roe", "number", {"value": value, "unit": "%"})


@pytest.mark.parametrize(
    "final",
    [
        "ROE: 12%–13%",
        "ROE: 12.5% or 13%",
        "ROE: 12.5% - 13%",
        "ROE: between 12.5% and 13%",
        "ROE: 12.5% (or 13%)",
        "ROE: about 12.5%, maybe 13%",
        "ROE: 12.5%/13%",
        "ROE：12.5%（或13%）",
    ],
)
def test_roe_hedged_final_is_unparsed_not_its_first_number(final):
    found, _ = run(roe_sample(), f"Margin 7.5%, turnover 0.667, multiplier 2.5.\n{final}")
    assert not found.parsed and found.rule == "hedged"
    assert "one value" in found.issue
    v = get_evaluator("roe").score(roe_sample(), re.split("[:：]", final, maxsplit=1)[1])
    assert v.outcome == "unparsed" and v.detail["rule"] == "hedged"


def test_numbers_glued_to_cjk_text_are_read():
    assert parse_number("约12.5%") == (12.5, True)  # "about 12.5 %": no space in Chinese
    assert numbers_in("12.5%（或13%）") == [12.5, 13.0]
    assert parse_number("A3").value is None  # a Latin letter still glues: part of a word


@pytest.mark.parametrize(
    "final",
    [
        "ROE: 12.50%",
        "ROE: 约12.5%",
        "ROE: 12.5% (0.125)",
        "ROE = 0.05 × 2.5 = 12.5%",
        "ROE: 12.5%, i.e. 0.125",
        "ROE: 12.5% (up from 11.2% last year)",
    ],
)
def test_roe_one_value_in_several_forms_is_not_hedged(final):
    found, v = run(roe_sample(), final)
    assert found.parsed, found.issue
    assert v.score == 1.0


# ---------------------------------------------------------------- MMLongBench-Doc baseline match


def mml(gold, answer_type: str = "string", fmt: str | None = None) -> Sample:
    meta = {"answer_format": fmt} if fmt else {}
    return Sample(
        id="m1",
        task="MMLongBench-Pic",
        source="MMLongBench-Pic",
        format="open",
        question="Q?",
        answer=gold if isinstance(gold, str) else json.dumps(gold),
        gold=gold,
        answer_type=answer_type,
        evaluator="mmlongbench",
        level="L1",
        meta=meta,
    )


def baseline(sample: Sample, answer: str) -> float:
    v = get_evaluator("mmlongbench").score(sample, answer)
    assert v.outcome == "scored" and v.detail["mode"] == "baseline"
    return v.score


def test_mmlongbench_integer_is_exact():
    s = mml("400", fmt="Int")
    assert baseline(s, "400") == 1.0 and baseline(s, "400.0") == 1.0
    assert baseline(s, "401") == 0.0


def test_mmlongbench_float_within_one_percent_or_as_percentage():
    s = mml("12.5", fmt="Float")
    assert baseline(s, "12.6") == 1.0  # 0.8 % off
    assert baseline(s, "12.5%") == 1.0
    assert baseline(s, "0.125") == 1.0  # the same quantity as a fraction
    assert baseline(s, "13") == 0.0
    assert float_equal(12.5, 1250.0) and not float_equal(12.5, 14.0)


def test_mmlongbench_string_is_partial_similarity_with_threshold():
    s = mml("Anna Berg", fmt="Str")
    assert baseline(s, "Ana Berg") == pytest.approx(1 - 1 / 9)  # one edit in nine characters
    assert baseline(s, "anna berg") == 1.0
    assert baseline(s, "John Smith") == 0.0
    assert anls("abcd", "abxy") == 0.0  # similarity 0.5 is not above the threshold
    # strings of an exact kind (web address, date, e-mail) must match exactly
    url = mml("https://example.org/a", fmt="Str")
    assert baseline(url, "https://example.org/b") == 0.0 and baseline(url, "https://example.org/a") == 1.0


def test_mmlongbench_list_is_order_free_and_all_must_match():
    s = mml(["red", "blue"], "list", fmt="List")
    assert baseline(s, '["blue", "red"]') == 1.0
    assert baseline(s, "blue, red") == 1.0
    assert baseline(s, '["red"]') == 0.0
    assert baseline(s, '["red", "blue", "green"]') == 0.0
    assert baseline(s, '["red", "blux"]') == pytest.approx(0.75)  # the weakest element's similarity
    nums = mml(["3", "12"], "list", fmt="List")
    assert baseline(nums, "[12, 3]") == 1.0 and baseline(nums, "[12, 4]") == 0.0


def test_mmlongbench_format_inferred_when_the_item_does_not_say():
    assert answer_format(mml("400")) == "Int"
    assert answer_format(mml("12.5")) == "Float"
    assert answer_format(mml("Anna Berg")) == "Str"
    assert answer_format(mml(["a", "b"], "list")) == "List"
    assert answer_format(mml("Not answerable")) == "None"
    assert answer_format(mml("Anna Berg", fmt="Float")) == "Float"  # the item's own format wins
    assert mmlongbench_score("400", "400", "Int") == 1.0


def test_mmlongbench_bad_answer_format_is_an_invalid_item():
    v = get_evaluator("mmlongbench").score(mml("400", fmt="Integer!"), "400")
    assert v.outcome == "invalid_sample" and "answer_format" in v.detail["reason"]


# ---------------------------------------------------------------- answer-format suffixes


def test_every_answer_type_has_an_answer_format_instruction():
    assert set(ANSWER_TYPE_SUFFIXES) == set(ANSWER_TYPES)
    for answer_type in ANSWER_TYPES:
        assert SUFFIXES[ANSWER_TYPE_SUFFIXES[answer_type]], answer_type


def test_a_point_item_is_told_to_answer_with_a_point():
    s = open_sample(
        "CourtSI",
        "courtsi",
        "point",
        {"xyz": [1.0, 2.0, 0.5], "radius": 0.3},
        question="Where is the ball? Give (x, y, z) in metres.",
    )
    fmt = TaskFormat("plain", "short", "Sports spatial intelligence")
    text = task_text(s, fmt)
    assert "Answer: (x, y, z)" in text and "<answer>" not in text
    assert "(x, y, z)" in required_format(fmt, s.answer_type)


def test_an_unknown_subset_with_a_point_or_conclusions_item_gets_an_instruction():
    for answer_type, gold, marker in (
        ("point", {"xy": [1.0, 2.0], "radius": 1.0}, "Answer: ("),
        ("conclusions", ["a", "b"], "numbered list"),
        ("rubrics", ["r1"], "whole response"),
    ):
        s = open_sample("My-New-Set", "courtsi", answer_type, gold)
        assert marker in task_text(s, TaskFormat("plain", "", "my task")), answer_type


def test_a_subset_suffix_that_fits_the_answer_type_is_kept():
    s = open_sample("CourtSI", "courtsi", "number", {"value": 2.0})
    assert suffix_key(TaskFormat("plain", "short", "t"), "number") == "short"
    assert suffix_key(TaskFormat("zerobench", "", "t"), "string") == ""  # the template carries its format
    assert task_text(s, TaskFormat("plain", "short", "t")).endswith(SUFFIXES["short"])
    with pytest.raises(ValueError, match="answer type"):
        suffix_key(TaskFormat("plain", "", "t"), "hologram")
