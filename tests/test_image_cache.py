"""Image preprocessing once per image content: the decoded-image cache and the preprocessed-image
cache in front of every family's real image processor, checked against the processor itself."""

from __future__ import annotations

import hashlib
import logging

import numpy as np
import pytest
import torch
from PIL import Image

from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.models.image_cache import CachedImageProcessor
from mmctx.models.images import DecodedImages, content_key
from mmctx.models.tiny import FAMILIES
from mmctx.prompts.messages import ImagePart, Message, TextPart

# Families whose processors batch in a way one-image results do not assemble into (LLaVA-OneVision
# counts images per prompt and pads tiles per batch; Phi-4-multimodal pads crops per batch): not
# cached, the processor preprocesses every call.
UNASSEMBLED = {"llava_onevision", "phi4_multimodal"}


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """Images of four sizes and aspect ratios (padding and resizing differ per image)."""
    root = tmp_path_factory.mktemp("cache-images")
    rng = np.random.default_rng(0)
    out = []
    for i, (h, w) in enumerate([(96, 96), (60, 120), (200, 90), (33, 47), (96, 96)]):
        path = root / f"{i}.png"
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)
        out.append(ImagePart.from_path(path))
    return out


def prompt(images, text="What is shown?"):
    return (Message("user", (*images, TextPart(text))),)


def batches(parts):
    """Batches of prompts with different image counts and sizes, images recurring across them."""
    return [
        [prompt(parts[:2], "a"), prompt(parts[2:4], "b")],
        [prompt(parts[:1], "c")],
        [prompt(parts[1:5], "d"), prompt(parts[4:5], "e")],
        [prompt(parts[3:5], "f"), prompt(parts[0:3], "g")],
        [prompt(parts[2:4], "h"), prompt(parts[:2], "i")],  # every image seen before
    ]


def processed(backend, batch, cached=True):
    images = backend.processor.image_processor
    texts, pictures = [], []
    for p in batch:
        conversation, loaded = backend._hf_messages(p)
        texts.append(backend._template(conversation, True))
        pictures.append(loaded)
    images.enabled, saved = cached and images.enabled, images.enabled
    try:
        return backend._process(texts, pictures)
    finally:
        images.enabled = saved


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a
    )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_gets_exactly_what_its_processor_makes(tiny_models, parts, family):
    """Model inputs with the cache equal the processor's own, tensor for tensor, on batches of
    mixed image counts and sizes; where the assembly cannot match, the cache turns itself off."""
    backend = HFBackend(str(tiny_models[family]), device="cpu", dtype="float32")
    cache = backend.processor.image_processor
    if family in UNASSEMBLED:
        assert not isinstance(cache, CachedImageProcessor)
        assert backend.usage()["image_preprocessing"] == {"cached": False}
        # What the cache would make of these batches: the first calls match, a later one does
        # not — why a family is cached only once its batches are known to assemble.
        cache = CachedImageProcessor(cache)
        backend.processor.image_processor = cache
        results = [same(processed(backend, batch), processed(backend, batch, cached=False)) for batch in batches(parts)]
        assert results[:3] == [True] * 3 and not all(results)
        return
    assert isinstance(cache, CachedImageProcessor)
    for batch in batches(parts):
        assert same(processed(backend, batch), processed(backend, batch, cached=False))
    assert cache.enabled
    # five distinct images, each preprocessed once; every later sight reused
    assert cache.misses == 5 and cache.hits == 14
    assert backend.usage()["image_preprocessing"] == {"cached": True, "preprocessed": 5, "reused": 14}


def test_scores_and_generations_do_not_change_on_the_shipped_model(parts):
    """The shipped checkpoint (its 448-px first resize) with and without the cache: identical
    log-likelihoods, token counts and generated text."""
    on = HFBackend.from_spec("builtin:shapes-vlm", device="cpu")
    off = HFBackend.from_spec("builtin:shapes-vlm", device="cpu")
    off.processor.image_processor.enabled = False
    demo = (
        Message("user", (parts[0], TextPart("Which shape?"))),
        Message("assistant", (TextPart("circle"),)),
        Message("user", (parts[1], parts[2], TextPart("Which shape?"))),
    )
    score = [ScoreRequest(demo, ("circle", "square", "a red triangle")), ScoreRequest(prompt(parts[3:]), ("yes", "no"))]
    generate = [GenerateRequest(demo, 6), GenerateRequest(prompt(parts[1:4]), 6)]
    for _ in range(2):  # the second round is served from the cache
        assert on.score(score) == off.score(score)
        assert on.generate(generate) == off.generate(generate)
    assert on.processor.image_processor.hits > 0 and off.processor.image_processor.hits == 0


def test_a_batch_that_does_not_assemble_is_the_processors_own_and_turns_the_cache_off(caplog):
    """An image processor whose batch is not its images' results side by side (here: one that
    numbers images within the call) gets the real result, and the cache stays off."""
    from transformers import BatchFeature

    class Numbering:
        def __call__(self, images, **kwargs):
            flat = [im for group in images for im in group]
            return BatchFeature({"index": torch.arange(len(flat))})

    image = Image.new("RGB", (8, 8))
    image.info["mmctx_sha256"] = "a" * 64
    other = Image.new("RGB", (8, 8), "red")
    other.info["mmctx_sha256"] = "b" * 64
    cache = CachedImageProcessor(Numbering())
    with caplog.at_level(logging.INFO, logger="mmctx.models.image_cache"):
        out = cache([[image, other]], return_tensors="pt")
    assert out["index"].tolist() == [0, 1] and cache.enabled is False
    assert "do not assemble" in caplog.text
    assert cache([[other, image]], return_tensors="pt")["index"].tolist() == [0, 1]


def test_clip_image_processor_batches_assemble(tmp_path):
    """LLaVA-1.5's CLIP image processor (no tiny family uses it): mixed sizes assemble exactly."""
    from transformers import CLIPImageProcessor

    rng = np.random.default_rng(1)
    images = []
    for i, (h, w) in enumerate([(300, 200), (50, 90), (224, 224)]):
        im = Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
        im.info["mmctx_sha256"] = str(i)
        images.append(im)
    real = CLIPImageProcessor()
    cache = CachedImageProcessor(CLIPImageProcessor(), checks=0)
    assert CachedImageProcessor.assembles(real)
    for batch in ([images], [images[:1], images[1:]], [images[2:], images[:2]]):
        assert torch.equal(
            cache(batch, return_tensors="pt")["pixel_values"], real(batch, return_tensors="pt")["pixel_values"]
        )
    assert cache.misses == 3 and cache.hits == 6


def test_images_without_a_content_key_are_not_cached():
    calls = []

    class Counting:
        def __call__(self, images, **kwargs):
            calls.append(len(images))
            return {"pixel_values": torch.zeros(len(images), 3)}

    cache = CachedImageProcessor(Counting())
    anonymous = Image.new("RGB", (8, 8))  # not decoded by mmctx.models.images: no key
    cache([anonymous, anonymous], return_tensors="pt")
    cache([anonymous], return_tensors="pt")
    assert calls == [2, 1] and cache.hits == cache.misses == 0


def test_the_preprocessed_cache_is_bounded_by_bytes():
    class Pixels:
        def __call__(self, images, **kwargs):
            return {"pixel_values": torch.stack([torch.full((10,), float(im.width)) for im in images])}

    images = []
    for width in range(1, 6):
        im = Image.new("RGB", (width, 1))
        im.info["mmctx_sha256"] = str(width)
        images.append(im)
    cache = CachedImageProcessor(Pixels(), checks=1, max_bytes=2 * 40)  # room for two results
    out = cache(images, return_tensors="pt")
    assert out["pixel_values"][:, 0].tolist() == [1, 2, 3, 4, 5]
    assert len(cache._results) == 2 and cache._results.bytes == 80
    again = cache(images[:1], return_tensors="pt")  # evicted: preprocessed again, still right
    assert again["pixel_values"][0, 0] == 1 and cache.misses == 6


def test_decoded_images_are_shared_by_content_and_bounded(tmp_path):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    Image.new("RGB", (10, 10), "red").save(first)
    Image.new("RGB", (10, 10), "blue").save(second)
    a, b = ImagePart.from_path(first), ImagePart.from_path(second)
    cache = DecodedImages(max_bytes=10 * 10 * 3)  # one image's pixels
    image = cache.get(a.path, a.sha256)
    assert image.mode == "RGB" and content_key(image) == a.sha256
    assert cache.get(a.path, a.sha256) is image and cache.hits == 1
    cache.get(b.path, b.sha256)  # evicts a
    assert cache.get(a.path, a.sha256) is not image and cache.misses == 3
    # The same path with new content is another image: known by its hash, not its name.
    Image.new("RGB", (10, 10), "green").save(first)
    c = ImagePart(str(first), hashlib.sha256(first.read_bytes()).hexdigest())
    assert cache.get(c.path, c.sha256).getpixel((0, 0)) == (0, 128, 0)
