"""Typed chat messages: the only thing that passes from prompts to models.

A prompt is a tuple of `Message`s whose content parts are `TextPart`s or `ImagePart`s, images
in the order the model must see them. Backends turn this into their model's input; nothing
in here knows any model family.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image by path, with the hash of its bytes (what a cache key must depend on)."""

    path: str
    sha256: str

    @classmethod
    def from_path(cls, path: str | Path) -> ImagePart:
        resolved = str(Path(path).resolve())
        return cls(path=resolved, sha256=file_sha256(resolved))


Part = TextPart | ImagePart


@dataclass(frozen=True)
class Message:
    role: Role
    content: tuple[Part, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def images(self) -> list[ImagePart]:
        return [p for p in self.content if isinstance(p, ImagePart)]


Prompt = tuple[Message, ...]


def file_sha256(path: str) -> str:
    """The SHA-256 of the file's bytes. Cached by path, size and modification time: a prompt's
    images are hashed once per plan, and a file rewritten since (an image edited in a notebook
    session) is hashed again rather than keyed by its old content."""
    st = os.stat(path)
    return _sha256(path, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=65536)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def to_jsonable(prompt: Prompt, with_paths: bool = False) -> list[dict]:
    """A JSON form of the prompt; images appear as their content hash (and path if asked)."""
    out = []
    for m in prompt:
        parts = []
        for p in m.content:
            if isinstance(p, TextPart):
                parts.append({"type": "text", "text": p.text})
            else:
                parts.append({"type": "image", "sha256": p.sha256, **({"path": p.path} if with_paths else {})})
        out.append({"role": m.role, "content": parts})
    return out


def prompt_fingerprint(prompt: Prompt) -> str:
    """Hash of the rendered conversation: text and image *content*, never file paths."""
    canonical = json.dumps(to_jsonable(prompt), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def render_text(prompt: Prompt) -> str:
    """A human-readable rendering for logs and the viewer: ``<image:abcd1234>`` marks images."""
    lines = []
    for m in prompt:
        body = "".join(p.text if isinstance(p, TextPart) else f"<image:{p.sha256[:8]}>" for p in m.content)
        lines.append(f"[{m.role}] {body}")
    return "\n".join(lines)
