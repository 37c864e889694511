"""Decoded prompt images, shared by every request that shows the same image.

A few-shot grid shows each image many times: the same demo in many queries' prompts, a query
in every setting and under both scorers, and once per option when options are scored one
forward each. Decoding (PNG/JPEG → RGB) is done once per image content, keyed by the file's
SHA-256 (`ImagePart.sha256`), so an edited file is decoded again however its path reads.
The cache is bounded by decoded bytes, least recently used first out.

Callers must not change the images they get (PIL operations return new images; processors
convert to arrays): one object serves every prompt showing that image.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

# 512 MiB of RGB pixels: about 180 images of 1000 × 1000, or 19,000 of 96 × 96.
CACHE_BYTES = 512 * 2**20
CONTENT_KEY = "mmctx_sha256"


class ByteBoundedLRU:
    """A thread-safe LRU cache holding at most ``max_bytes`` of values (``size_of`` measures one);
    a value larger than the whole bound is handed back but not kept. Counts ``hits`` and ``misses``."""

    def __init__(self, max_bytes: int, size_of: Callable[[Any], int]):
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self.bytes = 0
        self._lock = threading.Lock()  # a backend may be called from several threads
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value kept under ``key``, else ``make()``, kept while it fits."""
        with self._lock:
            found = self._values.get(key)
            if found is not None:
                self._values.move_to_end(key)
                self.hits += 1
                return found
        value = make()  # outside the lock: decoding or preprocessing is the slow part
        size = self._size_of(value)
        with self._lock:
            self.misses += 1
            if size <= self.max_bytes and key not in self._values:
                self._values[key] = value
                self.bytes += size
                while self.bytes > self.max_bytes:
                    self.bytes -= self._size_of(self._values.popitem(last=False)[1])
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self.bytes = 0


class DecodedImages(ByteBoundedLRU):
    """RGB PIL images by content hash, holding at most ``max_bytes`` of pixels."""

    def __init__(self, max_bytes: int = CACHE_BYTES):
        super().__init__(max_bytes, lambda image: image.width * image.height * 3)

    def get(self, path: str, sha256: str) -> Any:  # type: ignore[override]
        """The image at ``path`` (whose bytes hash to ``sha256``) as an RGB PIL image."""
        return super().get(sha256, lambda: _decode(path, sha256))


def _decode(path: str, sha256: str) -> Any:
    from PIL import Image

    with Image.open(path) as image:
        rgb = image.convert("RGB")
    rgb.info[CONTENT_KEY] = sha256  # what later caches know it by (`content_key`)
    return rgb


def content_key(image: Any) -> str | None:
    """The content hash of an image this module decoded, else None."""
    info = getattr(image, "info", None)
    return info.get(CONTENT_KEY) if isinstance(info, dict) else None


DECODED = DecodedImages()


def load_rgb(path: str, sha256: str) -> Any:
    """The prompt image as RGB PIL, decoded once per content (see `DecodedImages`)."""
    return DECODED.get(path, sha256)
