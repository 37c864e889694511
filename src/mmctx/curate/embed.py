"""Joint image + text embeddings of samples: what query selection and demo retrieval compare.

FewMMBench (section 3.2) concatenates CLIP image features with CLIP text features. Here each
modality is L2-normalised first, so neither dominates by its norm, and the concatenation is
scaled by 1/√2. The dot product of two joint rows is then exactly the mean of their image
cosine and their text cosine::

    joint_i · joint_j = (cos_img(i, j) + cos_txt(i, j)) / 2

The image and text blocks are kept apart as well (re-ranking by one modality, figures).

Embedding is cached on disk per encoder, keyed by sample id and a hash of the sample's text
and image bytes, so a re-run encodes only new or changed samples. Every sample is read and
checked before the first one is encoded: a bad file fails in seconds, not an hour in.

    encoder = load_encoder("clip:openai/clip-vit-large-patch14")
    emb = embed_samples(pool, root, encoder, cache_dir=Path("runs/cache"))
    emb.joint  # (n, d_img + d_txt) float32
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from PIL import Image

from mmctx.models.revision import file_digest, folder_digest
from mmctx.schema import ImagePathError, Sample, image_file_problem, listed, resolve_image

logger = logging.getLogger(__name__)

# Bump when what is embedded for a sample changes, so older cache entries stop matching.
RECIPE = "mmctx-embed-v1"


class EncoderError(RuntimeError):
    """An encoder cannot be loaded or misbehaves; the message names the spec or encoder."""


class EmbedError(ValueError):
    """Samples that cannot be embedded; the message names every offending sample id."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(listed(f"{len(problems)} sample(s) cannot be embedded:", problems))


# --- What is embedded --------------------------------------------------------------------


def sample_text(sample: Sample) -> str:
    """The text embedded for ``sample``: everything a model reads of it, choices in stored order.

    - ``mcqa``: the question, then every option, one per line;
    - ``caption_foil``: every caption, one per line (the correct one is not singled out);
    - ``binary``: the statement (its choices are always Yes/No and would say nothing);
    - ``open``: the context, then the question.
    """
    if sample.format == "mcqa":
        parts = [sample.question, *sample.choices]
    elif sample.format == "caption_foil":
        parts = list(sample.choices)
    elif sample.format == "binary":
        parts = [sample.statement]
    else:
        parts = [sample.context, sample.question]
    return "\n".join(p.strip() for p in parts if p.strip())


# --- Encoders ----------------------------------------------------------------------------


class Encoder(Protocol):
    """Anything that turns images and texts into L2-normalised float32 rows.

    ``name`` identifies the weights (model id + revision, or a content hash of a local folder):
    it keys the cache and is recorded with every `Embeddings`. ``has_images`` is False for a
    text-only encoder, whose samples then have no image block. An encoder may also count, in
    an int attribute ``truncated``, the texts it had to cut; `embed_samples` reports it.
    """

    name: str
    has_images: bool

    def encode_images(self, images: list[Image.Image]) -> np.ndarray: ...  # (n, d_img)

    def encode_texts(self, texts: list[str]) -> np.ndarray: ...  # (n, d_txt)


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32; an all-zero row becomes NaN (and is caught later)."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def weights_id(model: str, revision: str | None = None, commit: str | None = None) -> str:
    """``<folder name>#sha256:<hash>`` for a local folder, else ``<hub id>@<commit or revision>``."""
    path = Path(model)
    if path.is_dir():
        return f"{path.resolve().name}#sha256:{folder_digest(path)[:16]}"
    return f"{model}@{commit or revision or 'unpinned'}"


def _pooled(output):
    # transformers 5 returns a model output whose pooler_output is the projected feature;
    # older versions returned the tensor itself.
    return output if hasattr(output, "shape") else output.pooler_output


class CLIPEncoder:
    """A transformers `CLIPModel` (hub id or local folder): fp16 on CUDA, fp32 on CPU.

    Texts longer than the text tower's context are truncated (the end-of-text token is kept);
    ``truncated`` counts them.
    """

    has_images = True

    def __init__(self, model: str, device: str = "auto", batch_size: int = 64, revision: str | None = None):
        import torch
        from transformers import AutoProcessor, CLIPModel

        self.device = _pick_device(device)
        self.dtype = torch.float16 if self.device.startswith("cuda") else torch.float32
        self.batch_size = batch_size
        try:
            self.processor = AutoProcessor.from_pretrained(model, revision=revision)
            self.model = CLIPModel.from_pretrained(model, revision=revision, dtype=self.dtype)
        except Exception as exc:
            raise EncoderError(f"CLIP encoder {model!r} could not be loaded: {exc}") from exc
        self.model.to(self.device).eval()
        self.tokenizer = self.processor.tokenizer
        self.max_tokens = int(self.model.config.text_config.max_position_embeddings)
        commit = getattr(self.model.config, "_commit_hash", None)
        # Half-precision features differ slightly, so they are cached apart from fp32 ones.
        precision = "" if self.dtype == torch.float32 else "+fp16"
        self.name = f"clip:{weights_id(model, revision, commit)}{precision}"
        self.truncated = 0

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        import torch

        # verbose=False: the over-length count is reported once per run, not logged per text.
        lengths = [len(ids) for ids in self.tokenizer(list(texts), verbose=False)["input_ids"]]
        self.truncated += sum(n > self.max_tokens for n in lengths)
        out = []
        for chunk in _chunks(list(texts), self.batch_size):
            inputs = self.tokenizer(
                list(chunk), padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
            ).to(self.device)
            with torch.inference_mode():
                out.append(_pooled(self.model.get_text_features(**inputs)).float().cpu().numpy())
        return l2_normalise(np.concatenate(out)) if out else np.zeros((0, self.model.config.projection_dim), np.float32)

    def encode_images(self, images: list[Image.Image]) -> np.ndarray:
        import torch

        out = []
        for chunk in _chunks(list(images), self.batch_size):
            pixels = self.processor.image_processor(images=list(chunk), return_tensors="pt")["pixel_values"]
            with torch.inference_mode():
                features = self.model.get_image_features(pixel_values=pixels.to(self.device, self.dtype))
            out.append(_pooled(features).float().cpu().numpy())
        return l2_normalise(np.concatenate(out)) if out else np.zeros((0, self.model.config.projection_dim), np.float32)


class OpenCLIPEncoder:
    """An `open_clip` model (optional extra ``open_clip_torch``), e.g. ``ViT-B-32`` / ``laion2b_s34b_b79k``.

    open_clip's tokenizer truncates to its context length silently; nothing is counted.
    """

    has_images = True

    def __init__(self, model_name: str, pretrained: str | None = None, device: str = "auto", batch_size: int = 64):
        try:
            import open_clip
        except ImportError as exc:
            raise EncoderError(f"open_clip encoder {model_name!r} needs `pip install open_clip_torch`") from exc
        import torch

        self.device = _pick_device(device)
        self.dtype = torch.float16 if self.device.startswith("cuda") else torch.float32
        self.batch_size = batch_size
        try:
            self.model, _, self.preprocess = open_clip.create_model_and_transforms(
                model_name,
                pretrained=pretrained,
                device=self.device,
                precision="fp16" if self.dtype == torch.float16 else "fp32",
            )
            self.tokenizer = open_clip.get_tokenizer(model_name)
        except Exception as exc:
            raise EncoderError(f"open_clip encoder {model_name!r}/{pretrained!r} could not be loaded: {exc}") from exc
        self.model.eval()
        precision = "" if self.dtype == torch.float32 else "+fp16"
        self.name = f"open_clip:{_open_clip_weights(model_name, pretrained)}{precision}"

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        import torch

        out = []
        for chunk in _chunks(list(texts), self.batch_size):
            with torch.inference_mode():
                out.append(self.model.encode_text(self.tokenizer(list(chunk)).to(self.device)).float().cpu().numpy())
        return l2_normalise(np.concatenate(out))

    def encode_images(self, images: list[Image.Image]) -> np.ndarray:
        import torch

        out = []
        for chunk in _chunks(list(images), self.batch_size):
            pixels = torch.stack([self.preprocess(im) for im in chunk]).to(self.device, self.dtype)
            with torch.inference_mode():
                out.append(self.model.encode_image(pixels).float().cpu().numpy())
        return l2_normalise(np.concatenate(out))


def _open_clip_weights(model_name: str, pretrained: str | None) -> str:
    if model_name.startswith("hf-hub:"):
        return f"{model_name}@unpinned"  # open_clip takes no hub revision to pin
    if not pretrained:
        # An unseeded random init: no two loads share weights, so no two may share cache entries.
        return f"{model_name}/random-{secrets.token_hex(4)}"
    if Path(pretrained).is_file():
        return f"{model_name}/{Path(pretrained).name}#sha256:{file_digest(Path(pretrained))[:16]}"
    return f"{model_name}/{pretrained}"


class SentenceTransformerEncoder:
    """A text-only `sentence_transformers` model (optional extra): samples get no image block."""

    has_images = False

    def __init__(self, model: str, device: str = "auto", batch_size: int = 64, revision: str | None = None):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EncoderError(
                f"sentence-transformers encoder {model!r} needs `pip install sentence-transformers`"
            ) from exc
        self.device = _pick_device(device)
        self.batch_size = batch_size
        try:
            self.model = SentenceTransformer(model, device=self.device, revision=revision)
        except Exception as exc:
            raise EncoderError(f"sentence-transformers encoder {model!r} could not be loaded: {exc}") from exc
        self.name = f"st:{weights_id(model, revision)}"
        self.max_tokens = self.model.max_seq_length
        self.truncated = 0

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        tokenizer = getattr(self.model, "tokenizer", None)
        if tokenizer is not None and self.max_tokens:
            ids = tokenizer(list(texts), verbose=False)["input_ids"]
            self.truncated += sum(len(row) > self.max_tokens for row in ids)
        rows = self.model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return l2_normalise(rows)

    def encode_images(self, images: list[Image.Image]) -> np.ndarray:
        raise EncoderError(f"{self.name} is a text-only encoder")


def load_encoder(spec: str, **kwargs) -> Encoder:
    """An encoder from a spec: ``clip:<id-or-path>``, ``open_clip:<arch>/<pretrained>``, ``st:<id-or-path>``.

    ``clip:builtin:shapes-clip`` is the reference CLIP shipped with mmctx (trained on shapes-world).

    ``open_clip:hf-hub:<org>/<name>`` loads an open_clip model straight from a hub repo.
    Keyword arguments go to the encoder (``device``, ``batch_size``, ``revision``, …).
    """
    kind, _, target = spec.partition(":")
    try:
        if not target:
            raise EncoderError("expected <kind>:<model>")
        if kind == "clip":
            if target.startswith("builtin:"):
                from mmctx.models import resolve_builtin

                target = str(resolve_builtin(target, kind="encoder"))
            return CLIPEncoder(target, **kwargs)
        if kind == "open_clip":
            if target.startswith("hf-hub:"):
                return OpenCLIPEncoder(target, None, **kwargs)
            arch, _, pretrained = target.partition("/")
            return OpenCLIPEncoder(arch, pretrained or None, **kwargs)
        if kind == "st":
            return SentenceTransformerEncoder(target, **kwargs)
        raise EncoderError(f"unknown kind {kind!r}; use clip:, open_clip: or st:")
    except (EncoderError, TypeError, ValueError, FileNotFoundError) as exc:
        raise EncoderError(f"encoder spec {spec!r}: {exc}") from exc


# --- Embeddings --------------------------------------------------------------------------


@dataclass
class Embeddings:
    """Per-sample image and text blocks, in the order of ``ids``; rows are unit vectors.

    ``image`` is None for a text-only encoder. A sample without any image (allowed only for
    the ``open`` format) has an all-zero image row: its image cosine counts as 0.
    """

    ids: list[str]
    image: np.ndarray | None  # (n, d_img)
    text: np.ndarray  # (n, d_txt)
    encoder: str

    def __post_init__(self) -> None:
        self.ids = list(self.ids)
        self.text = np.asarray(self.text, dtype=np.float32)
        if self.image is not None:
            self.image = np.asarray(self.image, dtype=np.float32)
        for block in (self.image, self.text):
            if block is not None and (block.ndim != 2 or len(block) != len(self.ids)):
                raise ValueError(f"block of shape {block.shape} does not match {len(self.ids)} ids")

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def joint(self) -> np.ndarray:
        """``concat(image, text) / √2`` (or the text block alone): unit rows whose dot product is
        ``(cos_img + cos_txt) / 2``. Every row with an image has norm exactly 1 (both blocks are
        unit); a row whose image block is zero keeps norm 1/√2 rather than being inflated.
        """
        if self.image is None:
            return self.text.copy()
        return (np.concatenate([self.image, self.text], axis=1) / np.float32(np.sqrt(2.0))).astype(np.float32)

    def save(self, path: Path) -> Path:
        """Write an ``.npz`` (no pickles), atomically; `load` gives back identical arrays."""
        arrays = {"ids": np.array(self.ids, dtype=str), "text": self.text, "encoder": np.array(self.encoder)}
        if self.image is not None:
            arrays["image"] = self.image
        _write_npz(Path(path), arrays)
        return Path(path)

    @classmethod
    def load(cls, path: Path) -> Embeddings:
        with np.load(Path(path), allow_pickle=False) as data:
            image = data["image"] if "image" in data.files else None
            return cls([str(i) for i in data["ids"]], image, data["text"], str(data["encoder"]))


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    # Written beside the target and moved over it: readers see the old file or the new one, never half.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a cache or result is for every reader
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- The cache ---------------------------------------------------------------------------


@dataclass
class _Entry:
    digest: str
    image: np.ndarray | None
    text: np.ndarray


class EmbeddingCache:
    """One ``.npz`` per encoder: sample id → (content digest, image row, text row).

    An entry is used only when its digest still matches, so an edited sample is re-encoded.
    Entries of samples not asked for stay: one cache serves several pools. Without a folder
    it lives in memory only.
    """

    def __init__(self, folder: Path | None, encoder: str):
        self.encoder = encoder
        self.path = None if folder is None else Path(folder) / _cache_file_name(encoder)
        self.entries: dict[str, _Entry] = {}
        self.dirty = False
        if self.path is not None and self.path.exists():
            self._read()

    def _read(self) -> None:
        try:
            # Indexing an `NpzFile` (``data["text"]``) decompresses the whole member on every
            # access, so each stored array is read exactly once here and entries are row views
            # of it: reading is linear in the cache's size, in time and in memory.
            with np.load(self.path, allow_pickle=False) as data:
                if str(data["encoder"]) != self.encoder:
                    return
                arrays = {name: data[name] for name in ("ids", "digests", "text", "image") if name in data.files}
            ids, digests, text, image = (arrays.get(name) for name in ("ids", "digests", "text", "image"))
            lengths = {len(a) for a in (ids, digests, text, image) if a is not None}
            if len(lengths) != 1:
                raise ValueError(f"arrays of unequal lengths {sorted(lengths)}")
            for i, (sid, digest) in enumerate(zip(ids.tolist(), digests.tolist())):
                self.entries[sid] = _Entry(digest, None if image is None else image[i], text[i])
        except Exception as exc:  # a cache is disposable: a bad one is rebuilt, not fatal
            warnings.warn(f"ignoring unreadable embedding cache {self.path}: {exc}", stacklevel=3)
            self.entries = {}

    def get(self, sample_id: str, digest: str) -> _Entry | None:
        entry = self.entries.get(sample_id)
        return entry if entry is not None and entry.digest == digest else None

    def put(self, sample_id: str, entry: _Entry) -> None:
        self.entries[sample_id] = entry
        self.dirty = True

    def flush(self) -> None:
        if self.path is None or not self.dirty or not self.entries:
            return
        ids = list(self.entries)
        entries = [self.entries[i] for i in ids]
        arrays = {
            "encoder": np.array(self.encoder),
            "ids": np.array(ids, dtype=str),
            "digests": np.array([e.digest for e in entries], dtype=str),
            "text": np.stack([e.text for e in entries]),
        }
        if entries[0].image is not None:
            arrays["image"] = np.stack([e.image for e in entries])
        _write_npz(self.path, arrays)
        self.dirty = False


def _cache_file_name(encoder: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", encoder).strip("-")[:60]
    return f"{slug}-{hashlib.sha256(encoder.encode()).hexdigest()[:12]}.npz"


# --- Embedding a pool --------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """One sample, read and checked: its text, its image files and their content digest."""

    sample: Sample
    text: str
    images: tuple[Path, ...]
    digest: str


def _image_bytes(root: Path, rel: str) -> tuple[Path | None, bytes | str]:
    """(path, bytes) of a readable image, or (None, what is wrong with it)."""
    # Lexical check: a pool is the user's own folder, where image folders are often symlinks
    # (COCO, Visual Genome); what a record may not do is be absolute or climb out with "..".
    try:
        path = resolve_image(root, rel, confine_links=False)
    except ImagePathError as exc:
        return None, f"image path {exc}"
    problem = image_file_problem(path, rel)  # the pixels decoded, as validation does
    if problem is not None:
        return None, problem
    return path, path.read_bytes()


def _digest(text: str, images: list[bytes]) -> str:
    h = hashlib.sha256(RECIPE.encode() + b"\x00")
    for part in (text.encode(), *images):
        # Length-prefixed, so no two different (text, images) runs can hash alike.
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _prepare(samples: list[Sample], root: Path, text_only: bool, progress) -> list[_Item]:
    """Every sample read, hashed and checked; every problem raised at once, before any encoding."""
    problems: list[str] = []
    for sid, n in Counter(s.id for s in samples).items():
        if n > 1:
            problems.append(f"{sid}: duplicate id ({n} samples)")
    items = []
    task = progress.add_task("checking samples", total=len(samples))
    for sample in samples:
        text = sample_text(sample)
        paths, blobs = [], []
        for rel in sample.images:
            path, data = _image_bytes(root, rel)
            if path is None:
                problems.append(f"{sample.id}: {data}")
            else:
                paths.append(path)
                blobs.append(data)
        if not text and not sample.images:
            problems.append(f"{sample.id}: no image and no text to embed")
        elif not text and text_only:
            problems.append(f"{sample.id}: no text, and the encoder is text-only")
        items.append(_Item(sample, text, tuple(paths), _digest(text, blobs)))
        progress.advance(task)
    progress.remove_task(task)
    if problems:
        raise EmbedError(problems)
    return items


def _load_rgb(item: _Item) -> list[Image.Image]:
    try:
        images = []
        for path in item.images:
            with Image.open(path) as im:
                images.append(im.convert("RGB"))
        return images
    except Exception as exc:  # verify() passed, yet the pixels would not decode
        raise EmbedError([f"{item.sample.id}: image could not be decoded: {exc}"]) from exc


def _encode_batch(items: Sequence[_Item], encoder: Encoder) -> list[_Entry]:
    """One encoder call per modality for a batch of samples."""
    text = l2_normalise(_checked(encoder.encode_texts([it.text for it in items]), len(items), encoder, "encode_texts"))
    image = _image_rows(items, encoder) if encoder.has_images else [None] * len(items)
    bad = [
        f"{it.sample.id}: {encoder.name} returned a non-finite embedding"
        for it, t, im in zip(items, text, image)
        if not np.isfinite(t).all() or (im is not None and not np.isfinite(im).all())
    ]
    if bad:
        raise EmbedError(bad)
    return [_Entry(it.digest, im, t) for it, im, t in zip(items, image, text)]


def _image_rows(items: Sequence[_Item], encoder: Encoder) -> list[np.ndarray]:
    """Per sample, the mean of its unit image rows, re-normalised; zeros for a sample with no image."""
    owners, images = [], []
    for i, item in enumerate(items):
        loaded = _load_rgb(item)
        owners += [i] * len(loaded)
        images += loaded
    if not images:
        # Only image-less samples in this batch: one blank probe tells the block's width.
        width = _checked(encoder.encode_images([Image.new("RGB", (8, 8))]), 1, encoder, "encode_images").shape[1]
        return [np.zeros(width, np.float32) for _ in items]
    rows = l2_normalise(_checked(encoder.encode_images(images), len(images), encoder, "encode_images"))
    owner = np.asarray(owners)
    out = []
    for i in range(len(items)):
        mine = rows[owner == i]
        out.append(
            l2_normalise(mine.mean(axis=0, keepdims=True))[0] if len(mine) else np.zeros(rows.shape[1], np.float32)
        )
    return out


def _checked(rows: np.ndarray, n: int, encoder: Encoder, method: str) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    if rows.ndim != 2 or len(rows) != n:
        raise EncoderError(f"{encoder.name}.{method} returned shape {rows.shape} for {n} inputs")
    return rows


def _progress(show: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class SamplesPerSecond(ProgressColumn):
        def render(self, task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("-- samples/s" if speed is None else f"{speed:.1f} samples/s")

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        SamplesPerSecond(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        disable=not show,
    )


FLUSH_SECONDS = 60.0  # long runs checkpoint the cache this often, so an interruption loses little


def embed_samples(
    samples: list[Sample],
    root: Path,
    encoder: Encoder,
    cache_dir: Path | None,
    batch_size: int = 64,
    progress: bool = True,
) -> Embeddings:
    """Image and text blocks for ``samples`` (in their order), encoding only what the cache lacks.

    Image paths resolve against ``root``. Every sample is checked first (duplicate ids, no
    image and no text, missing, escaping or corrupt image files) and all problems are raised
    together as `EmbedError`, before any encoding. A sample's text is `sample_text`; several
    images of one sample are averaged after normalising and the mean is re-normalised.
    """
    root = Path(root)
    cache = EmbeddingCache(cache_dir, encoder.name)
    truncated_before = getattr(encoder, "truncated", 0)
    with _progress(progress) as bar:
        items = _prepare(samples, root, text_only=not encoder.has_images, progress=bar)
        todo = [it for it in items if cache.get(it.sample.id, it.digest) is None]
        logger.info(
            "%s: %d of %d samples cached, encoding %d", encoder.name, len(items) - len(todo), len(items), len(todo)
        )
        task = bar.add_task(f"embedding ({encoder.name})", total=len(todo))
        last_flush = time.monotonic()
        try:
            for batch in _chunks(todo, batch_size):
                for item, entry in zip(batch, _encode_batch(batch, encoder)):
                    cache.put(item.sample.id, entry)
                bar.advance(task, len(batch))
                if time.monotonic() - last_flush > FLUSH_SECONDS:
                    cache.flush()
                    last_flush = time.monotonic()
        finally:
            cache.flush()  # what was encoded before an error or an interrupt is kept
    truncated = getattr(encoder, "truncated", 0) - truncated_before
    if truncated:
        warnings.warn(f"{truncated} of {len(todo)} sample texts were truncated by {encoder.name}", stacklevel=2)
    return _assemble(items, cache, encoder)


def _assemble(items: list[_Item], cache: EmbeddingCache, encoder: Encoder) -> Embeddings:
    ids = [it.sample.id for it in items]
    if not items:
        empty = np.zeros((0, 0), np.float32)
        return Embeddings(ids, empty if encoder.has_images else None, empty, encoder.name)
    entries = [cache.get(it.sample.id, it.digest) for it in items]
    text = np.stack([e.text for e in entries])
    image = np.stack([e.image for e in entries]) if encoder.has_images else None
    return Embeddings(ids, image, text, encoder.name)


__all__ = [
    "CLIPEncoder",
    "EmbedError",
    "EmbeddingCache",
    "Embeddings",
    "Encoder",
    "EncoderError",
    "OpenCLIPEncoder",
    "SentenceTransformerEncoder",
    "embed_samples",
    "l2_normalise",
    "load_encoder",
    "sample_text",
    "weights_id",
]
