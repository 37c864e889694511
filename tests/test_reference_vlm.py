"""The shapes-world reference VLM trainer: conversations rendered exactly as evaluation renders
them, scene labels for the vision pre-stage, and a few training steps that save a loadable model."""

from __future__ import annotations

import math

import pytest

from mmctx.reference.vlm import Architecture, Mixture, feature_names, scene_features

SMALL = Architecture(vision_hidden=32, vision_layers=1, hidden=64, layers=2, intermediate=128)


def _feature(t, name: str) -> float:
    return float(t[feature_names().index(name)])


def test_scene_features_bind_colour_and_size_to_shape_in_the_centre_cell():
    small_red_circle = {"id": 0, "shape": "circle", "colour": "red", "size": "small", "x": 10, "y": 70, "r": 8}
    large_blue_star = {"id": 1, "shape": "star", "colour": "blue", "size": "large", "x": 84, "y": 12, "r": 13}
    red_star = {"id": 2, "shape": "star", "colour": "red", "size": "small", "x": 90, "y": 20, "r": 8}
    meta = {
        "frame_size": 96,
        "separator": 2,
        "frames": [{"objects": [small_red_circle, large_blue_star, red_star], "arrows": [[0, 1]]}],
    }
    t = scene_features(meta, grid=4)
    circle, stars = t[2 * 4 + 0], t[0 * 4 + 3]  # row 2 column 0; both stars in row 0 column 3
    assert _feature(circle, "red circle") == 1 and _feature(circle, "small circle") == 1
    assert _feature(circle, "blue circle") == 0 and _feature(circle, "circle arrow tail") == 1
    assert _feature(stars, "blue star") == 1 and _feature(stars, "red star") == 1 and _feature(stars, "red circle") == 0
    assert _feature(stars, "large star") == 1 and _feature(stars, "small star") == 1
    assert _feature(stars, "star arrow head") == 1 and _feature(stars, "star arrow tail") == 0
    assert abs(_feature(circle, "circle x") - (2 * 10 / 96 - 1)) < 1e-6 and _feature(circle, "circle y") > 0
    assert abs(_feature(stars, "star x") - (2 * 84 / 96 - 1 + 2 * 90 / 96 - 1)) < 1e-6  # positions add up
    assert all(_feature(cell, "image") == 1 for cell in t)
    assert float(t.sum() - t[:, feature_names().index("image")].sum()) == pytest.approx(
        6 + 2 + sum(float(t[:, feature_names().index(f"{s} {a}")].sum()) for s in ("circle", "star") for a in "xy")
    )  # nothing but the three objects' pairs, the arrow's two ends and their positions


def test_multi_frame_strips_are_squashed_like_the_processor_does():
    obj = {"id": 0, "shape": "square", "colour": "green", "size": "small", "x": 48, "y": 48, "r": 8}
    meta = {"frame_size": 96, "separator": 2, "frames": [{"objects": [obj]} for _ in range(4)]}
    t = scene_features(meta, grid=4)
    # Four frames side by side in a 390 px strip squashed to 96 px: one frame per cell column.
    assert [_feature(t[4 * 2 + col], "green square") for col in range(4)] == [1, 1, 1, 1]
    assert abs(_feature(t[4 * 2 + 0], "square x") - (2 * 48 / 390 - 1)) < 1e-6


@pytest.fixture(scope="module")
def small_vlm(tmp_path_factory):
    """A small training benchmark and a random-weight model of the trainer's family on it."""
    from mmctx.reference.vlm import build_shapes_tokenizer, build_shapes_vlm, prompt_corpus, training_benchmark

    root = tmp_path_factory.mktemp("shapes-vlm")
    bench = training_benchmark(root / "bench", seed=0, queries_per_task=2, pool_per_task=10)
    tokenizer = build_shapes_tokenizer(prompt_corpus(bench))
    return bench, build_shapes_vlm(root / "model", tokenizer, SMALL, seed=0)


@pytest.mark.parametrize("shots,style", [(0, "letter"), (0, "text"), (3, "cot"), (2, "letter")])
def test_training_conversations_are_what_the_hf_backend_sees(small_vlm, shots, style):
    from mmctx.models.hf import HFBackend
    from mmctx.prompts.build import build_prompt, shown_options
    from mmctx.prompts.presets import get_preset
    from mmctx.reference.vlm import Renderer, load_for_training, reply_text, with_rationale

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


def test_cached_image_tokens_give_the_loss_the_model_computes_from_pixels(small_vlm):
    import torch

    from mmctx.reference.vlm import Renderer, cached_image_tokens, collate, load_for_training, reply_loss

    bench, path = small_vlm
    model, processor, adapter = load_for_training(path)
    model.eval()
    renderer = Renderer(processor, adapter, bench.root)
    queries = list(bench.queries)[:3]
    batch = [renderer.render(q, bench.demos_for(q, "random", i), "text", seed=i) for i, q in enumerate(queries)]
    paths = sorted({p for c in batch for p in c.images})
    images = cached_image_tokens(model, paths, renderer)
    ids, mask, weights, tokens = collate(batch, images, processor.tokenizer.pad_token_id)
    with torch.no_grad():
        cached = reply_loss(model, ids, mask, weights, tokens, renderer.image_id)

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
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from mmctx.models import load_backend
    from mmctx.models.base import GenerateRequest
    from mmctx.prompts.messages import ImagePart, Message, TextPart
    from mmctx.reference.vlm import train_shapes_vlm

    m = train_shapes_vlm(
        tmp_path / "vlm", seed=0, steps=16, vision_steps=4, vision_batch=16, queries_per_task=2, pool_per_task=10,
        arch=SMALL, mixture=Mixture(tokens_per_batch=600), lr=3e-3, progress=False, work=tmp_path / "bench",
    )  # fmt: skip
    losses = m["losses"]
    assert len(losses) == 16 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.5, losses
    assert m["parameters"] > 0 and m["train_seconds"] > 0 and m["train_seed"] == 3000

    AutoModelForImageTextToText.from_pretrained(tmp_path / "vlm")
    AutoProcessor.from_pretrained(tmp_path / "vlm")
    backend = load_backend(str(tmp_path / "vlm"), device="cpu", dtype="float32")
    image = next((tmp_path / "bench" / "images").rglob("*.png"))
    prompt = (Message("user", (ImagePart.from_path(image), TextPart("What colour is the circle?"))),)
    (out,) = backend.generate([GenerateRequest(messages=prompt, max_new_tokens=8)])
    assert out.error is None and out.prompt_tokens > 16  # the image's tokens and the question reached the model
