"""The ReasonMap topology judge (`route` evaluator) on a hand-made three-line metro map.

Map (transfers at Central between Lines 1 and 2, at Forest between Lines 2 and 3):

    Line 1: Apple - Bamboo - Central - Dragon
    Line 2: Eagle - Central - Fern - Fig - Forest
    Line 3: Harbor - Island - Forest

Map scores below are worked out by hand from the rules in `route`'s docstring.
"""

from __future__ import annotations

import pytest

from mmctx.schema import Sample
from mmctx.scoring.evaluators import route
from mmctx.scoring.evaluators.base import get_evaluator
from mmctx.scoring.evaluators.route import line_key, parse_segments, station_key

METRO = {
    "Line 1": ["Apple Station", "Bamboo Station", "Central Station (Transfer Station)", "Dragon Station"],
    "Line 2": ["Eagle Station", "Central Station (Transfer Station)", "Fern Station", "Fig Station", "Forest Station"],
    "Line 3": ["Harbor Station", "Island Station", "Forest Station (Transfer Station)"],
}
SEG_1 = {
    "route_name": "Line 1",
    "departure_stop": "Apple",
    "arrival_stop": "Central",
    "via_stops": ["Bamboo"],
    "num_via_stops": 1,
}
SEG_2 = {
    "route_name": "Line 2",
    "departure_stop": "Central",
    "arrival_stop": "Forest",
    "via_stops": ["Fern", "Fig"],
    "num_via_stops": 2,
}
# A worse reference plan (other line names, other stops), listed first: the max must still pick "fast".
SLOW = [
    {
        "route_name": "Metro Line 9",
        "departure_stop": "Apple",
        "arrival_stop": "Zebra",
        "via_stops": [],
        "num_via_stops": 0,
    }
]
ROUTES = {"slow": SLOW, "fast": [SEG_1, SEG_2]}


def make(
    start: str = "Apple Station",
    end: str = "Forest Station",
    variant: str = "short",
    metro=None,
    routes=None,
    question: str = "How do I get there?",
) -> Sample:
    gold = {
        "station_1": start,
        "station_2": end,
        "metro": metro or METRO,
        "variant": variant,
        "routes": ROUTES if routes is None else routes,
    }
    subset = "ReasonMap-Short" if variant == "short" else "ReasonMap-Long"
    return Sample(
        id="rm-1",
        task=subset,
        source=subset,
        format="open",
        level="L0",
        answer_type="route",
        gold=gold,
        evaluator="route",
        answer="Line 1 Apple→Central; Line 2 Central→Forest",
        question=question,
    )


def seg(line: str, dep: str, arr: str, extra: str = "") -> str:
    return f"Route Name: {line}\nDeparture Stop: {dep}\nArrival Stop: {arr}\n{extra}"


def judge(sample: Sample, response: str):
    ev = get_evaluator("route")
    found = ev.extract(sample, response)
    assert found.parsed, found.issue
    return ev.score(sample, found.answer)


TWO_SEGMENTS = (
    seg("Line 1", "Apple Station", "Central Station") + "--\n" + seg("Line 2", "Central Station", "Forest Station")
)


def test_registered_as_a_rule_evaluator():
    ev = get_evaluator("route")
    assert ev is route.ROUTE
    assert ev.judge is None and ev.free_form is False


def test_correct_two_segment_route_with_transfer():
    v = judge(make(), "<think>Line 1 then Line 2.</think>\n" + TWO_SEGMENTS)
    assert v.outcome == "scored" and v.score == 1.0
    assert v.detail["correct"] and v.detail["continuity"] and v.detail["reason"] == ""
    assert v.detail["segments"] == 2


def test_correct_one_segment_route():
    v = judge(make(end="Dragon Station"), seg("Line 1", "Apple", "Dragon"))
    assert v.score == 1.0 and v.detail["segments"] == 1


def test_wrong_endpoint_fails_with_a_reason():
    response = seg("Line 1", "Bamboo Station", "Central Station") + "--\n" + seg("Line 2", "Central", "Forest")
    v = judge(make(), response)
    assert v.outcome == "scored" and v.score == 0.0
    assert not v.detail["departure_ok"] and v.detail["arrival_ok"] and not v.detail["endpoints"]
    assert "Bamboo" in v.detail["reason"] and "Apple" in v.detail["reason"]
    assert v.detail["map_score"] == 0.0  # no endpoint match: no map points either


def test_nonexistent_line():
    response = seg("Line 9", "Apple", "Central") + "--\n" + seg("Line 2", "Central", "Forest")
    v = judge(make(), response)
    assert v.score == 0.0 and v.detail["endpoints"] and not v.detail["lines_exist"]
    assert "Line 9" in v.detail["reason"]


def test_stop_not_on_its_line():
    # Forest is on Lines 2 and 3, not on Line 1: membership fails even though the endpoints are right.
    v = judge(make(), seg("Line 1", "Apple", "Forest"))
    assert v.score == 0.0 and v.detail["lines_exist"] and not v.detail["stops_on_lines"]
    assert "Forest" in v.detail["reason"] and "Line 1" in v.detail["reason"]


def test_broken_transfer_continuity():
    response = seg("Line 1", "Apple", "Central") + "--\n" + seg("Line 2", "Eagle", "Forest")
    v = judge(make(), response)
    assert v.score == 0.0 and v.detail["stops_on_lines"] and not v.detail["continuity"]
    assert "Central" in v.detail["reason"] and "Eagle" in v.detail["reason"]


def test_membership_only_no_order_check():
    # ReasonMap checks membership, not direction: riding Line 2 "backwards" still counts.
    v = judge(
        make(start="Forest Station", end="Apple Station"),
        seg("Line 2", "Forest", "Central") + "--\n" + seg("Line 1", "Central", "Apple"),
    )
    assert v.score == 1.0


@pytest.mark.parametrize("name", ["Line 1", "1", "Route 1", "line 1", "LINE 01", "**Line 1**", "1号线"])
def test_line_aliases_resolve_to_the_metro_key(name):
    assert judge(make(end="Dragon Station"), seg(name, "Apple", "Dragon")).score == 1.0


def test_metro_keyed_by_bare_number_accepts_line_prefix():
    metro = {"1": METRO["Line 1"], "2": METRO["Line 2"]}
    response = seg("Line 1", "Apple", "Central") + "--\n" + seg("Route 2", "Central", "Forest")
    assert judge(make(metro=metro), response).score == 1.0


def test_line_key_and_station_key():
    assert (
        line_key("Line 1") == line_key("1") == line_key("Route 1") == line_key("地铁1号线(苹果园--环球度假区)") == "1"
    )
    assert line_key("Line 1") != line_key("Line 10")
    assert station_key("Central Station (Transfer Station)") == station_key("central") == "central"
    assert station_key("西单站（换乘站）") == station_key("西单") == "西单"
    assert station_key("Van Cortlandt Park-242 St Station") == "vancortlandtpark242st"


def test_chinese_stations_with_suffix_and_transfer_annotation():
    metro = {
        "1号线": ["苹果园站（换乘站）", "古城站", "西单站（换乘站）"],
        "2号线": ["西单站（换乘站）", "复兴门站", "积水潭站"],
    }
    sample = make(start="苹果园", end="积水潭站", metro=metro, routes={})
    response = seg("Line 1", "苹果园站", "西单站（换乘站）") + "--\n" + seg("2号线", "西单", "积水潭")
    v = judge(sample, response.replace(":", "："))  # full-width colons too
    assert v.score == 1.0
    assert v.detail["map_score"] is None  # no reference plan given


def test_sections_missing_a_core_field_are_dropped():
    response = "Route Name: Line 1\nDeparture Stop: Apple\n--\n" + seg("Line 1", "Apple", "Dragon")
    segments = parse_segments(response)
    assert len(segments) == 1 and segments[0].arrival == "Dragon"
    assert judge(make(end="Dragon Station"), response).score == 1.0


def test_malformed_output_is_unparsed():
    sample = make()
    ev = get_evaluator("route")
    found = ev.extract(sample, "Take Line 1 from Apple to Central, then Line 2 to Forest.")
    assert not found.parsed and "Route Name" in found.issue
    v = ev.score(sample, "Take Line 1 then Line 2")
    assert v.outcome == "unparsed" and v.score == 0.0


@pytest.mark.parametrize(
    "response",
    [
        "Route Name:\nDeparture Stop:\nArrival Stop:",
        "Route Name:   \nDeparture Stop: Apple\nArrival Stop: Central",
        "Route Name: Line 1\nDeparture Stop: \t\nArrival Stop: Central",
        "**Route Name:** Line 1\n**Departure Stop:** Apple\n**Arrival Stop:** **",
    ],
)
def test_blank_core_field_counts_as_missing(response):
    sample = make()
    ev = get_evaluator("route")
    assert parse_segments(response) == []
    found = ev.extract(sample, response)
    assert not found.parsed and "Route Name" in found.issue
    v = ev.score(sample, response)
    assert (v.outcome, v.score) == ("unparsed", 0.0)


def test_blank_section_is_dropped_beside_a_full_one():
    response = "Route Name:\nDeparture Stop:\nArrival Stop:\n--\n" + seg("Line 1", "Apple", "Dragon")
    segments = parse_segments(response)
    assert len(segments) == 1 and segments[0].line == "Line 1"
    assert judge(make(end="Dragon Station"), response).score == 1.0


def test_invalid_gold_is_invalid_sample():
    sample = make()
    sample.gold = {"station_1": "Apple"}
    assert get_evaluator("route").score(sample, TWO_SEGMENTS).outcome == "invalid_sample"


# ---------------------------------------------------------------- map score, by hand


def test_map_score_short_correct_takes_the_best_plan():
    # vs "fast": 1 (endpoints) + 2×(2 line + 1 dep + 1 arr) = 9, cap 10, +10 correct = 19 → 19/20.
    # vs "slow": 1 + (0 + 1 + 0) = 2, +10 = 12 → 0.6; the max is "fast".
    v = judge(make(), TWO_SEGMENTS)
    assert v.detail["map_score"] == pytest.approx(19 / 20)
    assert v.detail["best_plan"] == "fast"


def test_map_score_short_incorrect_route_keeps_partial_credit():
    # Continuity broken (Central → Eagle), so not correct: 1 + (2+1+1) + (2+0+1) = 8 → 8/20.
    response = seg("Line 1", "Apple", "Central") + "--\n" + seg("Line 2", "Eagle", "Forest")
    v = judge(make(), response)
    assert v.score == 0.0 and v.detail["map_score"] == pytest.approx(8 / 20)


def test_map_score_short_is_capped_at_ten_before_the_bonus():
    plan = [
        SEG_1,
        {**SEG_2, "arrival_stop": "Fern"},
        {"route_name": "Line 2", "departure_stop": "Fern", "arrival_stop": "Forest"},
    ]
    response = (
        seg("Line 1", "Apple", "Central")
        + "--\n"
        + seg("Line 2", "Central", "Fern")
        + "--\n"
        + seg("Line 2", "Fern", "Forest")
    )
    v = judge(make(routes={"three": plan}), response)
    # 1 + 3×4 = 13, capped at 10, +10 correct → 20/20.
    assert v.score == 1.0 and v.detail["map_score"] == pytest.approx(1.0)


def test_map_score_long_number_of_via_stops():
    question = "... include the number of via stops: Number of Via Stops: x"
    response = (
        seg("Line 1", "Apple", "Central", "Number of Via Stops: 1\n")
        + "--\n"
        + seg("Line 2", "Central", "Forest", "Number of Via Stops: 3\n")
    )
    v = judge(make(variant="long_num_via", question=question), response)
    # base 9; counts: exact 1 → 4, 3 vs ref 2 → 4 − (1/2)·4 = 2; 9 + 6 = 15 (cap 20) + 20 → 35/40.
    assert v.score == 1.0 and v.detail["variant"] == "long_num_via"
    assert v.detail["map_score"] == pytest.approx(35 / 40)


def test_map_score_long_variant_is_inferred_from_the_question():
    question = "Route Name: Line x\nDeparture Stop: ...\nArrival Stop: ...\nNumber of Via Stops: x"
    sample = make(question=question)
    del sample.gold["variant"]
    response = (
        seg("Line 1", "Apple", "Central", "Number of Via Stops: 1\n")
        + "--\n"
        + seg("Line 2", "Central", "Forest", "Number of Via Stops: 2\n")
    )
    v = judge(sample, response)
    # base 9 + 8 = 17, +20 → 37/40.
    assert v.detail["variant"] == "long_num_via" and v.detail["map_score"] == pytest.approx(37 / 40)


@pytest.mark.parametrize(
    ("question", "variant"),
    [
        ("How do I get there? Include the number of via stops for each route section.", "long_num_via"),
        ("HOW MANY? NUMBER OF VIA STOPS: x", "long_num_via"),
        ("Give the route, including all the via stops of each section.", "long_via"),
        ("List the via-stops too.", "long_via"),
        ("Via Stops: a, b", "long_via"),
        ("Provide only one optimal route, with only the line name and the departure and arrival stations.", "short"),
    ],
)
def test_variant_is_inferred_from_the_question_case_insensitively(question, variant):
    sample = make(question=question)
    del sample.gold["variant"]
    assert route.variant_of(sample) == variant
    sample.gold["variant"] = "short"  # an explicit variant wins over the question
    assert route.variant_of(sample) == "short"


def test_lowercase_long_question_scores_the_via_count():
    question = "... and include the number of via stops for each route section."
    sample = make(question=question)
    del sample.gold["variant"]
    response = (
        seg("Line 1", "Apple", "Central", "Number of Via Stops: 1\n")
        + "--\n"
        + seg("Line 2", "Central", "Forest", "Number of Via Stops: 2\n")
    )
    v = judge(sample, response)
    # as above: base 9 + 8 = 17, +20 → 37/40 (not the short score, 19/20).
    assert v.detail["variant"] == "long_num_via" and v.detail["map_score"] == pytest.approx(37 / 40)


def test_map_score_long_via_stops():
    exact = (
        seg("Line 1", "Apple", "Central", "Via Stops: Bamboo Station\n")
        + "--\n"
        + seg("Line 2", "Central", "Forest", "Via Stops: Fern Station, Fig Station\n")
    )
    v = judge(make(variant="long_via"), exact)
    # hits 3, IoU 1 → (10 + 3)/2 = 6.5; 9 + 6.5 = 15.5, +20 → 35.5/40.
    assert v.detail["map_score"] == pytest.approx(35.5 / 40)
    partial = exact.replace("Fern Station, Fig Station", "Fern, Oak")
    v = judge(make(variant="long_via"), partial)
    # hits 2 (Bamboo, Fern); union {bamboo, fern, fig, oak}, ∩ {bamboo, fern} → IoU 0.5 → (5 + 2)/2 = 3.5.
    # 9 + 3.5 = 12.5, +20 → 32.5/40.
    assert v.detail["map_score"] == pytest.approx(32.5 / 40)


def test_map_score_compares_reference_arrival_not_departure():
    # A reference plan whose arrival matches but departure does not: +1 for the arrival only.
    plan = [{"route_name": "Line 1", "departure_stop": "Bamboo", "arrival_stop": "Dragon"}]
    v = judge(make(end="Dragon Station", routes={"p": plan}), seg("Line 1", "Apple", "Dragon"))
    # 1 + 2 (line) + 0 (dep) + 1 (arr) = 4, +10 → 14/20.
    assert v.detail["map_score"] == pytest.approx(14 / 20)
