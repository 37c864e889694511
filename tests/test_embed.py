"""Joint embeddings for curation, on a tiny random-weight CLIP built offline and a shapes-world pool."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmctx.curate.embed import (
    CLIPEncoder,
    EmbeddingCache,
    Embeddings,
    EmbedError,
    EncoderError,
    _Entry,  # the cache's row type, to write a cache without an encoder
    embed_samples,
    l2_normalise,
    load_encoder,
    sample_text,
)
from mmctx.data.shapes import generate_pool
from mmctx.schema import Sample


class Counting:
    """A real encoder, counting the texts and images it is asked to encode."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.has_images = inner.has_images
        self.texts = 0
        self.images = 0

    def encode_texts(self, texts):
        self.texts += len(texts)
        return self.inner.encode_texts(texts)

    def encode_images(self, images):
        self.images += len(images)
        return self.inner.encode_images(images)


class Poisoned(Counting):
    """A real encoder whose text row for one text comes back as NaN (a broken fp16 overflow, say)."""

    def __init__(self, inner, bad_text: str):
        super().__init__(inner)
        self.bad_text = bad_text

    def encode_texts(self, texts):
        rows = super().encode_texts(texts).copy()
        rows[[t == self.bad_text for t in texts]] = np.nan
        return rows


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    from mmctx.models.tiny import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny-clip") / "clip", seed=0)


@pytest.fixture(scope="module")
def encoder(clip_dir) -> CLIPEncoder:
    return CLIPEncoder(str(clip_dir), device="cpu", batch_size=8)


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> tuple[list[Sample], Path]:
    root = tmp_path_factory.mktemp("pool")
    return generate_pool(root, per_task=2, seed=0), root


@pytest.fixture
def own_pool(tmp_path) -> tuple[list[Sample], Path]:
    """A pool this test may damage."""
    root = tmp_path / "pool"
    return generate_pool(root, per_task=1, seed=0), root


@pytest.fixture(scope="module")
def embedded(pool, encoder) -> Embeddings:
    samples, root = pool
    return embed_samples(samples, root, encoder, cache_dir=None, progress=False)


def _sample(**fields) -> Sample:
    base = {"id": "s", "task": "counting", "source": "test", "format": "mcqa", "answer": "a", "choices": ["a", "b"]}
    return Sample(**{**base, **fields})


# --- what is embedded --------------------------------------------------------------------


def test_sample_text_per_format():
    assert sample_text(_sample(question="How many?", choices=["2", "3"], answer="2")) == "How many?\n2\n3"
    foil = _sample(format="caption_foil", choices=["There is a star.", "There is no star."], answer="There is a star.")
    assert sample_text(foil) == "There is a star.\nThere is no star."
    binary = _sample(format="binary", statement="The star is red.", choices=["Yes", "No"], answer="Yes")
    assert sample_text(binary) == "The star is red."
    assert sample_text(_sample(format="open", context="Two frames.", question="What moved?", choices=[])) == (
        "Two frames.\nWhat moved?"
    )


def test_tiny_clip_loads_through_from_pretrained(clip_dir):
    from transformers import AutoProcessor, CLIPModel

    model = CLIPModel.from_pretrained(clip_dir)
    processor = AutoProcessor.from_pretrained(clip_dir)
    ids = processor.tokenizer(["There is a red circle."])["input_ids"][0]
    # CLIP pools at the first end-of-text token: the tokenizer must emit the config's id.
    assert ids[0] == model.config.text_config.bos_token_id
    assert ids[-1] == model.config.text_config.eos_token_id
    pixels = processor(images=[Image.new("RGB", (96, 96), "red")], return_tensors="pt")["pixel_values"]
    assert tuple(pixels.shape) == (1, 3, 64, 64)


def test_encoder_name_is_a_content_hash_of_the_weights(tmp_path, encoder):
    from mmctx.models.tiny import build_tiny_clip

    same = CLIPEncoder(str(build_tiny_clip(tmp_path / "clip", seed=0)), device="cpu")
    other = CLIPEncoder(str(build_tiny_clip(tmp_path / "other", seed=1)), device="cpu")
    assert same.name.split("#")[1] == encoder.name.split("#")[1]
    assert other.name != same.name


# --- shapes, norms, the joint cosine -----------------------------------------------------


def test_blocks_have_unit_rows_in_sample_order(pool, embedded):
    samples, _ = pool
    n = len(samples)
    assert embedded.ids == [s.id for s in samples]
    assert embedded.image.shape == (n, 32) and embedded.text.shape == (n, 32)
    assert embedded.joint.shape == (n, 64)
    for block in (embedded.image, embedded.text, embedded.joint):
        assert block.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(block, axis=1), 1.0, atol=1e-5)


def test_joint_cosine_is_the_mean_of_the_modality_cosines(embedded):
    joint = embedded.joint @ embedded.joint.T
    mean = (embedded.image @ embedded.image.T + embedded.text @ embedded.text.T) / 2
    np.testing.assert_allclose(joint, mean, atol=1e-5)


def test_text_block_is_the_sample_text(pool, embedded, encoder):
    samples, _ = pool
    expected = encoder.encode_texts([sample_text(s) for s in samples[:3]])
    np.testing.assert_allclose(embedded.text[:3], expected, atol=1e-6)


def test_several_images_are_averaged_then_renormalised(pool, encoder):
    samples, root = pool
    two = samples[0].model_copy(update={"id": "two-images", "images": [samples[0].images[0], samples[1].images[0]]})
    emb = embed_samples([two], root, encoder, cache_dir=None, progress=False)
    rows = encoder.encode_images([Image.open(root / rel).convert("RGB") for rel in two.images])
    expected = l2_normalise(rows.mean(axis=0, keepdims=True))[0]
    np.testing.assert_allclose(emb.image[0], expected, atol=1e-6)
    assert np.linalg.norm(emb.image[0]) == pytest.approx(1.0, abs=1e-6)


def test_a_sample_without_image_gets_a_zero_image_row(pool, encoder):
    samples, root = pool
    text_only = _sample(id="open-1", format="open", question="What moved?", choices=[], answer="the star")
    emb = embed_samples([samples[0], text_only], root, encoder, cache_dir=None, progress=False)
    assert not emb.image[1].any()
    assert np.linalg.norm(emb.joint[1]) == pytest.approx(1 / np.sqrt(2), abs=1e-6)
    only_open = embed_samples([text_only], root, encoder, cache_dir=None, progress=False)
    assert only_open.image.shape == (1, 32) and not only_open.image.any()


def test_embedding_is_deterministic(pool, clip_dir, embedded):
    samples, root = pool
    again = embed_samples(samples, root, CLIPEncoder(str(clip_dir), device="cpu", batch_size=8), None, progress=False)
    np.testing.assert_array_equal(again.image, embedded.image)
    np.testing.assert_array_equal(again.text, embedded.text)
    # Another batch size changes the BLAS blocking, so only the last float bits may move.
    rebatched = embed_samples(
        samples, root, CLIPEncoder(str(clip_dir), device="cpu", batch_size=5), None, progress=False
    )
    np.testing.assert_allclose(rebatched.joint, embedded.joint, atol=1e-6)


def test_long_texts_are_truncated_and_counted(pool, encoder):
    samples, root = pool
    long = samples[0].model_copy(update={"id": "long", "question": "Is there a red circle? " * 40})
    with pytest.warns(UserWarning, match="1 of 2 sample texts were truncated"):
        emb = embed_samples([samples[0], long], root, encoder, cache_dir=None, progress=False)
    assert np.isfinite(emb.text).all()


# --- the cache ---------------------------------------------------------------------------


def test_cache_encodes_only_new_or_changed_samples(own_pool, encoder, tmp_path):
    samples, root = own_pool
    cache = tmp_path / "cache"
    first = Counting(encoder)
    before = embed_samples(samples, root, first, cache, batch_size=4, progress=False)
    assert (first.texts, first.images) == (len(samples), len(samples))

    second = Counting(encoder)
    after = embed_samples(samples, root, second, cache, progress=False)
    assert (second.texts, second.images) == (0, 0)
    np.testing.assert_array_equal(after.joint, before.joint)
    assert [p.suffix for p in cache.iterdir()] == [".npz"]  # one file per encoder, no temporaries left

    # Sample 0's image file now holds sample 1's picture: exactly that sample is re-encoded.
    shutil.copyfile(root / samples[1].images[0], root / samples[0].images[0])
    third = Counting(encoder)
    changed = embed_samples(samples, root, third, cache, progress=False)
    assert (third.texts, third.images) == (1, 1)
    np.testing.assert_allclose(changed.image[0], before.image[1], atol=1e-6)
    np.testing.assert_array_equal(changed.image[1:], before.image[1:])

    # A changed text, and a new sample, are encoded too; nothing else.
    edited = samples[2].model_copy(update={"question": samples[2].question + " Look closely."})
    extra = samples[3].model_copy(update={"id": "new-sample"})
    fourth = Counting(encoder)
    embed_samples([*samples[:2], edited, *samples[3:], extra], root, fourth, cache, progress=False)
    assert (fourth.texts, fourth.images) == (2, 2)


def test_cache_survives_a_failed_run(own_pool, encoder, tmp_path):
    samples, root = own_pool
    cache = tmp_path / "cache"
    poisoned = Poisoned(encoder, sample_text(samples[-1]))
    with pytest.raises(EmbedError, match=samples[-1].id):
        embed_samples(samples, root, poisoned, cache, batch_size=4, progress=False)
    retry = Counting(encoder)
    embed_samples(samples, root, retry, cache, batch_size=4, progress=False)
    assert retry.texts == (len(samples) % 4 or 4)  # only the failed (last) batch is redone


def _write_cache(folder: Path, n: int, width: int = 16) -> tuple[EmbeddingCache, int]:
    """A cache file of ``n`` entries with text and image rows; returns it and its rows' byte size."""
    rng = np.random.default_rng(0)
    cache = EmbeddingCache(folder, "enc")
    image, text = (l2_normalise(rng.normal(size=(n, width))) for _ in range(2))
    for i in range(n):
        cache.put(f"s{i}", _Entry(f"d{i}", image[i], text[i]))
    cache.flush()
    return cache, 2 * n * width * 4


def test_reading_a_cache_holds_memory_linear_in_its_size(tmp_path):
    # Each entry's rows must come from one read of the stored arrays: a reader that indexes the
    # archive per entry decompresses (and keeps alive) a whole array copy for every row.
    import tracemalloc

    written, stored_bytes = _write_cache(tmp_path, 400)
    tracemalloc.start()
    try:
        read = EmbeddingCache(tmp_path, "enc")
        retained, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert set(read.entries) == set(written.entries)
    for sid, entry in written.entries.items():
        np.testing.assert_array_equal(read.entries[sid].text, entry.text)
        np.testing.assert_array_equal(read.entries[sid].image, entry.image)
        assert read.entries[sid].digest == entry.digest
    # Ids, digests and per-entry objects cost a few hundred bytes each; array copies per row, n × the arrays.
    budget = 4 * stored_bytes + 2_000 * len(written.entries)
    assert peak < budget, f"peak {peak} bytes reading {stored_bytes} bytes of rows"
    assert retained < budget, f"{retained} bytes kept for {stored_bytes} bytes of rows"


# --- save / load -------------------------------------------------------------------------


def test_save_load_round_trip_is_lossless(embedded, tmp_path):
    back = Embeddings.load(embedded.save(tmp_path / "emb.npz"))
    assert back.ids == embedded.ids and back.encoder == embedded.encoder
    np.testing.assert_array_equal(back.image, embedded.image)
    np.testing.assert_array_equal(back.text, embedded.text)

    text_only = Embeddings(["a", "b"], None, l2_normalise(np.eye(2, 3)), "st:x")
    again = Embeddings.load(text_only.save(tmp_path / "text.npz"))
    assert again.image is None
    np.testing.assert_array_equal(again.joint, text_only.text)


# --- bad input ---------------------------------------------------------------------------


def _assert_refused(samples, root, encoder, *needles):
    counting = Counting(encoder)
    with pytest.raises(EmbedError) as info:
        embed_samples(samples, root, counting, cache_dir=None, progress=False)
    for needle in needles:
        assert needle in str(info.value)
    assert (counting.texts, counting.images) == (0, 0), "nothing may be encoded before the check"


def test_missing_and_corrupt_images_are_named_before_encoding(own_pool, encoder):
    samples, root = own_pool
    (root / samples[3].images[0]).unlink()
    (root / samples[5].images[0]).write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    _assert_refused(samples, root, encoder, f"{samples[3].id}: missing image file", f"{samples[5].id}: corrupt image")


def test_an_image_whose_pixels_cannot_be_decoded_is_refused_before_encoding(own_pool, encoder):
    from fixtures.images import png_with_undecodable_pixels

    samples, root = own_pool
    (root / samples[2].images[0]).write_bytes(png_with_undecodable_pixels())  # `verify` passes this one
    _assert_refused(samples, root, encoder, f"{samples[2].id}: corrupt image file")


def test_truncated_image_is_refused(own_pool, encoder):
    samples, root = own_pool
    path = root / samples[0].images[0]
    path.write_bytes(path.read_bytes()[:200])
    _assert_refused(samples, root, encoder, samples[0].id)


def test_sample_with_nothing_to_embed_is_named(pool, encoder):
    samples, root = pool
    empty = _sample(id="empty-open", format="open", choices=[], answer="x")
    _assert_refused([*samples, empty], root, encoder, "empty-open: no image and no text")


def test_duplicate_ids_and_escaping_paths_are_named(pool, encoder):
    samples, root = pool
    escaping = samples[1].model_copy(update={"id": "escapes", "images": ["../outside.png"]})
    _assert_refused([samples[0], samples[0], escaping], root, encoder, "duplicate id", "escapes: image path")


def test_nan_output_names_the_sample(pool, encoder):
    samples, root = pool
    with pytest.raises(EmbedError, match=samples[4].id):
        embed_samples(samples, root, Poisoned(encoder, sample_text(samples[4])), None, progress=False)


def test_unloadable_encoder_names_the_spec(tmp_path):
    with pytest.raises(EncoderError, match="clip:/no/such/model"):
        load_encoder("clip:/no/such/model", device="cpu")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(EncoderError, match=f"clip:{broken}"):
        load_encoder(f"clip:{broken}", device="cpu")
    with pytest.raises(EncoderError, match="'siglip:x'.*unknown kind"):
        load_encoder("siglip:x")
    with pytest.raises(EncoderError, match="'clip'"):
        load_encoder("clip")


def test_load_encoder_builds_a_clip_encoder(clip_dir, encoder):
    loaded = load_encoder(f"clip:{clip_dir}", device="cpu", batch_size=4)
    assert isinstance(loaded, CLIPEncoder) and loaded.name == encoder.name


# --- optional encoders -------------------------------------------------------------------


def test_sentence_transformer_encoder_is_text_only(pool, tmp_path):
    pytest.importorskip("sentence_transformers")
    import torch
    from transformers import BertConfig, BertModel

    from mmctx.models.tiny import build_clip_tokenizer

    folder = tmp_path / "tiny-st"
    tokenizer = build_clip_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)

    samples, root = pool
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no sentence-transformers model found, creating mean pooling"
        encoder = load_encoder(f"st:{folder}", device="cpu")
    assert encoder.name.startswith("st:tiny-st#sha256:") and not encoder.has_images
    emb = embed_samples(samples, root, encoder, cache_dir=tmp_path / "cache", progress=False)
    assert emb.image is None and emb.text.shape == (len(samples), 32)
    np.testing.assert_array_equal(emb.joint, emb.text)
    np.testing.assert_allclose(np.linalg.norm(emb.joint, axis=1), 1.0, atol=1e-5)


def test_open_clip_encoder(pool):
    pytest.importorskip("open_clip")
    samples, root = pool
    encoder = load_encoder("open_clip:ViT-B-32", device="cpu", batch_size=8)  # random weights, nothing fetched
    assert encoder.name.startswith("open_clip:ViT-B-32/random-")
    emb = embed_samples(samples[:4], root, encoder, cache_dir=None, progress=False)
    assert emb.image.shape[0] == 4 and emb.text.shape[0] == 4
    np.testing.assert_allclose(np.linalg.norm(emb.joint, axis=1), 1.0, atol=1e-3)
