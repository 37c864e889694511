"""Vision ablations: the same prompt with images removed or replaced, for shortcut checks.

A benchmark item that a model answers without seeing its image measures a text prior, not
vision. The ablations ask the same conversation with:

- ``blind``: the query's images removed; demonstrations keep theirs;
- ``blind-all``: every image removed, demonstrations' too (a text-only prompt);
- ``blank``: each query image replaced by a uniform grey image of the same size, so the model
  still gets an image where it expects one (some models behave differently with no image at all).

The grey images are real PNG files, one per size, named by the size (``grey-<w>x<h>.png``) in a
folder the caller picks (a run keeps them in its own folder, so its stored prompts never point
at a file another folder owns). Their bytes depend only on the size, so a prompt's image hash is
the same on every machine and every resume, and a deleted file is written again, identically.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mmctx.prompts.messages import ImagePart, Part

Vision = Literal["full", "blind", "blind-all", "blank"]
VISIONS: tuple[Vision, ...] = ("full", "blind", "blind-all", "blank")

GREY = (128, 128, 128)  # mid-grey: no edge, colour or brightness cue


class AblationError(ValueError):
    """An ablation cannot be applied (a blank setting without a folder for its grey images)."""


@dataclass(frozen=True)
class Ablation:
    """Which images a prompt keeps; ``blank_dir`` holds the grey images of ``blank``."""

    vision: Vision = "full"
    blank_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.vision not in VISIONS:
            raise AblationError(f"unknown vision {self.vision!r}; choose from {VISIONS}")
        if self.vision == "blank" and self.blank_dir is None:
            raise AblationError("a blank setting needs a folder for its grey images (blank_dir)")

    def query_images(self, parts: list[Part]) -> list[Part]:
        if self.vision in ("blind", "blind-all"):
            return []
        if self.vision == "blank":
            assert self.blank_dir is not None  # checked in __post_init__
            return [grey_like(p, self.blank_dir) if isinstance(p, ImagePart) else p for p in parts]
        return parts

    def demo_images(self, parts: list[Part]) -> list[Part]:
        return [] if self.vision == "blind-all" else parts


FULL = Ablation()


def grey_like(image: ImagePart, folder: Path) -> ImagePart:
    """A grey image of ``image``'s size, written to ``folder`` unless it is there already."""
    from PIL import Image

    with Image.open(image.path) as img:  # reads the header only
        width, height = img.size
    return ImagePart.from_path(grey_image(width, height, Path(folder)))


def grey_image(width: int, height: int, folder: Path) -> Path:
    """The path of the grey ``width`` × ``height`` PNG in ``folder``, writing it if missing."""
    from PIL import Image

    path = folder / f"grey-{width}x{height}.png"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    # Written beside its final name and renamed: two processes planning at once never see half a file.
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".png.tmp")
    os.close(fd)
    try:
        Image.new("RGB", (width, height), GREY).save(tmp, format="PNG")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
