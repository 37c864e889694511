"""CoT rationale generation: injection after a wrong answer, the quality filter, provenance."""

from __future__ import annotations

import re

import pytest

from mmctx.curate.rationales import apply_rationales, generate_rationales, judge_response, summarize_outcomes
from mmctx.data.disk import load_benchmark
from mmctx.models import load_backend
from mmctx.models.base import Capabilities, Generation, ModelInfo
from mmctx.prompts.build import shown_options
from mmctx.prompts.presets import get_preset
from mmctx.schema import Benchmark

PRESET = get_preset("fewmmbench")


class ScriptedTutor:
    """A backend that follows the protocol and answers by a fixed script, so each path of the loop is reached.

    ``behaviour(sample_text, injected_gold)`` returns the reply text.
    """

    def __init__(self, behaviour, truncate: bool = False):
        self.info = ModelInfo("scripted-tutor", "1", "test")
        self.capabilities = Capabilities(None, True, False, True, None)
        self.behaviour, self.truncate, self.calls = behaviour, truncate, 0

    def generate(self, requests):
        out = []
        for r in requests:
            self.calls += 1
            text = r.messages[-1].text
            options = dict(re.findall(r"^([A-H])\. (.+)$", text, flags=re.M))
            gold = re.search(r'The correct answer is "(.+?)"', text)
            image = r.messages[-1].images[0].path if r.messages[-1].images else ""
            reply = self.behaviour(options, gold.group(1) if gold else None, image)
            out.append(Generation(text=reply, output_tokens=10, truncated=self.truncate))
        return out

    def score(self, requests):
        raise NotImplementedError


def label_of(options, text):
    return next(label for label, t in options.items() if t == text)


def wrong_then_taught(options, gold, image):
    if gold is None:  # first attempt: a confident wrong answer (the last option that is not... anything)
        return "It looks like this to me.\nAnswer: " + sorted(options)[0] if len(options) > 1 else "Answer: A"
    return f"Looking at the image, the shapes and colours show that {gold} is right.\nAnswer: {label_of(options, gold)}"


@pytest.fixture(scope="module")
def demos(shapes_bench):
    bench = load_benchmark(shapes_bench)
    shown = {k for q in bench.queries for k in q.demo_keys["similar"][:4]}  # demos a 4-shot setting shows
    return bench, [d for d in bench.demos if d.format in ("mcqa", "caption_foil") and d.id in shown][:12]


def test_wrong_answers_get_the_gold_injected_and_are_then_kept(demos):
    bench, samples = demos
    tutor = ScriptedTutor(wrong_then_taught)
    outcomes = generate_rationales(samples, bench.root, tutor, PRESET, seed=0, max_attempts=3)
    for s, o in zip(samples, outcomes):
        shown = shown_options(s, PRESET, 0)
        first_right = shown.labels[shown.gold] == sorted(shown.labels)[0]
        assert o.status == "kept" and o.rationale.answer == s.answer
        assert o.attempts == (1 if first_right else 2)
        assert o.rationale.injected == (not first_right)
        assert o.rationale.generator == "scripted-tutor"
        assert "Answer:" not in o.rationale.reasoning
    assert 1 <= sum(o.rationale.injected for o in outcomes) < len(samples)
    assert tutor.calls == len(samples) + sum(o.attempts == 2 for o in outcomes)


def test_never_right_is_excluded_after_max_attempts_and_cot_demos_skip_it(demos):
    bench, samples = demos
    gold_of = {str((bench.root / s.images[0]).resolve()): s.answer for s in samples}

    def stubborn(options, injected, image):  # always names an option other than the gold one
        wrong = next(label for label, text in options.items() if text != gold_of[image])
        return f"I looked at it for quite a long time indeed.\nAnswer: {wrong}"

    stubborn = ScriptedTutor(stubborn)
    outcomes = generate_rationales(samples[:4], bench.root, stubborn, PRESET, max_attempts=2)
    assert all(o.attempts == 2 and o.rationale is None for o in outcomes)
    assert summarize_outcomes(outcomes).get("wrong_answer", 0) == sum(o.status == "wrong_answer" for o in outcomes)
    updated = apply_rationales(bench.demos, outcomes)
    marked = {d.id: d for d in updated}
    assert all(
        marked[o.sample_id].rationale is None and marked[o.sample_id].meta["rationale_status"] == o.status
        for o in outcomes
    )
    # A CoT setting now skips the excluded demo and takes the next similar one with a rationale.
    excluded = outcomes[0].sample_id
    query = next(q for q in bench.queries if excluded in q.demo_keys["similar"][:4])
    new = Benchmark(bench.name, bench.queries, updated, bench.root)
    chosen = [d.id for d in new.demos_for(query, "similar", 4, need_rationale=True)]
    assert excluded not in chosen and len(chosen) == 4
    assert excluded in [d.id for d in new.demos_for(query, "similar", 4)]


def test_filter_rejects_truncated_unmarked_and_bare_answers(demos):
    bench, samples = demos
    shown = shown_options(samples[0], PRESET, 0)
    gold_label = shown.labels[shown.gold]
    reasoning = "The image shows three objects and the question asks about one of them, so this holds."
    assert judge_response(f"{reasoning}\nAnswer: {gold_label}", False, shown, 5) == ("kept", reasoning)
    assert judge_response(f"{reasoning}\nAnswer: {gold_label}", True, shown, 5)[0] == "truncated"
    assert judge_response(f"Answer: {gold_label}", False, shown, 5)[0] == "too_short"
    assert judge_response(f"{reasoning} So it is {shown.texts[shown.gold]}.", False, shown, 5)[0] == "no_answer_line"
    assert judge_response(f"<think>hmm</think>{reasoning}\nAnswer: {gold_label}", False, shown, 5)[0] == "kept"
    tutor = ScriptedTutor(wrong_then_taught, truncate=True)
    outcomes = generate_rationales(samples[:2], bench.root, tutor, PRESET, max_attempts=3)
    assert [o.status for o in outcomes] == ["truncated", "truncated"] and all(o.attempts == 3 for o in outcomes)


def test_a_real_tiny_model_runs_the_loop_end_to_end(demos):
    bench, samples = demos
    backend = load_backend("builtin:tiny-llava", device="cpu", batch_size=4)
    outcomes = generate_rationales(samples[:3], bench.root, backend, PRESET, max_attempts=2, max_new_tokens=12)
    assert len(outcomes) == 3
    # Random weights never write a complete, correct rationale: each is excluded, with a reason.
    assert all(o.rationale is None and o.attempts == 2 and o.status != "kept" for o in outcomes)
    assert all(o.last_response for o in outcomes)


# Every common reasoning-trace form: whole blocks of each tag, a trace whose opening tag was in
# the prompt (closing tag only), and a trace cut off by the token limit (opening tag only).
TRACE_FORMS = [
    "<think>I wonder whether it is the other one.</think>{body}",
    "<thinking>I wonder whether it is the other one.</thinking>{body}",
    "<reasoning>I wonder whether it is the other one.</reasoning>{body}",
    "<reflection>I wonder whether it is the other one.</reflection>{body}",
    "<Thinking>\nI wonder whether it is the other one.\n</Thinking >\n{body}",
    "I wonder whether it is the other one.\n</thinking>\n{body}",
    "{body}\n<reasoning>I wonder whether it is the other one",
    "<thinking>outer <reflection>I wonder whether it is the other one.</reflection> done</thinking>{body}",
]


@pytest.mark.parametrize("form", TRACE_FORMS)
def test_reasoning_traces_never_reach_a_kept_rationale(demos, form):
    _, samples = demos
    shown = shown_options(samples[0], PRESET, 0)
    reasoning = "The image shows three objects and the question asks about one of them, so this holds."
    status, kept = judge_response(form.format(body=f"{reasoning}\nAnswer: {shown.labels[shown.gold]}"), False, shown, 5)
    assert (status, kept) == ("kept", reasoning)


def test_a_rationale_with_contradictory_final_answers_is_not_kept(demos):
    _, samples = demos
    shown = shown_options(samples[0], PRESET, 0)
    gold, other = shown.labels[shown.gold], next(label for label in shown.labels if label != shown.labels[shown.gold])
    reasoning = "The image shows three objects and the question asks about one of them, so this holds."
    assert judge_response(f"{reasoning}\nAnswer: {other}\nAnswer: {gold}", False, shown, 5)[0] == "contradictory"


def test_a_backend_failure_on_one_demo_is_its_error_and_the_others_are_kept(demos):
    bench, samples = demos
    broken = str((bench.root / samples[1].images[0]).resolve())

    def fails_on_one(options, gold, image):
        if image == broken:
            raise RuntimeError("the server dropped this request")
        return wrong_then_taught(options, gold, image)

    outcomes = generate_rationales(samples[:4], bench.root, ScriptedTutor(fails_on_one), PRESET, max_attempts=2)
    assert (outcomes[1].status, outcomes[1].attempts) == ("error", 2)
    assert outcomes[1].last_response == "RuntimeError: the server dropped this request"
    assert all(o.status == "kept" for i, o in enumerate(outcomes) if i != 1)
