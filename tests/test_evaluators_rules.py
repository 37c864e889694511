"""Rule evaluators: text helpers, choice, numeric, roe, zerobench, reasonmap_plus, courtsi."""

from __future__ import annotations

import pytest

from mmctx.schema import Sample
from mmctx.scoring.evaluators import choice, numeric, spatial, zerobench  # noqa: F401  (registers them)
from mmctx.scoring.evaluators.base import get_evaluator
from mmctx.scoring.evaluators.spatial import MRA_THRESHOLDS, mean_relative_accuracy, parse_point
from mmctx.scoring.evaluators.text import (
    answer_line,
    boxed,
    curly,
    final_answer_text,
    is_plain_number,
    normalize_text,
    numbers_in,
    parse_number,
)


def open_sample(
    subset: str,
    evaluator: str,
    answer_type: str,
    gold,
    *,
    question: str = "Q?",
    answer: str = "",
    level: str = "L0",
    choices: list[str] | None = None,
    meta: dict | None = None,
) -> Sample:
    return Sample(
        id=f"{subset}-1",
        task=subset,
        source=subset,
        format="open",
        level=level,
        answer_type=answer_type,
        gold=gold,
        evaluator=evaluator,
        answer=answer or str(gold),
        question=question,
        choices=choices or [],
        meta=meta or {},
    )


def run(sample: Sample, response: str):
    ev = get_evaluator(sample.evaluator)
    found = ev.extract(sample, response)
    return found, (ev.score(sample, found.answer) if found.parsed else None)


@pytest.mark.parametrize("name", ["choice", "numeric", "roe", "zerobench", "reasonmap_plus", "courtsi"])
def test_registered_as_rule_evaluators(name):
    ev = get_evaluator(name)
    assert ev.name == name and ev.judge is None and ev.free_form is False


# ---------------------------------------------------------------- text helpers


def test_final_answer_text_strips_reasoning_traces():
    assert final_answer_text("<think>Answer: A</think>\nAnswer: B") == "Answer: B"
    assert final_answer_text("◁think▷Answer: A◁/think▷ Answer: C") == "Answer: C"
    assert final_answer_text("<think>Answer: A never closed") == ""


def test_answer_line_takes_the_last_marker_line_in_any_dress():
    assert answer_line("Answer: A\nsome thought\n**Answer:** B") == "B"
    assert answer_line("**Answer**: C") == "C"
    assert answer_line("Answer：D") == "D"  # full-width colon
    assert answer_line("Final Answer: 42") == "42"
    assert answer_line("**Answer:**\n\n  E") == "E"  # value on the next non-empty line
    assert answer_line("The answer: B is likely") is None  # not at a line start
    assert answer_line("Option: B\nReason: because", marker="Option") == "B"


def test_boxed_and_curly_balance_nested_braces():
    assert boxed(r"first \boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert boxed("no box") is None
    assert curly(r"steps {a} ... so {\frac{3}{4}}") == r"\frac{3}{4}"
    assert curly("the answer is {11.90}.") == "11.90"
    assert curly("none here") is None


def test_normalize_text():
    assert normalize_text("The  Eiffel-Tower!") == normalize_text("eiffel tower") == "eiffel tower"
    assert normalize_text("U.S.A.") == "usa"
    assert normalize_text("3.5") != normalize_text("35")
    assert normalize_text("ＡＢＣ") == "abc"  # NFKC


@pytest.mark.parametrize(
    ("text", "value", "percent"),
    [
        ("1,234.5", 1234.5, False),
        ("1 234", 1234.0, False),
        ("1{,}234", 1234.0, False),
        ("1.2e3", 1200.0, False),
        ("1.2×10^3", 1200.0, False),
        ("1.2 x 10^{-3}", 0.0012, False),
        ("1.2·10³", 1200.0, False),
        ("−5", -5.0, False),
        ("(123)", -123.0, False),
        ("Net income: ($1,234)", -1234.0, False),
        ("15.23%", 15.23, True),
        ("12 percent", 12.0, True),
        ("3.5 m", 3.5, False),
        ("$12", 12.0, False),
        ("2 + 3 = 5", 5.0, False),
        ("15.23% (0.1523)", 15.23, True),
        (".5", 0.5, False),
        ("(12)", -12.0, False),
        ("15.23 %", 15.23, True),
        ("1.2×10^3", 1200.0, False),
        ("2×10^3", 2000.0, False),
        ("12,345,678", 12345678.0, False),
        ("1,234, 5", 1234.0, False),  # ", " separates numbers; it is no grouping
        # fractions of two plain integers
        ("1/2", 0.5, False),
        ("3/4", 0.75, False),
        ("-1/2", -0.5, False),
        ("−1/2", -0.5, False),
        ("3 / 4", 0.75, False),
        (r"\frac{1}{2}", 0.5, False),
        (r"\dfrac{3}{4}", 0.75, False),
        ("1/2, 3/4", 0.5, False),
        ("1/2/2020", 1.0, False),  # a date is no fraction (read as before)
        ("0.5/2", 0.5, False),  # nor is a decimal over an integer
        # a single leading zero before a comma is a decimal comma (documented choice)
        ("0,5", 0.5, False),
        ("-0,25", -0.25, False),
        # powers
        ("10^3", 1000.0, False),
        ("10^-3", 0.001, False),
        ("10^{3}", 1000.0, False),
        ("10³", 1000.0, False),
        ("2^10", 1024.0, False),
        ("5 m²", 5.0, False),  # a unit's superscript is not a power of the number
    ],
)
def test_parse_number(text, value, percent):
    parsed = parse_number(text)
    assert parsed.value == pytest.approx(value) and parsed.percent is percent


def test_parse_number_refuses_non_numbers_and_glued_letters():
    assert parse_number("no idea").value is None
    assert parse_number("A3").value is None
    assert numbers_in("15% (0.15)") == [15.0, 0.15]  # an aside in parentheses is not a negative
    assert is_plain_number("11.90") and is_plain_number("$1,234") and not is_plain_number("5 apples")


@pytest.mark.parametrize(
    "text",
    [
        "1,5",  # a decimal comma or a grouping: ambiguous
        "1,23",
        "1,234,56",  # malformed grouping
        "1 234,5",
        "00,5",  # not a single leading zero
        "0,5,6",
        "x = 1,5",  # the stated number is unreadable: no fallback to another number
        "1,5 (about 2)",
        "1/0",
        "10^400",
        "1e400",
    ],
)
def test_parse_number_refuses_ambiguous_and_unreadable_numbers(text):
    assert parse_number(text).value is None


def test_numeric_evaluator_says_unparsed_for_an_ambiguous_comma():
    s = open_sample("X", "numeric", "number", {"value": 1.5})
    v = get_evaluator("numeric").score(s, "1,5")
    assert v.outcome == "unparsed" and v.score == 0.0
    found, _ = run(s, "Answer: 1,234,56")
    assert not found.parsed
    s = open_sample("X", "numeric", "number", {"value": 0.5})
    assert run(s, "Answer: 1/2")[1].score == 1.0
    assert run(s, "Answer: 0,5")[1].score == 1.0
    s = open_sample("X", "numeric", "number", {"value": 1000})
    assert run(s, "Answer: 10^3")[1].score == 1.0
    assert numbers_in("1,5 or 2") == [2.0] and not is_plain_number("1,5") and is_plain_number("1/2")


# ---------------------------------------------------------------- choice

COLORS = ["red", "blue", "green", "yellow"]


def test_choice_answer_line_with_choices():
    s = open_sample("Insight-O3", "choice", "option", "B", choices=COLORS)
    found, v = run(s, "Looking at the image...\nAnswer: **B**")
    assert found.answer == "B" and found.rule == "answer_line"
    assert v.outcome == "scored" and v.score == 1.0 and v.detail["gold"] == "B"
    _, v = run(s, "Answer: (C)")
    assert v.score == 0.0 and v.prediction == "C"


def test_choice_contradictory_or_looping_answer_lines_are_unparsed_not_their_last_flip():
    s = open_sample("Insight-O3", "choice", "option", "A", choices=COLORS)
    for reply in (
        "Answer: A. Answer: B. Answer: C. Answer: D. Answer: A".replace(". ", "\n"),
        "Answer: A\nNo wait.\nAnswer: B\n" * 20,
        "Answer: B\nAnswer: A",
    ):
        found, v = run(s, reply)
        assert not found.parsed and found.rule == "contradictory", reply
        assert v is None and "contradict" in found.issue
    # A restated answer and one announced correction still parse.
    found, v = run(s, "Answer: A\nAnswer: A")
    assert found.answer == "A" and v.score == 1.0
    found, _ = run(s, "Answer: B\nWait, the red one is on the left.\nAnswer: A")
    assert found.answer == "A" and found.rule == "answer_line"


def test_choice_letters_from_question_and_mirbench_option_form():
    question = "Which figure shows the trend?\nA. Figure 1\nB. Figure 2\n(C) Figure 3"
    s = open_sample("MIRBench", "choice", "option", "C", question=question)
    found, v = run(s, "Option: C\nReason: Figure 3 rises monotonically.")
    assert found.rule == "option_line" and v.score == 1.0
    found, _ = run(s, "Option: D\nReason: none of these")
    assert not found.parsed and "not one of the options" in found.issue  # only A–C exist


def test_choice_boxed_and_default_letters():
    s = open_sample("PRISMM-Bench", "choice", "option", "E", question="Pick one.")
    found, v = run(s, r"Therefore \boxed{E}")
    assert found.rule == "boxed" and v.score == 1.0  # A–F when no labels are known
    found, _ = run(s, "Answer: G")
    assert not found.parsed


def test_choice_falls_back_to_the_shared_extractor_on_option_text():
    s = open_sample("Insight-O3", "choice", "option", "C", choices=COLORS)
    found, v = run(s, "The object is clearly green.")
    assert found.answer == "C" and found.rule.startswith("extract_choice") and v.score == 1.0


def test_choice_refuses_two_letters_and_prose():
    s = open_sample("Insight-O3", "choice", "option", "B", choices=COLORS)
    found, _ = run(s, "Answer: B or C")
    assert not found.parsed and "more than one option" in found.issue
    found, _ = run(s, "I am not sure.")
    assert not found.parsed and "Answer: <letter>" in found.issue
    assert get_evaluator("choice").score(s, "A dog").outcome == "unparsed"


# ---------------------------------------------------------------- numeric


def test_numeric_tolerance_and_errors():
    s = open_sample("CourtSI", "numeric", "number", {"value": 100.0, "rel_tol": 0.05})
    found, v = run(s, "Roughly.\nAnswer: 104 m")
    assert found.answer == "104 m" and v.score == 1.0
    assert not v.detail["exact"] and v.detail["within_tolerance"]
    assert v.detail["abs_error"] == pytest.approx(4.0) and v.detail["rel_error"] == pytest.approx(0.04)
    _, v = run(s, "Answer: 106")
    assert v.score == 0.0 and v.detail["abs_error"] == pytest.approx(6.0)


def test_numeric_exact_match_and_percent():
    s = open_sample("X", "numeric", "number", {"value": 0.15})
    assert run(s, "Answer: 15%")[1].score == 1.0  # a % answer against a unitless gold is /100
    s = open_sample("X", "numeric", "number", {"value": 15, "unit": "%"})
    assert run(s, "Answer: 15%")[1].score == 1.0
    s = open_sample("X", "numeric", "number", {"value": 1234.5})
    v = run(s, r"\boxed{1,234.5}")[1]
    assert v.score == 1.0 and v.detail["exact"]


def test_numeric_unparsed_and_invalid():
    s = open_sample("X", "numeric", "number", {"value": 3})
    found, _ = run(s, "Answer: three-ish")
    assert not found.parsed and "holds no number" in found.issue
    assert get_evaluator("numeric").score(s, "many").outcome == "unparsed"
    bad = open_sample("X", "numeric", "number", None, answer="3")
    assert get_evaluator("numeric").score(bad, "3").outcome == "invalid_sample"


def test_numeric_zero_gold_has_no_relative_error():
    s = open_sample("X", "numeric", "number", {"value": 0, "abs_tol": 0.5})
    v = get_evaluator("numeric").score(s, "0.3")
    assert v.score == 1.0 and v.detail["rel_error"] is None


# ---------------------------------------------------------------- roe


def roe_sample(value: float = 15.23, **tol) -> Sample:
    return open_sample("Financial Report ROE", "roe", "number", {"value": value, "unit": "%", **tol}, level="L1")


@pytest.mark.parametrize(
    ("response", "score", "read_as"),
    [
        ("Net profit ... equity multiplier 1.8\nROE: 15.23%", 1.0, "percent sign"),
        ("ROE: 0.1523", 1.0, "fraction"),
        ("ROE: 15.23", 1.0, "percentage points"),
        ("**ROE：** 15.234%", 1.0, "percent sign"),  # equal after rounding to 2 decimals
        ("ROE: 15.2%", 0.0, "percent sign"),
        ("ROE = 0.12 × 1.3 × ... = 15.23%", 1.0, "percent sign"),
        ("净资产收益率（ROE）：15.23%", 1.0, "percent sign"),
    ],
)
def test_roe_percent_rule(response, score, read_as):
    found, v = run(roe_sample(), response)
    assert found.parsed, found.issue
    assert v.score == score and v.detail["read_as"] == read_as


def test_roe_last_marker_wins_and_mae_is_in_points():
    found, v = run(roe_sample(), "ROE: 15.23% (first try)\nWait, recomputing.\nROE: 14.00%")
    assert found.answer == "14.00%"
    assert v.score == 0.0 and v.detail["abs_error"] == pytest.approx(1.23)
    assert v.prediction == "14.00%"


def test_roe_tolerance_and_negative():
    assert run(roe_sample(abs_tol=0.1), "ROE: 15.2%")[1].score == 1.0
    v = run(roe_sample(-3.4), "ROE: -3.40%")[1]
    assert v.score == 1.0
    v = run(roe_sample(-3.4), "ROE: (3.4%)")[1]
    assert v.score == 1.0  # accounting negative


def test_roe_unparsed():
    found, _ = run(roe_sample(), "The company did well.")
    assert not found.parsed and "ROE:" in found.issue
    found, _ = run(roe_sample(), "ROE: not computable")
    assert not found.parsed and "no number" in found.issue
    assert get_evaluator("roe").score(roe_sample(), "n/a").outcome == "unparsed"


# ---------------------------------------------------------------- zerobench


def test_zerobench_curly_and_numeric_match():
    s = open_sample("ZeroBench", "zerobench", "string", "11.90")
    found, v = run(s, "Summing the prices ... {11.9}")
    assert found.answer == "11.9" and found.rule == "curly"
    assert v.score == 1.0 and v.detail["match"] == "numeric"
    assert run(s, "so {$11.90}")[1].score == 1.0
    assert run(s, "so {$11.90 saved}")[1].score == 0.0  # words beside the number: compared as text
    assert run(s, "{12}")[1].score == 0.0
    assert run(s, "{11.9 or 12}")[1].score == 0.0  # two numbers: no numeric reading, text differs


def test_zerobench_text_aliases():
    s = open_sample("ZeroBench", "zerobench", "string", ["Eiffel Tower", "La Tour Eiffel"])
    v = run(s, "It is {the eiffel tower}.")[1]
    assert v.score == 1.0 and v.detail["matched"] == "Eiffel Tower"
    assert run(s, "{la tour eiffel}")[1].score == 1.0
    assert run(s, "{Big Ben}")[1].score == 0.0


def test_zerobench_requires_curly_braces():
    s = open_sample("ZeroBench", "zerobench", "string", "7")
    found, _ = run(s, "Answer: 7")
    assert not found.parsed and "curly braces" in found.issue
    found, _ = run(s, "{}")
    assert not found.parsed and "empty" in found.issue


# ---------------------------------------------------------------- reasonmap_plus


def test_reasonmap_plus_int_from_boxed_and_answer_line():
    s = open_sample("ReasonMap-Plus", "reasonmap_plus", "string", "5")
    found, v = run(s, r"Counting stops... \boxed{3} no wait \boxed{5}")
    assert found.rule == "boxed" and v.score == 1.0 and v.detail["kind"] == "int"
    assert run(s, "Answer: 5 stations")[1].score == 1.0
    assert run(s, "Answer: 4")[1].score == 0.0
    assert run(s, "Answer: 5.5")[1].score == 0.0


def test_reasonmap_plus_yes_no():
    s = open_sample("ReasonMap-Plus", "reasonmap_plus", "string", "yes")
    found, v = run(s, "Both are on Line 2, so the answer is Yes. They share a line.")
    assert found.rule == "answer_is" and v.score == 1.0
    assert run(s, "Answer: No")[1].score == 0.0
    torf = open_sample("ReasonMap-Plus", "reasonmap_plus", "string", "1", meta={"type": "TorF1"})
    assert run(torf, "Answer: true")[1].score == 1.0
    assert get_evaluator("reasonmap_plus").score(s, "maybe").outcome == "unparsed"


def test_reasonmap_plus_letter_and_counting1_index():
    s = open_sample("ReasonMap-Plus", "reasonmap_plus", "string", "C", question="How many?\nA. 1\nB. 2\nC. 3\nD. 4")
    assert run(s, "Answer: C")[1].score == 1.0
    assert run(s, "Answer: (B)")[1].score == 0.0
    counting = open_sample("ReasonMap-Plus", "reasonmap_plus", "string", "2", meta={"type": "Counting1"})
    v = run(counting, r"\boxed{C}")[1]
    assert v.score == 1.0 and v.detail["gold"] == "C"


def test_reasonmap_plus_unparsed():
    s = open_sample("ReasonMap-Plus", "reasonmap_plus", "string", "5")
    found, _ = run(s, "I looked at the map for a long time and\ncould not decide anything.")
    assert not found.parsed and "boxed" in found.issue
    assert get_evaluator("reasonmap_plus").score(s, "several").outcome == "unparsed"


# ---------------------------------------------------------------- courtsi


def test_mra_thresholds_and_values():
    assert MRA_THRESHOLDS == pytest.approx([0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95])
    assert mean_relative_accuracy(10, 10) == 1.0
    assert mean_relative_accuracy(12, 10) == pytest.approx(0.6)  # rel 0.2 < 1−θ for θ ≤ 0.75: 6 of 10
    assert mean_relative_accuracy(10.5, 10) == pytest.approx(0.9)  # rel 0.05 is not < 0.05
    assert mean_relative_accuracy(20, 10) == 0.0
    assert mean_relative_accuracy(-8, -10) == pytest.approx(0.6)  # relative to |y|: the sign does not matter
    assert mean_relative_accuracy(0, 0) == 1.0 and mean_relative_accuracy(0.1, 0) == 0.0


def test_courtsi_number_is_mra():
    s = open_sample("CourtSI", "courtsi", "number", {"value": 10.0, "unit": "m"})
    found, v = run(s, "The distance is about 12 meters.\nAnswer: 12 m")
    # CourtSI's slack: (2 - 0.15) / 10 = 0.185 < 1 - θ for θ ≤ 0.80, 7 of 10 (plain MRA: 6)
    assert v.detail["metric"] == "MRA" and v.score == pytest.approx(0.7)
    assert get_evaluator("courtsi").score(s, "far").outcome == "unparsed"


def test_courtsi_option_is_ma():
    s = open_sample("CourtSI", "courtsi", "option", "A", question="Who is closer to the net?\nA. Player 1\nB. Player 2")
    found, v = run(s, "Answer: A")
    assert v.score == 1.0 and v.detail["metric"] == "MA"
    assert run(s, "Answer: B")[1].score == 0.0


def test_courtsi_point_is_loca():
    s = open_sample("CourtSI", "courtsi", "point", {"xy": [1.0, 2.0], "radius": 0.5})
    found, v = run(s, "The ball lands at\nAnswer: (1.3, 2.3)")
    assert found.answer == "(1.3, 2.3)" and v.detail["metric"] == "LocA"
    assert v.score == 1.0 and v.detail["distance"] == pytest.approx(0.18**0.5)
    assert run(s, "Answer: (1.5, 2)")[1].score == 0.0  # on the radius is outside (CourtSI: distance < r)
    assert run(s, "Answer: [3, 4]")[1].score == 0.0
    assert run(s, "Answer: 1.2, 2.1")[1].score == 1.0
    found, _ = run(s, "Answer: near the net")
    assert not found.parsed and "(x, y)" in found.issue
    assert parse_point("(−1.5, 2)") == (-1.5, 2.0)
    assert parse_point("[0.5; 3]") == (0.5, 3.0)
    assert parse_point("somewhere near 3") is None
