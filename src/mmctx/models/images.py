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
from typing import Any

# 512 MiB of RGB pixels: about 180 images of 1000 × 1000, or 19,000 of 96 × 96.
CACHE_BYTES = 512 * 2**20
CONTENT_KEY = "mmctx_sha256"


class DecodedImages:
    """An LRU cache of RGB PIL images by content hash, holding at most ``max_bytes`` of pixels."""

    def __init__(self, max_bytes: int = CACHE_BYTES):
        self.max_bytes = max_bytes
        self._images: OrderedDict[str, Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # a backend may be called from several threads
        self.hits = self.misses = 0

    def get(self, path: str, sha256: str) -> Any:
        """The image at ``path`` (whose bytes hash to ``sha256``) as an RGB PIL image."""
        with self._lock:
            image = self._images.get(sha256)
            if image is not None:
                self._images.move_to_end(sha256)
                self.hits += 1
                return image
        image = _decode(path, sha256)
        size = image.width * image.height * 3
        with self._lock:
            self.misses += 1
            if size <= self.max_bytes and sha256 not in self._images:
                self._images[sha256] = image
                self._bytes += size
                while self._bytes > self.max_bytes:
                    _, old = self._images.popitem(last=False)
                    self._bytes -= old.width * old.height * 3
        return image

    def clear(self) -> None:
        with self._lock:
            self._images.clear()
            self._bytes = 0


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
