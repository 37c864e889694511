"""Surface cues: a feature of the option text that tells the correct option from the others."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fixtures.sources_real import SAMPLES, place_valse_relations_at_scale

from mmctx.curate.cues import SurfaceCue, find_surface_cues
from mmctx.data.sources import source
from mmctx.data.sources.base import SourceContext
from mmctx.schema import Sample

WORDS = "the a dog cat sits on under beside red blue two three man woman table bench runs holds".split()


def pair(task: str, index: int, correct: str, foil: str, rng: random.Random | None = None) -> Sample:
    """A caption/foil item; the stored order of the two is random, as a converter may store it."""
    choices = [correct, foil]
    if rng is not None:
        rng.shuffle(choices)
    return Sample(
        id=f"{task}/{index}", task=task, source="test", format="caption_foil", choices=choices, answer=correct
    )


def mcqa(task: str, index: int, choices: list[str], answer: int) -> Sample:
    return Sample(
        id=f"{task}/{index}",
        task=task,
        source="test",
        format="mcqa",
        question="Which?",
        choices=choices,
        answer=choices[answer],
    )


def sentence(rng: random.Random, lo: int = 3, hi: int = 9) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def dress(rng: random.Random, text: str) -> str:
    """Random first-letter case and random final period: surface features independent of correctness."""
    if rng.random() < 0.5:
        text = text[0].upper() + text[1:]
    return text + "." if rng.random() < 0.5 else text


def fair_pairs(task: str, n: int, rng: random.Random) -> list[Sample]:
    return [pair(task, i, dress(rng, sentence(rng)), dress(rng, sentence(rng)), rng) for i in range(n)]


def fair_mcqa(task: str, n: int, rng: random.Random) -> list[Sample]:
    return [mcqa(task, i, [dress(rng, sentence(rng, 1, 4)) for _ in range(4)], rng.randrange(4)) for i in range(n)]


def named(cues: list[SurfaceCue]) -> set[tuple[str, str]]:
    return {(c.task, c.feature) for c in cues}


def test_fair_data_raises_no_cue():
    rng = random.Random(0)
    samples = []
    for t in range(8):
        samples += fair_pairs(f"pairs{t}", 600, rng)
        samples += fair_mcqa(f"mcqa{t}", 600, rng)
    assert find_surface_cues(samples) == []


def cap(text: str) -> str:
    return text[0].upper() + text[1:]


def test_fair_data_with_few_informative_items_raises_no_cue():
    # Forty tasks where only eight items differ in first-letter case, which one is lower-case
    # decided by a coin: some task is bound to go eight-for-eight, and that alone must not fire.
    rng = random.Random(1)
    samples = []
    for t in range(40):
        for i in range(200):
            correct, foil = sentence(rng), sentence(rng)
            if i >= 8:
                correct, foil = cap(correct), cap(foil)
            elif rng.random() < 0.5:
                foil = cap(foil)
            else:
                correct = cap(correct)
            samples.append(pair(f"t{t}", i, correct, foil, rng))
    assert not [c for c in find_surface_cues(samples) if c.feature == "lowercase_start"]


def test_lowercase_correct_caption_is_flagged_with_counts():
    # The VALSE relations pattern: 70 of 535 pairs differ in first-letter case, the true one always lower.
    rng = random.Random(2)
    samples = []
    for i in range(535):
        text, other = sentence(rng), sentence(rng)
        if i < 70:
            samples.append(pair("spatial_relations", i, text, other[0].upper() + other[1:], rng))
        else:
            samples.append(pair("spatial_relations", i, text[0].upper() + text[1:], other[0].upper() + other[1:], rng))
    cues = [c for c in find_surface_cues(samples) if c.feature == "lowercase_start"]
    assert len(cues) == 1
    cue = cues[0]
    assert (cue.task, cue.informative, cue.hits, cue.samples) == ("spatial_relations", 70, 70, 535)
    assert cue.rate == 1.0 and cue.chance == 0.5 and cue.p_value < 1e-20
    text = cue.describe()
    assert "spatial_relations" in text and "lower-case" in text and "70 of 70" in text and "50%" in text
    assert str(cue) == text and "\n" not in text


def test_a_cue_that_is_never_wrong_fires_on_ten_items_but_not_nine_of_ten():
    # existence in VALSE: 10 of 505 pairs, the lower-case one always true.
    def task(wrong: int) -> list[Sample]:
        rng = random.Random(3)
        samples = []
        for i in range(505):
            text = sentence(rng)
            upper = text[0].upper() + text[1:]
            if i < 10:
                low_is_true = i >= wrong
                samples.append(
                    pair(
                        "object_recognition",
                        i,
                        text if low_is_true else upper,
                        upper + " not" if low_is_true else text + " not",
                        rng,
                    )
                )
            else:
                samples.append(pair("object_recognition", i, upper, upper + " not", rng))
        return samples

    assert ("object_recognition", "lowercase_start") in named(find_surface_cues(task(wrong=0)))
    assert ("object_recognition", "lowercase_start") not in named(find_surface_cues(task(wrong=1)))


def test_trailing_punctuation_on_the_correct_option_is_flagged():
    rng = random.Random(4)
    samples = [pair("counting", i, sentence(rng) + ("." if i % 3 else ""), sentence(rng), rng) for i in range(300)]
    cue = {c.feature: c for c in find_surface_cues(samples)}["trailing_punctuation"]
    assert cue.hits == cue.informative == 200 and "punctuation" in cue.describe()


def test_correct_option_longest_in_mcqa_is_flagged_against_its_own_chance():
    # Four options: by chance the correct one is the (unique) longest a quarter of the time.
    rng = random.Random(5)
    samples = []
    for i in range(400):
        options = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(4)]
        answer = rng.randrange(4)
        if i % 2:  # half the items: the answer gets a longer text
            options[answer] = options[answer] + " " + rng.choice(WORDS) + " indeed"
        samples.append(mcqa("attribute_recognition", i, options, answer))
    cues = {c.feature: c for c in find_surface_cues(samples)}
    longest = cues["longest"]
    assert 0.2 < longest.chance < 0.35 and longest.rate > 0.55
    assert "longest" in longest.describe()


def test_correct_option_never_longest_is_a_cue_too():
    rng = random.Random(6)
    samples = []
    for i in range(300):
        short, long = sentence(rng, 2, 3), sentence(rng, 6, 8)
        samples.append(pair("plurality", i, short, long, rng))
    cues = {c.feature: c for c in find_surface_cues(samples)}
    assert cues["longest"].hits == 0 and cues["longest"].rate == 0.0
    assert "shortest" not in cues  # for pairs, the same finding as "never the longest"


def test_binary_and_open_items_are_not_scored():
    samples = [
        Sample(
            id=f"b{i}",
            task="commonsense",
            source="t",
            format="binary",
            statement="x",
            choices=["Yes", "No"],
            answer="Yes",
        )
        for i in range(200)
    ]
    assert find_surface_cues(samples) == []


def test_items_are_grouped_by_the_given_key():
    rng = random.Random(7)
    biased = [pair("counting", i, sentence(rng) + ".", sentence(rng), rng) for i in range(60)]
    fair = fair_pairs("counting", 60, rng)
    for s in fair:
        s.source = "other"
    for s in biased:
        s.source = "biased"
    cues = find_surface_cues(biased + fair, key=lambda s: f"{s.task}/{s.source}")
    assert {(c.task, c.feature) for c in cues} == {("counting/biased", "trailing_punctuation")}


# -- VALSE, from the real excerpts ------------------------------------------------------------------

needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"real source excerpts not found at {SAMPLES}")


@needs_samples
def test_valse_relations_as_written_carry_the_casing_cue(tmp_path: Path):
    """The check itself, on caption/foil pairs exactly as the real relations records write them."""
    import json

    folder = place_valse_relations_at_scale(tmp_path)
    records = json.loads((folder / "data" / "relations.json").read_text())
    rng = random.Random(8)
    samples = [pair("spatial_relations", i, r["caption"], r["foil"], rng) for i, r in enumerate(records.values())]
    cues = {c.feature: c for c in find_surface_cues(samples)}
    assert (cues["lowercase_start"].informative, cues["lowercase_start"].hits) == (70, 70)


@needs_samples
def test_valse_converter_leaves_no_casing_cue(tmp_path: Path):
    place_valse_relations_at_scale(tmp_path)
    _, convert = source("valse")
    conv = convert(SourceContext(tmp_path))
    assert not conv.errors and len(conv.samples) == 535
    assert not [c for c in find_surface_cues(conv.samples) if c.feature == "lowercase_start"]
