"""Image preprocessing once per image content: a cache in front of a processor's image processor.

A few-shot grid shows each image many times (a demo in many prompts, a query in every setting,
under both scorers, once more per option when options are scored one forward each), and a
processor preprocesses every image of every call again: resizing, normalising, tiling.
`CachedImageProcessor` takes the processor's place for images (for the image processors in
`ASSEMBLED`): it preprocesses each image alone,
once per (content, call arguments), and assembles a call's batch from those results the way the
processor batches them — tensors concatenated image after image (or, for processors that take
images per prompt, image after image within a prompt and prompt after prompt), zero-padded where
sizes differ, which is how transformers' image processors pad pixels, masks and tiles.

That assembly is checked, not assumed: the first `CHECKS` calls, and one in `CHECK_EVERY` after
them, also go through the real image processor and are compared exactly (`torch.equal` on every
tensor, equality on everything else); which layout assembles the batch is learnt there. One
difference switches the cache off for good (logged, and recorded with the run as
``image_preprocessing.cached: false``) and the real result is used. Images are known by the content
hash the image loader attaches (`mmctx.models.images`); an image without one is processed as
the processor would, uncached.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from mmctx.models.images import ByteBoundedLRU, content_key

log = logging.getLogger(__name__)

# Image processors whose batches are their images' one-image results side by side (tested per
# family on batches of mixed image counts and sizes: tests/test_image_cache.py). Others (LLaVA-
# OneVision's, which counts images per prompt and pads tiles per batch; Phi-4-multimodal's, which
# pads crops per batch) preprocess every call as without the cache: checks on a few calls can
# pass by chance and then a later batch assembles differently.
ASSEMBLED = frozenset({
    "CLIPImageProcessor", "Gemma3ImageProcessor", "GotOcr2ImageProcessor", "Idefics2ImageProcessor",
    "Idefics3ImageProcessor", "PixtralImageProcessor", "Qwen2VLImageProcessor", "SiglipImageProcessor",
})  # fmt: skip
CHECKS = 3  # calls compared against the real image processor before the cache is trusted
CHECK_EVERY = 256  # and one call in this many after that, in case a later batch assembles differently
MAX_BYTES = 2**30  # preprocessed tensors kept, least recently used out (1 GiB)


class CachedImageProcessor:
    """Stands in for ``inner`` (an HF image processor); every other attribute is ``inner``'s."""

    def __init__(self, inner: Any, checks: int = CHECKS, max_bytes: int = MAX_BYTES):
        self._inner = inner
        self._checks_left = checks
        self._results = ByteBoundedLRU(max_bytes, _nbytes)
        self._calls = 0
        self.enabled = True
        self._layout: str | None = None  # "nested" or "flat", once a check has shown which

    @staticmethod
    def assembles(inner: Any) -> bool:
        """Whether ``inner`` is an image processor this cache is known to assemble batches for
        (its PIL and torchvision implementations alike)."""
        name = type(inner).__name__
        return name.removesuffix("Pil").removesuffix("Fast") in ASSEMBLED

    @property
    def inner(self) -> Any:
        """The image processor this cache stands in front of."""
        return self._inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __call__(self, images: Any, **kwargs: Any) -> Any:
        nested = isinstance(images, (list, tuple)) and bool(images) and isinstance(images[0], (list, tuple))
        prompts = [list(p) for p in images] if nested else [list(images)] if isinstance(images, (list, tuple)) else []
        keys = [[content_key(im) for im in p] for p in prompts]
        if not self.enabled or kwargs.get("return_tensors") != "pt" or not prompts or any(None in p for p in keys):
            return self._inner(images, **kwargs)
        self._calls += 1
        if self._calls % CHECK_EVERY == 0:
            self._checks_left = max(self._checks_left, 1)
        arguments = repr(sorted(kwargs.items()))
        per_prompt = [
            [self._one(im, key, arguments, nested, kwargs) for im, key in zip(p, k)] for p, k in zip(prompts, keys)
        ]
        if self._checks_left > 0 or self._layout is None:
            return self._check(images, kwargs, per_prompt, nested)
        try:
            return _as_batch(_merge(per_prompt, self._layout))
        except TypeError as exc:  # an output this assembly does not know: the processor's own way
            self._disable(str(exc))
            return self._inner(images, **kwargs)

    def _one(self, image: Any, key: str, arguments: str, nested: bool, kwargs: dict) -> dict:
        return self._results.get(
            (key, arguments, nested), lambda: dict(self._inner([[image]] if nested else [image], **kwargs))
        )

    @property
    def hits(self) -> int:
        return self._results.hits

    @property
    def misses(self) -> int:
        return self._results.misses

    def usage(self) -> dict[str, Any]:
        """What a run records: whether the cache served, images preprocessed, results reused."""
        return {"cached": self.enabled, "preprocessed": self.misses, "reused": self.hits}

    def _check(self, images: Any, kwargs: dict, per_prompt: list[list[dict]], nested: bool) -> Any:
        """The real result; the layout that assembles it exactly is kept (none: the cache is off)."""
        real = dict(self._inner(images, **kwargs))
        self._checks_left -= 1
        # Images given per prompt may come back per prompt (Idefics) or flat (Gemma 3, Qwen-VL).
        candidates = [self._layout] if self._layout else (["nested", "flat"] if nested else ["flat"])
        for layout in candidates:
            try:
                if _same(real, _merge(per_prompt, layout)):
                    self._layout = layout
                    return _as_batch(real)
            except TypeError:
                continue
        self._disable("no assembly of one-image results equals the processor's batch")
        return _as_batch(real)

    def _disable(self, why: str) -> None:
        self.enabled = False
        log.info(
            "%s: images preprocessed one at a time do not assemble into what the processor makes of a batch "
            "(%s); preprocessing every image of every prompt instead (slower, same results)",
            type(self._inner).__name__, why,
        )  # fmt: skip


def _as_batch(merged: dict) -> Any:
    from transformers import BatchFeature

    return BatchFeature(merged)


def _merge(per_prompt: list[list[dict]], layout: str) -> dict:
    """One batch from one-image results: per prompt on the first two axes ("nested"), or image
    after image on the first axis ("flat")."""
    out: dict[str, Any] = {}
    for name in per_prompt[0][0]:
        if layout == "nested":
            out[name] = _nested([[r[name] for r in prompt] for prompt in per_prompt])
        else:
            out[name] = _flat([r[name] for prompt in per_prompt for r in prompt])
    return out


def _nested(groups: list[list[Any]]) -> Any:
    """Results of one prompt with one image each, as a (prompt, image, …) batch, zero-padded."""
    first = groups[0][0]
    if isinstance(first, list):  # e.g. tile rows and columns: a list per prompt, an item per image
        return [[item for value in group for item in value[0]] for group in groups]
    values = [v for group in groups for v in group]
    if not isinstance(first, torch.Tensor) or any(v.dim() < 2 or v.shape[:2] != (1, 1) for v in values):
        raise TypeError("a one-image result is not shaped (1 prompt, 1 image, …)")
    widest = max(len(g) for g in groups)
    if all(v.shape == first.shape for v in values):  # the usual case: whole prompts at a time
        # Each prompt's images are copied once, straight into its row: no row tensor in between.
        full = all(len(g) == widest for g in groups)
        out = (first.new_empty if full else first.new_zeros)((len(groups), widest, *first.shape[2:]))
        for row, group in enumerate(groups):
            torch.cat([v[0] for v in group], dim=0, out=out[row, : len(group)])
        return out
    rest = [max(v.shape[d] for v in values) for d in range(2, first.dim())]
    out = first.new_zeros((len(groups), widest, *rest))
    for row, group in enumerate(groups):
        for column, value in enumerate(group):
            out[(row, column, *(slice(0, n) for n in value.shape[2:]))] = value[0, 0]
    return out


def _flat(values: list[Any]) -> Any:
    """Results of one image each, concatenated on the first axis, zero-padded on the others."""
    first = values[0]
    if isinstance(first, list):
        return [item for value in values for item in value]
    if not isinstance(first, torch.Tensor) or first.dim() == 0:
        raise TypeError(f"cannot assemble a batch of {type(first).__name__}")
    rest = [max(v.shape[d] for v in values) for d in range(1, first.dim())]
    if all(list(v.shape[1:]) == rest for v in values):
        return torch.cat(values)
    out = first.new_zeros((sum(v.shape[0] for v in values), *rest))
    start = 0
    for value in values:
        out[(slice(start, start + value.shape[0]), *(slice(0, n) for n in value.shape[1:]))] = value
        start += value.shape[0]
    return out


def _nbytes(result: dict) -> int:
    return sum(v.numel() * v.element_size() for v in result.values() if isinstance(v, torch.Tensor))


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for name, value in a.items():
        other = b[name]
        if isinstance(value, torch.Tensor):
            if not isinstance(other, torch.Tensor) or value.dtype != other.dtype or not torch.equal(value, other):
                return False
        elif value != other:
            return False
    return True
