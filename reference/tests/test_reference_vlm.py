"""The shapes-world reference VLM trainer: conversations rendered exactly as evaluation renders
them, scene labels for the vision pre-stage, and a few training steps that save a loadable model."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace

import pytest
from mmctx_reference.vlm import Architecture, Mixture, feature_names, label_classes, patch_features, patch_labels

SMALL = Architecture(
    scale_factor=3, vision_hidden=48, vision_layers=1, vision_heads=2, hidden=80, layers=2, intermediate=128
)


def _feature(t, name: str) -> float:
    return float(t[..., feature_names().index(name)].sum())


SMALL_RED_CIRCLE = {"id": 0, "shape": "circle", "colour": "red", "size": "small", "x": 12, "y": 68, "r": 8}
LARGE_BLUE_STAR = {"id": 1, "shape": "star", "colour": "blue", "size": "large", "x": 70, "y": 24, "r": 13}
ONE_FRAME = {
    "frame_size": 96,
    "separator": 2,
    "frames": [{"objects": [SMALL_RED_CIRCLE, LARGE_BLUE_STAR], "arrows": [[0, 1]]}],
}


def _patch(row: int, col: int) -> int:
    return row * 12 + col  # 96 px in 8 px patches, row-major as the vision tower sees them


def test_patch_features_bind_colour_and_size_to_shape_per_object():
    t = patch_features(ONE_FRAME, 96, 8)
    assert t.shape == (144, len(feature_names()))
    inside, outside = t[_patch(8, 1)], t[_patch(0, 0)]  # the circle covers (8..16, 64..72) entirely
    share = _feature(inside, "circle count")  # the circle's share of its own area
    assert 0.2 < share < 0.5 and abs(_feature(inside, "circle x") - share * (2 * 12 / 96 - 1)) < 1e-6
    assert _feature(inside, "red circle") == share and _feature(inside, "small circle") == share
    assert _feature(inside, "blue circle") == 0 and _feature(inside, "circle arrow tail") == share
    assert _feature(outside, "red circle") == 0 and _feature(outside, "image") == 1
    # Summed over the patches, each object counts once whatever its size.
    for name in ("red circle", "small circle", "blue star", "large star", "star arrow head", "circle arrow tail"):
        assert _feature(t, name) == pytest.approx(1), name
    assert _feature(t, "star arrow tail") == 0
    assert _feature(t, "red star") == 0 and _feature(t, "blue circle") == 0 and _feature(t, "small star") == 0


def test_coverage_weighted_features_measure_what_a_patch_shows():
    t = patch_features(ONE_FRAME, 96, 8, "coverage")
    inside = t[_patch(8, 1)]
    assert _feature(inside, "red circle") == 1 and _feature(inside, "small circle") == 1
    assert _feature(inside, "circle arrow tail") == 1 and _feature(inside, "circle count") < 0.5
    # Summed over the patches, each pair is its object's area in patches (the circle is drawn
    # with its bounding box's pixels included: π (r + ½)² / 64).
    assert abs(_feature(t, "red circle") - math.pi * 8.5**2 / 64) < 0.15
    assert _feature(t, "blue star") > 1.5 and _feature(t, "large star") == _feature(t, "blue star")
    with pytest.raises(ValueError, match="weight"):
        patch_features(ONE_FRAME, 96, 8, "area")
    # Counts and positions add up over the image: one circle at (12, 68), one star at (70, 24).
    assert _feature(t, "circle count") == pytest.approx(1) and _feature(t, "star count") == pytest.approx(1)
    assert _feature(t, "circle x") == pytest.approx(2 * 12 / 96 - 1) and _feature(t, "star y") == pytest.approx(
        2 * 24 / 96 - 1
    )


def test_multi_frame_strips_are_squashed_like_the_processor_does():
    obj = {"id": 0, "shape": "square", "colour": "green", "size": "small", "x": 48, "y": 48, "r": 8}
    meta = {"frame_size": 96, "separator": 2, "frames": [{"objects": [obj]} for _ in range(4)]}
    t = patch_features(meta, 96, 8)
    covered = {(p // 12, p % 12) for p in range(144) if _feature(t[p], "green square") > 0}
    # Four frames side by side in a 390 px strip squashed to 96 px: each frame's square lands in
    # its own patch column (x = (98 i + 48) · 96 / 390), in rows 5 and 6 (y = 48 ± 6.8).
    assert covered == {(row, col) for row in (5, 6) for col in (1, 4, 7, 10)}
    assert _feature(t, "square count") == pytest.approx(4)
    assert _feature(t[[_patch(r, 1) for r in (5, 6)]], "square x") == pytest.approx(2 * 48 / 390 - 1)


def test_patch_labels_name_the_pair_shape_and_size_covering_most_of_the_patch():
    from mmctx.data.shapes import COLOURS, SHAPES, SIZES

    labels = patch_labels(patch_features(ONE_FRAME, 96, 8, "coverage"))
    pair, shape, size = labels[_patch(8, 1)].tolist()
    assert pair == 1 + list(COLOURS).index("red") * len(SHAPES) + SHAPES.index("circle")
    assert shape == 1 + SHAPES.index("circle") and size == 1 + list(SIZES).index("small")
    assert labels[_patch(0, 0)].tolist() == [0, 0, 0]
    star = labels[_patch(3, 8)].tolist()  # the star's centre patch (64..72, 24..32)
    assert star[0] == 1 + list(COLOURS).index("blue") * len(SHAPES) + SHAPES.index("star")
    assert star[1] == 1 + SHAPES.index("star") and star[2] == 1 + list(SIZES).index("large")


def test_the_size_label_is_that_of_the_labelled_shape():
    """A patch mostly covered by a large red circle and partly by a small square is a large
    circle, whatever covers the rest of it."""
    import torch

    from mmctx.data.shapes import COLOURS, SHAPES, SIZES

    f = torch.zeros(1, len(feature_names()))
    f[0, feature_names().index("red circle")] = f[0, feature_names().index("large circle")] = 0.4
    f[0, feature_names().index("blue square")] = 0.3
    f[0, feature_names().index("green square")] = 0.3  # more small square than large circle in all
    f[0, feature_names().index("small square")] = 0.6
    pair, shape, size = patch_labels(f)[0].tolist()
    assert pair == 1 + list(COLOURS).index("red") * len(SHAPES) + SHAPES.index("circle")
    assert shape == 1 + SHAPES.index("circle") and size == 1 + list(SIZES).index("large")
    assert [n - 1 for n in label_classes()] == [len(COLOURS) * len(SHAPES), len(SHAPES), len(SIZES)]


def test_arrow_roles_label_the_source_and_target_objects_own_patches():
    from mmctx.data.shapes import SHAPES

    labels = patch_labels(patch_features(ONE_FRAME, 96, 8, "coverage"), roles=True)
    assert labels.shape[-1] == 5 and labels[..., :3].equal(patch_labels(patch_features(ONE_FRAME, 96, 8, "coverage")))
    assert labels[_patch(8, 1)].tolist()[3:] == [1 + SHAPES.index("circle"), 0]  # the arrow starts at the circle
    assert labels[_patch(3, 8)].tolist()[3:] == [0, 1 + SHAPES.index("star")]  # and ends at the star
    assert labels[_patch(0, 0)].tolist() == [0] * 5
    no_arrow = copy.deepcopy(ONE_FRAME)
    no_arrow["frames"][0]["arrows"] = []
    assert patch_labels(patch_features(no_arrow, 96, 8, "coverage"), roles=True)[..., 3:].eq(0).all()
    assert [n - 1 for n in label_classes(roles=True)][3:] == [len(SHAPES), len(SHAPES)]


def test_arrow_scenes_get_their_share_of_stage_one_draws_each_kind_equally():
    from mmctx_reference.vlm import arrow_scene_weights

    no_arrow = copy.deepcopy(ONE_FRAME)
    no_arrow["frames"][0]["arrows"] = []
    weights = arrow_scene_weights([no_arrow, ONE_FRAME, no_arrow, no_arrow], 0.4)
    assert weights.tolist() == pytest.approx([0.2, 0.4, 0.2, 0.2])
    assert arrow_scene_weights([no_arrow, ONE_FRAME], 0.0) is None  # uniform, as shipped
    assert arrow_scene_weights([ONE_FRAME, ONE_FRAME], 0.5) is None  # one kind: nothing to share
    with pytest.raises(ValueError, match=r"share of stage 1 must be in \[0, 1\), not 1"):
        arrow_scene_weights([no_arrow, ONE_FRAME], 1)


def test_stage_one_draws_only_images_its_weights_allow(small_vlm):
    """Images a weight of 0 leaves out are never drawn: here they are NaN, so one draw of them
    would make the loss NaN, as it does when every image may be drawn. (The linear phase's start,
    a least-squares read-out, sees every image, so only the class phase is run.)"""
    import torch
    from mmctx_reference.vlm import pretrain_vision

    model, pixels, features, labels = _model_and_images(small_vlm)
    poisoned = pixels.clone()
    poisoned[2:] = float("nan")
    weights = torch.tensor([1.0, 1.0] + [0.0] * (len(pixels) - 2), dtype=torch.float64)
    kept = pretrain_vision(copy.deepcopy(model), poisoned, features, labels, 5, 8, 5e-3, 0, weights=weights)
    assert len(kept) == 5 and all(math.isfinite(x) for x in kept)
    uniform = pretrain_vision(model, poisoned, features, labels, 1, 8, 5e-3, 0)
    assert math.isnan(uniform[0])


def test_exact_arrow_ends_replace_only_the_arrow_directions_of_a_token():
    import torch
    from mmctx_reference.vlm import feature_basis, token_scale, with_exact_arrow_ends

    basis, scale, names = feature_basis(128, 0), token_scale(144), feature_names()
    exact = patch_features(ONE_FRAME, 96, 8).sum(0)
    noisy = exact.clone()
    tail, head = names.index("circle arrow tail"), names.index("star arrow head")
    noisy[[tail, head]] = torch.tensor([0.4, 0.6])  # the tower's ends: shrunk
    noisy[names.index("star arrow tail")] = 0.3  # and one that is not there
    token = (basis @ (scale * noisy))[None] + 0.01 * torch.randn(1, 128, generator=torch.Generator().manual_seed(0))
    (fixed,) = with_exact_arrow_ends({"a.png": token}, {"a.png": exact}, basis, scale).values()
    read, before = (fixed @ basis)[0] / scale, (token @ basis)[0] / scale
    ends = [i for i, n in enumerate(names) if " arrow " in n]
    assert torch.allclose(read[ends], exact[ends], atol=1e-4)
    others = [i for i in range(len(names)) if i not in ends]
    assert torch.allclose(read[others], before[others], atol=1e-4)  # the rest, noise included, as it was
    orthogonal = token - (token @ basis) @ basis.T
    assert torch.allclose(fixed - (fixed @ basis) @ basis.T, orthogonal, atol=1e-4)
    with pytest.raises(ValueError, match="one image token an image; b.png has 4"):
        with_exact_arrow_ends({"b.png": token.repeat(4, 1)}, {"b.png": exact}, basis, scale)


def test_arrow_ends_read_back_compare_the_two_joined_shapes():
    from mmctx_reference.vlm import arrow_ends_read

    read = patch_features(ONE_FRAME, 96, 8).sum(0)
    assert arrow_ends_read([read], [ONE_FRAME]) == (1.0, 1.0)
    swapped, names = read.clone(), feature_names()
    for role in ("arrow tail", "arrow head"):
        a, b = names.index(f"circle {role}"), names.index(f"star {role}")
        swapped[[a, b]] = read[[b, a]]
    assert arrow_ends_read([read, swapped], [ONE_FRAME, ONE_FRAME]) == (0.5, 0.5)
    no_arrow = copy.deepcopy(ONE_FRAME)
    no_arrow["frames"][0]["arrows"] = []
    assert arrow_ends_read([read], [no_arrow]) == (None, None)


@pytest.fixture(scope="module")
def small_vlm(tmp_path_factory):
    """A small training benchmark and a random-weight model of the trainer's family on it."""
    from mmctx_reference.vlm import build_shapes_tokenizer, build_shapes_vlm, prompt_corpus, training_benchmark

    root = tmp_path_factory.mktemp("shapes-vlm")
    bench = training_benchmark(root / "bench", seed=0, queries_per_task=2, pool_per_task=10)
    tokenizer = build_shapes_tokenizer(prompt_corpus(bench))
    return bench, build_shapes_vlm(root / "model", tokenizer, SMALL, seed=0)


@pytest.mark.parametrize("shots,style", [(0, "letter"), (0, "text"), (3, "cot"), (2, "letter")])
def test_training_conversations_are_what_the_hf_backend_sees(small_vlm, shots, style):
    from mmctx_reference.vlm import Renderer, load_for_training, reply_text, with_rationale

    from mmctx.models.hf import HFBackend
    from mmctx.prompts.build import build_prompt, shown_options
    from mmctx.prompts.presets import get_preset

    bench, path = small_vlm
    _, processor, adapter = load_for_training(path)
    renderer = Renderer(processor, adapter, bench.root)
    query = with_rationale(bench.queries[3])
    demos = bench.demos_for(query, "similar", shots, need_rationale=style == "cot") if shots else []
    conv = renderer.render(query, demos, style, seed=7)

    backend = HFBackend(str(path), device="cpu", dtype="float32")
    built = build_prompt(query, demos, get_preset("fewmmbench"), style, 7, bench.root)
    messages, images = backend._hf_messages(built.messages)
    prompt = backend._process([backend._template(messages, generation_prompt=True)], [images])["input_ids"][0].tolist()
    first_reply = conv.final.index(True)
    assert list(conv.ids[:first_reply]) == prompt  # the evaluation prompt, token for token
    reply = processor.tokenizer.decode([t for t, f in zip(conv.ids, conv.final) if f])
    shown = shown_options(query, get_preset("fewmmbench"), 7)
    assert reply == f" {reply_text(query, shown, style)}<end_of_utterance>"
    assert reply.removesuffix("<end_of_utterance>").endswith(shown.texts[shown.gold])  # text, never a letter
    assert len(conv.images) == shots + 1


def test_stage_two_turns_to_spatial_relations_alone_then_keeps_them_frequent():
    from mmctx_reference.vlm import CURRICULUM, DRILLED, RESTART, SPATIAL_TASKS, Phase, mixture_at

    base = Mixture(tokens_per_batch=999)
    drawn = [mixture_at(step, 10, base, CURRICULUM) for step in range(10)]
    assert [(m.focus, m.drill) for m in drawn] == [(0.5, 0.0)] * 6 + [(0.0, 1.0)] + [(0.35, 0.3)] * 3
    assert {m.drill_tasks for m in drawn} == {SPATIAL_TASKS}
    assert mixture_at(0, 10, base, CURRICULUM).tokens_per_batch == 999  # only the sources change
    assert mixture_at(5, 10, base, [Phase(0.5, focus=0.0)]) == base  # past the last phase: the base mixture
    restart = [mixture_at(step, 10, base, RESTART) for step in range(10)]
    assert [(m.focus, m.drill) for m in restart] == [(0.25, 0.5)] * 6 + [(0.35, 0.3)] * 4
    assert {m.drill_tasks for m in restart} == {DRILLED}


def _card_sources(card: str) -> dict[int, str]:
    """Step (from 0) → the sources the card's curriculum text names for it."""
    said = {}
    for part in card.split("; "):
        span, sources = part.split(": ")
        first, last = map(int, span.removeprefix("steps ").split("–"))
        said.update({step: sources for step in range(first - 1, last)})
    return said


def _in_words(m: Mixture) -> str:
    drilled = ", ".join(m.drill_tasks)
    return f"only {drilled}" if m.drill == 1 else f"{m.focus:.0%} F" + (f", {m.drill:.0%} {drilled}" if m.drill else "")


@pytest.mark.parametrize("steps", [10, 4, 3])
def test_the_card_names_the_steps_each_source_was_drawn_for(steps):
    """The card's phase ranges are the steps `mixture_at` gives each phase, also in short runs
    where a phase is empty or its end is not a whole step; the restart's continue the count."""
    from dataclasses import asdict

    from mmctx_reference.train import _curriculum
    from mmctx_reference.vlm import CURRICULUM, RESTART, Phase, mixture_at

    curriculum = [*CURRICULUM[:2], Phase(0.9, focus=0.35, drill=0.3)]  # leaves a tail to the base mixture
    metrics = {
        "steps": steps,
        "restart_steps": steps + 1,
        "mixture": asdict(Mixture()),
        "curriculum": [asdict(p) for p in curriculum],
        "restart": [asdict(p) for p in RESTART],
        "focus_tasks": ["F"],
    }
    metrics = json.loads(json.dumps(metrics))  # as metrics.json gives them back (tuples become lists)
    said = _card_sources(_curriculum(metrics))
    assert said == {step: _in_words(mixture_at(step, steps, Mixture(), curriculum)) for step in range(steps)}
    said = _card_sources(_curriculum(metrics, "restart"))
    assert said == {steps + s: _in_words(mixture_at(s, steps + 1, Mixture(), RESTART)) for s in range(steps + 1)}


def test_prefetched_batches_are_the_ones_drawn_inline_in_order():
    """Made ahead on a thread, items drawn from one generator come out as drawn inline, however
    long each takes; an error is raised at its item; a caller that stops early stops the thread."""
    import random
    import threading
    import time

    from mmctx_reference.vlm import prefetched

    def maker(rng):
        def make(i):
            time.sleep(rng.random() / 500)  # items take uneven times, as batches do
            return i, rng.random()

        return make

    make = maker(random.Random(7))
    inline = [make(i) for i in range(50)]
    assert list(prefetched(maker(random.Random(7)), 50, depth=3)) == inline

    def fails_at_3(i):
        if i == 3:
            raise ValueError("batch 3 is bad")
        return i

    got = []
    with pytest.raises(ValueError, match="batch 3 is bad"):
        for item in prefetched(fails_at_3, 10):
            got.append(item)
    assert got == [0, 1, 2]

    def producers():
        return [t for t in threading.enumerate() if t.name == "mmctx-prefetch"]

    assert producers() == []  # the two runs above ended theirs
    items = prefetched(lambda i: i, 1000, depth=2)
    assert next(items) == 0 and len(producers()) == 1
    items.close()  # the caller stops after one of a thousand
    assert producers() == []  # the producer, blocked on a full queue, ended


def test_a_batchs_queries_come_from_the_drilled_tasks_as_often_as_the_mixture_says(small_vlm):
    import dataclasses
    import random

    from mmctx_reference.vlm import (
        DRILLED,
        FOCUS_TASKS,
        SPATIAL_TASKS,
        QueryPools,
        Renderer,
        draw_batch,
        load_for_training,
    )

    bench, path = small_vlm
    _, processor, adapter = load_for_training(path)
    renderer = Renderer(processor, adapter, bench.root)
    task_of = {str((bench.root / s.images[0]).resolve()): s.task for s in [*bench.queries, *bench.demos]}

    def query_tasks(mixture, batches):
        rng = random.Random(0)
        return [
            task_of[c.images[-1]] for _ in range(batches) for c in draw_batch(rng, QueryPools(bench), renderer, mixture)
        ]

    alone = query_tasks(Mixture(focus=0.0, drill=1.0, tokens_per_batch=400), 5)
    assert set(alone) == set(SPATIAL_TASKS)
    everything_drilled = Mixture(focus=0.0, drill=1.0, drill_tasks=DRILLED, tokens_per_batch=400)
    assert set(query_tasks(everything_drilled, 10)) == set(DRILLED)

    def shares(focus, drill):
        tasks = query_tasks(Mixture(focus=focus, drill=drill, tokens_per_batch=400), 40)
        return [sum(t in which for t in tasks) / len(tasks) for which in (FOCUS_TASKS, SPATIAL_TASKS)], set(tasks)

    (_, without), _ = shares(0.35, 0.0)
    (focus, with_them), tasks = shares(0.35, 0.3)  # stage 2's last phase
    assert without < 0.25 and with_them > without + 0.2 and focus > 0.3 and len(tasks) > 5
    others = dataclasses.replace(
        bench,
        queries=[q for q in bench.queries if q.task != "temporal"],
        demos=[d for d in bench.demos if d.task != "temporal"],
    )
    with pytest.raises(ValueError, match="lacks temporal"):  # a share the benchmark cannot give in full
        draw_batch(random.Random(0), QueryPools(others), renderer, Mixture(drill=0.1, drill_tasks=DRILLED))
    with pytest.raises(ValueError, match="shares"):
        Mixture(focus=0.8, drill=0.3)


def test_zero_shot_batches_draw_drilled_queries_from_the_drill_scenes_too(small_vlm, tmp_path):
    """The restart's extra scenes are asked in zero-shot batches' drilled share, and only there."""
    import random

    from mmctx_reference.vlm import (
        DRILL_SCENE_TASKS,
        DRILLED,
        QueryPools,
        Renderer,
        _moved,
        draw_batch,
        load_for_training,
    )

    from mmctx.data.shapes import generate_pool

    bench, path = small_vlm
    _, processor, adapter = load_for_training(path)
    renderer = Renderer(processor, adapter, bench.root)
    drill = _moved(generate_pool(bench.root / "drill-test", 6, seed=5000, tasks=list(DRILL_SCENE_TASKS)), "drill-test")
    ours = {str((bench.root / s.images[0]).resolve()) for s in drill}

    def asked(mixture, batches=30):
        rng = random.Random(0)
        pools = QueryPools(bench, (), drill)
        batches = [draw_batch(rng, pools, renderer, mixture) for _ in range(batches)]
        return [c.images[-1] in ours for batch in batches for c in batch]

    drilled = asked(Mixture(zero_shot=1.0, focus=0.0, drill=1.0, drill_tasks=DRILLED, tokens_per_batch=400))
    assert 0.2 < sum(drilled) / len(drilled) < 0.9  # beside the benchmark's own temporal, commonsense, spatial
    assert not any(asked(Mixture(zero_shot=1.0, focus=0.5, tokens_per_batch=400)))  # no drill share: never
    assert not any(asked(Mixture(zero_shot=0.0, focus=0.0, drill=1.0, drill_tasks=DRILLED, tokens_per_batch=400)))


def test_kept_query_pools_draw_the_batches_fresh_ones_would_across_phases(small_vlm, tmp_path):
    """Training keeps one `QueryPools` for all its steps; the draws must be those of lists built
    afresh for each batch, also when the phase (and so the drilled tasks and shares) changes."""
    import random

    from mmctx_reference.vlm import (
        CURRICULUM,
        DRILL_SCENE_TASKS,
        RESTART,
        QueryPools,
        Renderer,
        _moved,
        draw_batch,
        load_for_training,
        mixture_at,
    )

    from mmctx.data.shapes import generate_pool

    bench, path = small_vlm
    _, processor, adapter = load_for_training(path)
    renderer = Renderer(processor, adapter, bench.root)
    drill = _moved(generate_pool(bench.root / "drill-kept", 6, seed=5001, tasks=list(DRILL_SCENE_TASKS)), "drill-kept")
    mixture, steps = Mixture(zero_shot=0.6, tokens_per_batch=300), 20

    def draws(pools_for_step):
        rng = random.Random(3)
        return [
            [
                (c.ids, c.images)
                for c in draw_batch(rng, pools_for_step(), renderer, mixture_at(step, steps, mixture, phases))
            ]
            for phases in (CURRICULUM, RESTART)
            for step in range(steps)
        ]

    kept = QueryPools(bench, bench.demos[:5], drill)
    assert draws(lambda: kept) == draws(lambda: QueryPools(bench, bench.demos[:5], drill))
    assert len(kept._made) >= 6  # pools of both kinds of batch, focus and drilled lists of several phases


def test_the_fitted_connector_reads_out_every_patch_and_adds_up_its_cell(small_vlm):
    import torch
    from mmctx_reference.vlm import (
        feature_basis,
        fit_connector,
        image_tokens,
        load_for_training,
        patch_states,
        read_features,
        token_scale,
    )

    _, path = small_vlm
    model, _, _ = load_for_training(path)
    model.eval()
    torch.manual_seed(0)
    pixels = torch.rand(6, 3, 96, 96) * 2 - 1
    states = patch_states(model, pixels)  # 6 images × 144 patches × vision width
    features = states @ torch.randn(states.shape[-1], len(feature_names()))  # exactly linear: recoverable
    basis = feature_basis(SMALL.hidden, 0)
    fit_connector(model, pixels, features, basis)
    tokens = image_tokens(model, pixels)
    cells = features.view(6, 4, 3, 4, 3, -1).sum((2, 4)).reshape(6, 16, -1)  # 3 × 3 patches a cell, row-major
    assert torch.allclose(tokens @ basis, cells * token_scale(144), rtol=1e-3, atol=1e-2)
    assert not torch.allclose(
        tokens @ basis, features.view(6, 16, 9, -1).sum(2) * token_scale(144), rtol=1e-3, atol=1e-2
    )
    assert torch.allclose(read_features(model, pixels, basis), features.sum(1), rtol=1e-3, atol=5e-2)


def test_with_one_token_an_image_the_connector_writes_positions_from_where_the_patches_are(tmp_path):
    """A shape's ``x``/``y`` in the token is its share of each patch times that patch's centre,
    added up: exact when the tower reads shares linearly, though positions themselves are not
    linear in the tower's output (so the tower's own read-out could not give them)."""
    import torch
    from mmctx_reference.vlm import (
        build_shapes_tokenizer,
        build_shapes_vlm,
        feature_basis,
        fit_connector,
        image_tokens,
        least_squares_readout,
        load_for_training,
        patch_states,
        token_scale,
    )

    from mmctx.data.shapes import SHAPES

    one = Architecture(**{**SMALL.__dict__, "scale_factor": 12})
    assert one.image_tokens == 1
    path = build_shapes_vlm(tmp_path / "m", build_shapes_tokenizer(["a red circle", "blue star"]), one, seed=0)
    model, _, _ = load_for_training(path)
    model.eval()
    torch.manual_seed(0)
    pixels = torch.rand(40, 3, 96, 96) * 2 - 1
    states = patch_states(model, pixels)
    features = states @ torch.randn(states.shape[-1], len(feature_names()))
    centre = (torch.arange(12) + 0.5) / 12 * 2 - 1
    across, down = centre.repeat(12), centre.repeat_interleave(12)  # patch p's centre, row-major
    names = feature_names()
    for shape in SHAPES:
        share = features[..., names.index(f"{shape} count")]
        features[..., names.index(f"{shape} x")] = share * across
        features[..., names.index(f"{shape} y")] = share * down
    basis = feature_basis(one.hidden, 0)
    fit_connector(model, pixels, features, basis)
    written = image_tokens(model, pixels)[:, 0] @ basis / token_scale(144)
    assert torch.allclose(written, features.sum(1), rtol=1e-3, atol=5e-2)
    x = names.index("star x")
    assert written[:, x].abs().max() > 1  # not a column the test leaves near zero
    readout = least_squares_readout(model, pixels, features)  # what every slot used to get
    summed = (states @ readout).sum(1)
    assert (summed[:, x] - features.sum(1)[:, x]).abs().mean() > 0.5


def test_a_shapes_share_times_its_patches_centres_is_where_the_scene_puts_it(small_vlm):
    """The sum `_position_slots` writes (each patch's share of a shape times the patch's centre)
    is the shape's position as `patch_features` states it, on real scenes (multi-frame strips
    too), within half a patch an object (a triangle's drawn outline sits off its centre)."""
    import torch

    from mmctx.data.shapes import SHAPES

    bench, _ = small_vlm
    centre = (torch.arange(12) + 0.5) / 12 * 2 - 1
    across, down = centre.repeat(12), centre.repeat_interleave(12)  # row-major, as the tower sees patches
    names = feature_names()
    checked = 0
    for sample in list(bench.queries) + list(bench.demos):
        t = patch_features(sample.meta, 96, 8)
        for shape in SHAPES:
            share = t[:, names.index(f"{shape} count")]
            if share.sum() < 0.5:
                continue
            checked += 1
            half_a_patch = float(share.sum()) / 12  # positions add up over a shape's objects
            assert float(share @ across) == pytest.approx(_feature(t, f"{shape} x"), abs=half_a_patch)
            assert float(share @ down) == pytest.approx(_feature(t, f"{shape} y"), abs=half_a_patch)
    assert checked > 50


def test_written_tokens_count_objects_beside_the_image_constant(small_vlm):
    """Over real scenes, the pairs an image's token carries add up to its number of objects
    (each counted once, whatever its size), and the constant to `IMAGE_CONSTANT`."""
    from mmctx_reference.vlm import IMAGE_CONSTANT, feature_names, pair_columns, size_columns, token_scale

    bench, _ = small_vlm
    samples = list(bench.queries) + list(bench.demos)
    scale = token_scale(144)
    written = [patch_features(s.meta, 96, 8).sum(0) * scale for s in samples]  # what one image token carries
    objects = [sum(len(f["objects"]) for f in s.meta["frames"]) for s in samples]
    per_object = sum(float(w[pair_columns()].sum()) for w in written) / sum(objects)
    assert per_object == pytest.approx(1, abs=0.02), per_object
    assert all(float(w[size_columns()].sum()) == pytest.approx(float(w[pair_columns()].sum())) for w in written)
    assert all(float(w[feature_names().index("image")]) == pytest.approx(IMAGE_CONSTANT) for w in written)


def test_counts_pass_the_language_models_norm_nearly_unscaled(small_vlm):
    """The language model sees each token divided by its RMS: with `IMAGE_CONSTANT` dominating
    the length, one object reads about the same in a busy scene as in a sparse one (the middle
    80% of scenes within a factor 1.8); with the constant at 1 the spread is wider by more than
    a third (the reason the constant is large)."""
    import torch
    from mmctx_reference.vlm import feature_names, token_scale

    from mmctx.data.shapes import SHAPES

    bench, _ = small_vlm
    names = feature_names()
    counts = [names.index(f"{s} count") for s in SHAPES]

    def spread(scale) -> float:
        read = []
        for s in list(bench.queries) + list(bench.demos):
            w = patch_features(s.meta, 96, 8).sum(0) * scale
            normed = w / w.pow(2).mean().sqrt()
            read.append(float(normed[counts].sum()) / float(w[counts].sum()))
        read = torch.tensor(read)
        return float(read.quantile(0.9) / read.quantile(0.1))

    scale = token_scale(144)
    unit = scale.clone()
    unit[names.index("image")] = 1 / 144
    tight, loose = spread(scale), spread(unit)
    assert tight < 1.8 and loose > 1.33 * tight, (tight, loose)


def _model_and_images(small_vlm, n: int = 8, weight: str = "object"):
    """The small VLM loaded for training, with the pixels, `patch_features` (weighted by
    ``weight``) and `patch_labels` of ``n`` real images."""
    import torch
    from mmctx_reference.vlm import Renderer, load_for_training

    bench, path = small_vlm
    model, processor, adapter = load_for_training(path)
    renderer = Renderer(processor, adapter, bench.root)
    samples = (list(bench.queries) + list(bench.demos))[:n]
    pixels = torch.stack([renderer.pixel_values(str(bench.root / s.images[0])) for s in samples])
    features = torch.stack([patch_features(s.meta, 96, 8, weight) for s in samples])
    labels = torch.stack([patch_labels(patch_features(s.meta, 96, 8, "coverage")) for s in samples])
    return model, pixels, features, labels


def test_vision_pretraining_learns_patch_classes_in_known_dimensions(small_vlm):
    """A few steps on a handful of real images lower the cross-entropy; the pair classes are read
    off the first output dimensions, which `patch_accuracy` scores."""
    import torch
    from mmctx_reference.vlm import patch_accuracy, pretrain_vision

    model, pixels, features, labels = _model_and_images(small_vlm)
    torch.manual_seed(0)
    losses = pretrain_vision(model, pixels, features, labels, steps=40, batch_size=8, lr=5e-3, seed=0)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses
    covered, uncovered = patch_accuracy(model.eval(), pixels, labels)
    assert 0 <= covered <= 1 and uncovered > 0.9  # most patches are empty, and it learns that first


def test_neighbour_heads_start_on_the_neighbourhood_and_are_kept_there(small_vlm, tmp_path):
    """`look_at_neighbours` starts head 0 of each named tower layer on each patch's 3 × 3
    neighbourhood; stage 1 then trains everything else, while the position code the heads read
    stays put and the heads move only by weight decay."""
    import torch
    from mmctx_reference.vlm import (
        NEIGHBOUR_DIMS,
        build_shapes_vlm,
        load_for_training,
        look_at_neighbours,
        neighbour_attention,
        pretrain_vision,
    )

    bench, path = small_vlm
    _, pixels, features, labels = _model_and_images(small_vlm)
    tokenizer = load_for_training(path)[1].tokenizer
    two_layers = build_shapes_vlm(tmp_path / "two", tokenizer, replace(SMALL, vision_layers=2), seed=0)
    model = load_for_training(two_layers)[0]
    assert neighbour_attention(model, pixels, 0) < 0.2  # a random head looks all over
    look_at_neighbours(model, (0, 1))
    started = [neighbour_attention(model, pixels, layer) for layer in (0, 1)]
    assert min(started) > 0.5, started  # 0.82 in the full-size tower
    vision = model.model.vision_model
    code = vision.embeddings.position_embedding.weight[:, -NEIGHBOUR_DIMS:].clone()
    query = vision.encoder.layers[1].self_attn.q_proj.weight[: 48 // 2].clone()
    before = vision.encoder.layers[1].mlp.fc1.weight.clone()
    torch.manual_seed(0)
    pretrain_vision(model, pixels, features, labels, steps=10, batch_size=8, lr=5e-3, seed=0)
    assert vision.embeddings.position_embedding.weight[:, -NEIGHBOUR_DIMS:].equal(code)  # frozen
    # the head's gradients are zeroed; only AdamW's weight decay (1 - lr × 0.01 a step) moves it
    kept = vision.encoder.layers[1].self_attn.q_proj.weight[: 48 // 2]
    assert torch.allclose(kept, query, rtol=1e-3) and kept.abs().sum() > 0.99 * query.abs().sum()
    assert not vision.encoder.layers[1].mlp.fc1.weight.equal(before)  # the rest trains
    for layer in vision.encoder.layers:  # nothing writes into the code the heads read
        assert layer.mlp.fc2.weight[-NEIGHBOUR_DIMS:].eq(0).all()
        assert layer.self_attn.out_proj.weight[-NEIGHBOUR_DIMS:].eq(0).all()
    assert neighbour_attention(model.eval(), pixels, 0) > 0.5


def test_stage_one_learns_arrow_roles_as_two_more_columns(small_vlm, tmp_path):
    import torch
    from mmctx_reference.vlm import build_shapes_vlm, load_for_training, pretrain_vision

    _, path = small_vlm
    narrow, pixels, coverage, _ = _model_and_images(small_vlm, weight="coverage")
    labels = torch.stack([patch_labels(f, roles=True) for f in coverage])
    with pytest.raises(ValueError, match="vision width must be at least 52"):
        pretrain_vision(narrow, pixels, coverage, labels, steps=1, batch_size=8, lr=5e-3, seed=0)
    tokenizer = load_for_training(path)[1].tokenizer
    model = load_for_training(build_shapes_vlm(tmp_path / "wide", tokenizer, replace(SMALL, vision_hidden=64), 0))[0]
    torch.manual_seed(0)
    losses = pretrain_vision(model, pixels, coverage, labels, steps=30, batch_size=8, lr=5e-3, seed=0)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses


def test_the_linear_phase_makes_the_features_a_linear_function_of_the_tower_output(small_vlm):
    """After the classes, ``linear_steps`` more pull the features into a linear read-out of the
    output: the least-squares read-out's error falls, where more class-only steps do not do it.

    The target here is the coverage-weighted features (`pretrain_vision` regresses whatever it is
    given): on 8 images and 40 steps the per-object ones are small enough that the difference is
    within noise (measured 0.0062 against 0.0081, reversed at 80 steps)."""
    import torch
    from mmctx_reference.vlm import least_squares_readout, patch_states, pretrain_vision

    model, pixels, features, labels = _model_and_images(small_vlm, weight="coverage")

    def readout_error(model) -> float:
        fitted = patch_states(model, pixels) @ least_squares_readout(model, pixels, features)
        return float(((fitted - features) ** 2).sum(-1).mean())

    torch.manual_seed(0)
    pretrain_vision(model, pixels, features, labels, steps=40, batch_size=8, lr=5e-3, seed=0)
    classes_only = copy.deepcopy(model)
    pretrain_vision(classes_only, pixels, features, labels, steps=40, batch_size=8, lr=5e-3, seed=1)
    losses = pretrain_vision(model, pixels, features, labels, steps=0, batch_size=8, lr=5e-3, seed=1, linear_steps=40)
    assert len(losses) == 40 and all(math.isfinite(x) for x in losses)
    # Measured: 0.039 against 0.056 (ratio 0.70).
    assert readout_error(model) < 0.8 * readout_error(classes_only), (readout_error(model), readout_error(classes_only))


def _for_evaluation(small_vlm):
    """The small VLM loaded in eval mode with a renderer over its benchmark: (bench, model, processor, renderer)."""
    from mmctx_reference.vlm import Renderer, load_for_training

    bench, path = small_vlm
    model, processor, adapter = load_for_training(path)
    model.eval()
    return bench, model, processor, Renderer(processor, adapter, bench.root)


def _cached(model, renderer, paths):
    """`cached_image_tokens` of ``paths``, rendered as the trainer renders them."""
    import torch
    from mmctx_reference.vlm import cached_image_tokens

    return cached_image_tokens(model, list(paths), torch.stack([renderer.pixel_values(p) for p in paths]))


def test_cached_image_tokens_give_the_loss_the_model_computes_from_pixels(small_vlm):
    import torch
    from mmctx_reference.vlm import collate, forward_cached, reply_loss

    bench, model, processor, renderer = _for_evaluation(small_vlm)
    queries = list(bench.queries)[:3]
    batch = [renderer.render(q, bench.demos_for(q, "random", i), "text", seed=i) for i, q in enumerate(queries)]
    paths = sorted({p for c in batch for p in c.images})
    images = _cached(model, renderer, paths)
    ids, mask, weights, tokens = collate(batch, images, processor.tokenizer.pad_token_id)
    with torch.no_grad():
        states = forward_cached(model, ids, mask, tokens, renderer.image_id).last_hidden_state
        cached = reply_loss(model, states, ids, weights)

    pixels = torch.zeros((len(batch), max(len(c.images) for c in batch), *renderer.pixel_values(paths[0]).shape))
    for row, c in enumerate(batch):
        for j, p in enumerate(c.images):
            pixels[row, j] = renderer.pixel_values(p)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, pixel_values=pixels).logits
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    direct = (losses * weights[:, 1:]).sum() / weights[:, 1:].sum()
    assert abs(float(cached) - float(direct)) < 1e-4


def test_a_few_steps_lower_the_loss_and_save_a_loadable_checkpoint(tmp_path):
    from mmctx_reference.vlm import DRILL_SCENE_TASKS, DRILLED, train_shapes_vlm
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from mmctx.data.shapes.tasks import task_formats
    from mmctx.models import load_backend
    from mmctx.models.base import GenerateRequest
    from mmctx.prompts.messages import ImagePart, Message, TextPart

    m = train_shapes_vlm(
        tmp_path / "vlm", seed=0, steps=16, restart_steps=4, vision_steps=4, linear_steps=2, vision_batch=16, queries_per_task=2,
        pool_per_task=10, vision_pool_per_task=1, drill_scenes_per_task=20,
        arch=SMALL, mixture=Mixture(tokens_per_batch=600), lr=3e-3, progress=False, work=tmp_path / "bench",
        arrow_roles=False, neighbour_layers=(), exact_arrow_ends=False,  # too narrow a tower; 16 tokens an image
    )  # fmt: skip
    losses = m["losses"]
    assert len(losses) == 16 + 4 and all(math.isfinite(x) for x in losses)  # the restart's steps follow
    assert len(m["vision_losses"]) == 4 + 2 and all(math.isfinite(x) for x in m["vision_losses"])
    assert m["vision_heldout_scenes"] == 1 and m["vision_scenes"] == m["train_samples"] + 13 - 1
    assert m["zero_shot_extra"] == 13 and m["linear_steps"] == 2
    assert m["drill_scenes"] == 20 * len(task_formats(list(DRILL_SCENE_TASKS))) and m["drill_seed"] == 5000
    assert m["drill_scenes_asked"] > 0  # the restart asked its own scenes
    assert m["restart_steps"] == 4 and tuple(m["restart"][0]["drill_tasks"]) == DRILLED
    assert (tmp_path / "bench" / "drill" / "images").is_dir()  # generated inside the benchmark, apart from stage 1's
    assert all(m[k] is None or 0 <= m[k] <= 1 for k in ("patch_accuracy", "background_accuracy", "pair_sets_exact"))
    main, restarted = losses[:16], losses[16:]  # the restart has an optimiser and a mixture of its own
    assert sum(main[-4:]) / 4 < sum(main[:4]) / 4 - 0.5, losses
    assert max(restarted) < sum(main[:4]) / 4, losses  # it continues the trained model, not a fresh one
    grounding = m["grounding_losses"]  # one a zero-shot step
    assert 0 < len(grounding) <= 16 and all(math.isfinite(x) and x >= 0 for x in grounding), grounding
    assert m["grounding_weight"] > 0 and m["grounded_layer"] == 1
    assert m["parameters"] > 0 and m["train_seconds"] > 0 and m["train_seed"] == 3000

    AutoModelForImageTextToText.from_pretrained(tmp_path / "vlm")
    AutoProcessor.from_pretrained(tmp_path / "vlm")
    backend = load_backend(str(tmp_path / "vlm"), device="cpu", dtype="float32")
    image = next((tmp_path / "bench" / "images").rglob("*.png"))
    prompt = (Message("user", (ImagePart.from_path(image), TextPart("What colour is the circle?"))),)
    (out,) = backend.generate([GenerateRequest(messages=prompt, max_new_tokens=8)])
    assert out.error is None and out.prompt_tokens > 16  # the image's tokens and the question reached the model


def test_look_at_images_starts_a_head_on_the_image_tokens(small_vlm):
    """After `look_at_images`, head 0 of the first layer gives the image tokens most of the
    reply position's attention; before it, about their share of the prompt."""
    import torch
    from mmctx_reference.vlm import collate, feature_basis, look_at_images, token_scale

    bench, model, processor, renderer = _for_evaluation(small_vlm)
    model.set_attn_implementation("eager")  # attention weights are returned by the eager kernel
    query = list(bench.queries)[0]
    conv = renderer.render(query, [], "text", seed=0)
    basis = feature_basis(SMALL.hidden, 0)
    cells = patch_features(query.meta, 96, 8).view(4, 3, 4, 3, -1).sum((1, 3)).reshape(16, -1)
    images = {p: (cells * token_scale(144)) @ basis.T for p in conv.images}
    ids, mask, _, tokens = collate([conv], images, processor.tokenizer.pad_token_id)
    image = ids[0] == renderer.image_id
    reply = conv.final.index(True) - 1  # the position that predicts the reply's first token

    def on_images() -> float:
        embeds = model.get_input_embeddings()(ids).masked_scatter(image[None, :, None], tokens)
        with torch.no_grad():
            attention = model.model.text_model(inputs_embeds=embeds, output_attentions=True).attentions[0]
        return float(attention[0, 0, reply, image].sum())

    before = on_images()
    look_at_images(model, basis, seed=0)
    after = on_images()
    assert before < 0.4 and after > 0.8, (before, after, float(image.float().mean()))
    # The key it sets sits in the rotary pair that turns slowest, so distance barely moves it
    # (with 16 image tokens the attention above would not notice a fast pair).
    text = model.model.text_model
    row = int(text.layers[0].self_attn.k_proj.weight.norm(dim=1).argmax())
    inv_freq = text.rotary_emb.inv_freq
    assert float(inv_freq[row % len(inv_freq)]) == float(inv_freq.min()), (row, inv_freq)


def test_look_at_words_starts_heads_on_the_questions_shape_word_and_the_listed_colours(small_vlm):
    """After `look_at_images` and `look_at_words`, heads 0, 1 and 2 of the first layer give the
    reply position's attention to the image, the question's shape word and the listed colours of
    "what colour is the <shape>?"; before, about their share of the prompt."""
    import torch
    from mmctx_reference.vlm import (
        collate,
        feature_basis,
        look_at_images,
        look_at_words,
        token_scale,
    )

    bench, model, processor, renderer = _for_evaluation(small_vlm)
    model.set_attn_implementation("eager")  # attention weights are returned by the eager kernel
    query = next(q for q in [*bench.queries, *bench.demos] if q.meta["query"]["kind"] == "colour_of_shape")
    conv = renderer.render(query, [], "text", seed=0)
    basis = feature_basis(SMALL.hidden, 0)
    cells = patch_features(query.meta, 96, 8).view(4, 3, 4, 3, -1).sum((1, 3)).reshape(16, -1)
    images = {p: (cells * token_scale(144)) @ basis.T for p in conv.images}
    ids, mask, _, tokens = collate([conv], images, processor.tokenizer.pad_token_id)
    reply = conv.final.index(True) - 1  # the position that predicts the reply's first token
    pieces = [processor.tokenizer.decode([i]).strip() for i in conv.ids[:reply]]
    target = query.question.rstrip("?").split()[-1]  # "What colour is the <shape>?"
    where = {
        0: ids[0, :reply] == renderer.image_id,
        1: torch.tensor([p == target for p in pieces]),
        2: torch.tensor([p in query.choices for p in pieces]),
    }
    assert int(where[1].sum()) == 1 and int(where[2].sum()) == len(query.choices), pieces

    def shares() -> list[float]:
        embeds = model.get_input_embeddings()(ids).masked_scatter((ids == renderer.image_id)[..., None], tokens)
        with torch.no_grad():
            attention = model.model.text_model(inputs_embeds=embeds, output_attentions=True).attentions[0]
        return [float(attention[0, head, reply, :reply][on].sum()) for head, on in where.items()]

    before = shares()
    look_at_images(model, basis, seed=0)
    look_at_words(model, processor.tokenizer, basis, seed=0)
    after = shares()
    assert max(before) < 0.4 and min(after) > 0.8, (before, after)
    # Each started key sits in the rotary pair that turns slowest (one word near the reply would
    # not notice a fast pair).
    head_dim = SMALL.hidden // SMALL.heads
    keys = model.model.text_model.layers[0].self_attn.k_proj.weight.view(-1, head_dim, SMALL.hidden).norm(dim=2)[:3]
    assert keys.argmax(dim=1).tolist() == [head_dim // 2 - 1] * 3, keys


def test_started_heads_must_not_share_keys(small_vlm, tmp_path):
    """With 2 key/value heads for 4, head 1 shares head 0's key: starting it would overwrite the
    image head's, so `look_at_words` refuses before it changes anything."""
    from dataclasses import replace

    import torch
    from mmctx_reference.vlm import build_shapes_vlm, feature_basis, load_for_training, look_at_images, look_at_words

    _, path = small_vlm
    tokenizer = load_for_training(path)[1].tokenizer
    model, _, _ = load_for_training(build_shapes_vlm(tmp_path / "gqa", tokenizer, replace(SMALL, kv_heads=2)))
    basis = feature_basis(SMALL.hidden, 0)
    look_at_images(model, basis, seed=0)  # head 0: allowed
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError, match="share key/value heads"):
        look_at_words(model, tokenizer, basis, seed=0)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def _grounding_batch(small_vlm, shots: int = 0):
    from mmctx_reference.vlm import Renderer, WordGrounding, load_for_training

    bench, path = small_vlm
    _, processor, adapter = load_for_training(path)
    renderer = Renderer(processor, adapter, bench.root)
    samples = [*bench.queries, *bench.demos]
    kinds = ("colour_of_shape", "shape_of_colour")
    queries = [next(q for q in samples if q.meta["query"]["kind"] == kind) for kind in kinds]
    batch = [renderer.render(q, bench.demos_for(q, "random", shots) if shots else [], "text", seed=0) for q in queries]
    scenes = {
        str((bench.root / s.images[0]).resolve()): patch_features(s.meta, 96, 8).sum(0)
        for s in [*samples, *(d for q in queries for d in bench.demos_for(q, "random", shots))]
    }
    return queries, batch, WordGrounding(processor.tokenizer, SMALL.hidden, scenes), processor.tokenizer


def test_word_grounding_asks_each_word_what_its_image_shows_about_it(small_vlm):
    """The question's shape word must give that shape's colours, sizes, count, position and
    arrow ends; a colour word which shapes have that colour; all as the scene's counts."""
    from mmctx.data.shapes import COLOURS, SHAPES, SIZES
    from mmctx.data.shapes.world import FRAME, Scene

    (colour_q, shape_q), batch, grounding, tokenizer = _grounding_batch(small_vlm)
    found = grounding.targets(batch)

    def asked(group: str, row: int, word: str) -> list[float]:
        rows, positions, targets = found[group]
        hits = [
            t.tolist()
            for r, p, t in zip(rows, positions, targets)
            if r == row and tokenizer.decode([batch[r].ids[p]]).strip().lower() == word
        ]
        assert hits, (group, row, word)
        return hits[0]

    shape = colour_q.question.rstrip("?").split()[-1]  # "What colour is the <shape>?"
    (frame,) = Scene.from_dict(colour_q.meta).frames
    mine = [o for o in frame.objects if o.shape == shape]
    arrows = frame.arrows
    expected = [sum(o.colour == c for o in mine) for c in COLOURS] + [sum(o.size == z for o in mine) for z in SIZES]
    expected += [len(mine), sum(2 * o.x / FRAME - 1 for o in mine), sum(2 * o.y / FRAME - 1 for o in mine)]
    expected += [
        sum(any(a == o.id for a, _ in arrows) for o in mine),
        sum(any(b == o.id for _, b in arrows) for o in mine),
    ]
    assert asked("shape", 0, shape) == pytest.approx(expected, abs=0.02)
    assert expected[list(COLOURS).index(colour_q.answer)] >= 1

    colour = shape_q.question.split()[-2]  # "What shape is the <colour> object?"
    objects = [o for frame in Scene.from_dict(shape_q.meta).frames for o in frame.objects]
    expected = [sum(o.colour == colour and o.shape == s for o in objects) for s in SHAPES]
    assert asked("colour", 1, colour) == pytest.approx(expected, abs=0.02)
    assert expected[list(SHAPES).index(shape_q.answer)] >= 1


def test_word_grounding_loss_is_zero_only_for_the_words_own_image_and_skips_few_shot(small_vlm):
    import torch
    from mmctx_reference.vlm import WordGrounding

    _, batch, grounding, tokenizer = _grounding_batch(small_vlm)
    hidden = torch.zeros(len(batch), max(len(c.ids) for c in batch), SMALL.hidden)
    for group, (rows, positions, targets) in grounding.targets(batch).items():
        hidden[rows, positions, : targets[0].numel()] = torch.stack(targets)  # the answer, in the first dimensions
        readout = grounding.readouts[group]
        with torch.no_grad():
            readout.weight.zero_(), readout.bias.zero_()
            readout.weight[:, : targets[0].numel()] = torch.eye(targets[0].numel())
    with torch.no_grad():
        assert float(grounding.loss(batch, hidden)) < 1e-9
        first, second = batch[0].images[0], batch[1].images[0]
        swapped = WordGrounding(
            tokenizer, SMALL.hidden, {first: grounding.scenes[second], second: grounding.scenes[first]}
        )
        swapped.readouts = grounding.readouts
        assert float(swapped.loss(batch, hidden)) > 0.5  # the same states, asked about the other image
    _, few_shot, grounding, _ = _grounding_batch(small_vlm, shots=2)
    assert grounding.loss(few_shot, hidden) is None  # a word may be about a demonstration's image


def test_the_grounded_hidden_state_is_the_first_layers_output(small_vlm):
    """`GROUNDED_LAYER` indexes what the first decoder layer hands the second: the states the
    second layer's heads fetch from, as the card and docstrings say."""
    import torch
    from mmctx_reference.vlm import GROUNDED_LAYER, collate, forward_cached

    bench, model, processor, renderer = _for_evaluation(small_vlm)
    conv = renderer.render(bench.queries[0], [], "text", seed=0)
    images = _cached(model, renderer, conv.images)
    ids, mask, _, tokens = collate([conv], images, processor.tokenizer.pad_token_id)
    seen = []
    layers = model.model.text_model.layers
    hooks = [
        layer.register_forward_hook(lambda m, i, o: seen.append(o[0] if isinstance(o, tuple) else o))
        for layer in layers
    ]
    with torch.no_grad():
        hidden = forward_cached(model, ids, mask, tokens, renderer.image_id, with_hidden_states=True).hidden_states
    for hook in hooks:
        hook.remove()
    assert len(seen) == len(layers) == 2
    assert torch.equal(hidden[GROUNDED_LAYER], seen[0]) and not torch.equal(hidden[GROUNDED_LAYER], seen[1])
