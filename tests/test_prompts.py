"""Prompt building: demos as real turns with their own images, seeded option order, presets."""

from __future__ import annotations

from collections import Counter

import pytest

from mmctx.data.disk import load_benchmark
from mmctx.prompts.build import PromptError, build_prompt, shown_options
from mmctx.prompts.messages import ImagePart, TextPart, prompt_fingerprint, render_text
from mmctx.prompts.presets import get_preset

PRESET = get_preset("fewmmbench")


@pytest.fixture(scope="module")
def bench(shapes_bench):
    return load_benchmark(shapes_bench)


def _query(bench, fmt, n_choices=None):
    return next(q for q in bench.queries if q.format == fmt and (n_choices is None or len(q.choices) == n_choices))


def test_demos_are_turns_with_their_own_images_query_last(bench):
    q = _query(bench, "mcqa", 4)
    demos = bench.demos_for(q, "similar", 4)
    p = build_prompt(q, demos, PRESET, "letter", seed=0, root=bench.root)
    roles = [m.role for m in p.messages]
    assert roles == ["system"] + ["user", "assistant"] * 4 + ["user"]
    users = [m for m in p.messages if m.role == "user"]
    for demo, turn in zip(demos, users):
        assert [img.path for img in turn.images] == [str((bench.root / rel).resolve()) for rel in demo.images]
        assert demo.question in turn.text
    assert q.question in users[-1].text
    assert [img.path for img in users[-1].images] == [str((bench.root / rel).resolve()) for rel in q.images]
    # Each demo's assistant turn is the label of its gold answer in the order that demo was shown.
    for demo, answer in zip(demos, [m for m in p.messages if m.role == "assistant"]):
        shown = shown_options(demo, PRESET, 0)
        assert answer.text == shown.labels[shown.gold]
    assert p.demo_ids == tuple(d.id for d in demos)


def test_option_order_is_seeded_per_sample_and_gold_is_tracked(bench):
    q = _query(bench, "mcqa", 4)
    a = shown_options(q, PRESET, seed=0)
    assert a == shown_options(q, PRESET, seed=0)
    assert a.texts[a.gold] == q.answer
    assert sorted(a.order) == list(range(len(q.choices)))
    # The order depends on (seed, id) only, not on the other samples of the run.
    orders = {shown_options(q, PRESET, seed=s).order for s in range(20)}
    assert len(orders) > 5
    # Over many samples the gold lands in every position.
    golds = Counter(shown_options(s, PRESET, 0).gold for s in bench.demos if s.format == "mcqa" and len(s.choices) == 4)
    assert set(golds) == {0, 1, 2, 3}


def test_caption_foil_is_shuffled_binary_is_not(bench):
    cf = [s for s in bench.demos if s.format == "caption_foil"]
    assert {shown_options(s, PRESET, 0).gold for s in cf} == {0, 1}  # the caption is not always first
    for s in (s for s in bench.demos if s.format == "binary"):
        shown = shown_options(s, PRESET, 0)
        assert shown.texts == ("Yes", "No") and shown.labels == ("Yes", "No")


def test_cot_demos_show_rationale_then_answer_line(bench):
    q = _query(bench, "caption_foil")
    demos = bench.demos_for(q, "similar", 2)
    p = build_prompt(q, demos, PRESET, "cot", seed=3, root=bench.root)
    answers = [m.text for m in p.messages if m.role == "assistant"]
    for demo, text in zip(demos, answers):
        shown = shown_options(demo, PRESET, 3)
        assert text.startswith(demo.rationale.reasoning.strip())
        assert text.endswith(f"Answer: {shown.labels[shown.gold]}")
    assert "step by step" in p.messages[-1].text


def test_cot_demo_without_rationale_is_refused(bench):
    q = _query(bench, "caption_foil")
    demo = bench.demos_for(q, "similar", 1)[0].model_copy(update={"rationale": None})
    with pytest.raises(PromptError, match=demo.id):
        build_prompt(q, [demo], PRESET, "cot", seed=0, root=bench.root)


def test_text_style_demos_answer_with_option_text(bench):
    q = _query(bench, "mcqa", 4)
    demos = bench.demos_for(q, "random", 2)
    p = build_prompt(q, demos, PRESET, "text", seed=0, root=bench.root)
    assert [m.text for m in p.messages if m.role == "assistant"] == [d.answer for d in demos]


def test_single_turn_preset_keeps_every_image_in_order(bench):
    q = _query(bench, "mcqa", 4)
    demos = bench.demos_for(q, "similar", 4)
    multi = build_prompt(q, demos, PRESET, "letter", seed=0, root=bench.root)
    single = build_prompt(q, demos, get_preset("fewmmbench-single-turn"), "letter", seed=0, root=bench.root)
    assert [m.role for m in single.messages] == ["system", "user"]
    flat = lambda p: [img.path for m in p.messages for img in m.images]  # noqa: E731
    assert flat(single) == flat(multi) and len(flat(single)) == 5
    assert single.messages[1].text.count("Answer: ") == 4
    assert prompt_fingerprint(single.messages) != prompt_fingerprint(multi.messages)


def test_fingerprint_follows_image_content_not_path(bench, tmp_path):
    q = _query(bench, "mcqa", 4)
    p = build_prompt(q, [], PRESET, "letter", seed=0, root=bench.root)
    img = next(part for part in p.messages[-1].content if isinstance(part, ImagePart))
    copy = tmp_path / "copy.png"
    copy.write_bytes(open(img.path, "rb").read())
    moved = tuple(
        m.__class__(m.role, tuple(ImagePart.from_path(copy) if isinstance(c, ImagePart) else c for c in m.content))
        for m in p.messages
    )
    assert prompt_fingerprint(moved) == prompt_fingerprint(p.messages)
    other = next(s for s in bench.demos if s.images[0] != q.images[0])
    changed = tuple(
        m.__class__(
            m.role,
            tuple(
                ImagePart.from_path(bench.root / other.images[0]) if isinstance(c, ImagePart) else c for c in m.content
            ),
        )
        for m in p.messages
    )
    assert prompt_fingerprint(changed) != prompt_fingerprint(p.messages)
    assert "<image:" in render_text(p.messages)
    assert isinstance(p.messages[-1].content[-1], TextPart)


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown prompt preset"):
        get_preset("nope")


def test_an_image_rewritten_in_place_is_hashed_again(tmp_path):
    import hashlib
    import os

    from mmctx.prompts.messages import ImagePart

    path = tmp_path / "image.png"
    path.write_bytes(b"first content")
    before = ImagePart.from_path(path).sha256
    assert ImagePart.from_path(path).sha256 == before  # cached: the same file, the same hash
    path.write_bytes(b"other content")  # the same size, so only its time tells it changed
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    after = ImagePart.from_path(path).sha256
    assert after != before and after == hashlib.sha256(b"other content").hexdigest()
