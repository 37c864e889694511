"""The shapes-world reference VLM trainer: conversations rendered exactly as evaluation renders
them, scene labels for the vision pre-stage, and a few training steps that save a loadable model."""

from __future__ import annotations

import math

import pytest

from mmctx.reference.vlm import Architecture, Mixture, cell_targets, scene_labels

SMALL = Architecture(vision_hidden=32, vision_layers=1, hidden=64, layers=2, intermediate=128)


def test_cell_targets_label_the_centre_cell_and_the_arrow_ends():
    small_red_circle = {"id": 0, "shape": "circle", "colour": "red", "size": "small", "x": 10, "y": 10, "r": 8}
    large_blue_star = {"id": 1, "shape": "star", "colour": "blue", "size": "large", "x": 80, "y": 80, "r": 13}
    meta = {
        "frame_size": 96,
        "separator": 2,
        "frames": [{"objects": [small_red_circle, large_blue_star], "arrows": [[0, 1]]}],
    }
    t = cell_targets(meta, grid=4, image_size=96)
    labels = scene_labels()
    assert t[0, labels.index("red circle")] == 1 and t[0, labels.index("small circle")] == 1
    assert t[15, labels.index("blue star")] == 1 and t[15, labels.index("large star")] == 1
    assert t[0, labels.index("arrow tail")] == 1 and t[10, labels.index("arrow head")] == 1
    assert t.sum() == 6


def test_multi_frame_strips_are_squashed_like_the_processor_does():
    obj = {"id": 0, "shape": "square", "colour": "green", "size": "small", "x": 48, "y": 48, "r": 8}
    meta = {"frame_size": 96, "separator": 2, "frames": [{"objects": [obj]} for _ in range(4)]}
    t = cell_targets(meta, grid=4, image_size=96)
    # Four frames side by side in a 390 px strip squashed to 96 px: one frame per cell column.
    assert [int(t[4 * 2 + col].sum()) for col in range(4)] == [2, 2, 2, 2]


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
    expected = reply_text(query, shown_options(query, get_preset("fewmmbench"), 7), style)
    assert reply == f" {expected}<end_of_utterance>"
    assert sum(conv.reply) > sum(conv.final) if shots else sum(conv.reply) == sum(conv.final)


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
