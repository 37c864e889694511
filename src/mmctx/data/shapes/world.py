"""The shapes world: objects, scenes, non-overlapping placement and rendering.

A scene is a list of frames; each frame holds flat-coloured objects (and optionally arrows
between them). Rendering draws no anti-aliasing, so every object's centre pixel is exactly
its colour: ground truth can be checked on the image itself, not only in the scene graph.
Multi-frame scenes render as one image, frames side by side with a thin separator, the way
MileBench concatenates a sequence into a single composite.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from PIL import Image, ImageDraw

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "diamond")

# Far apart in hue and lightness so a tiny vision model (and a human) never confuses them.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 160, 50),
    "blue": (30, 80, 220),
    "yellow": (245, 205, 20),
    "purple": (140, 50, 180),
    "orange": (245, 125, 20),
}

# Size name -> radius of the object's bounding circle, in pixels.
SIZES: dict[str, int] = {"small": 8, "large": 13}

FRAME = 96  # side of one square frame, pixels
SEPARATOR = 2  # width of the bar between frames
MARGIN = 3  # minimum distance between an object and the frame border
GAP = 6  # minimum empty space between two objects' bounding circles
BACKGROUND = (255, 255, 255)
INK = (70, 70, 70)  # arrows and separators: grey, never one of the object colours


class Retry(Exception):
    """A random draw produced an unusable scene; the generator draws again from the same RNG."""


@dataclass(frozen=True)
class Obj:
    """One object. ``id`` stays the same across frames, so a scene graph can track it over time."""

    id: int
    shape: str
    colour: str
    size: str
    x: int
    y: int

    @property
    def r(self) -> int:
        return SIZES[self.size]

    def moved(self, x: int, y: int) -> Obj:
        return Obj(self.id, self.shape, self.colour, self.size, x, y)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "r": self.r}


@dataclass
class Frame:
    objects: list[Obj]
    arrows: list[tuple[int, int]] = field(default_factory=list)  # (from id, to id)

    def get(self, obj_id: int) -> Obj | None:
        return next((o for o in self.objects if o.id == obj_id), None)


@dataclass
class Scene:
    frames: list[Frame]

    @classmethod
    def single(cls, objects: list[Obj], arrows: Sequence[tuple[int, int]] = ()) -> Scene:
        return cls([Frame(list(objects), list(arrows))])

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame_size": FRAME,
            "separator": SEPARATOR,
            "frames": [
                {"objects": [o.to_dict() for o in f.objects], "arrows": [list(a) for a in f.arrows]}
                for f in self.frames
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scene:
        frames = []
        for f in data["frames"]:
            objects = [Obj(o["id"], o["shape"], o["colour"], o["size"], o["x"], o["y"]) for o in f["objects"]]
            frames.append(Frame(objects, [(a[0], a[1]) for a in f.get("arrows", [])]))
        return cls(frames)


def frame_origin(index: int) -> int:
    """x offset of frame ``index`` inside the composite image."""
    return index * (FRAME + SEPARATOR)


def strip_width(frames: int) -> int:
    """Width of the composite image of ``frames`` frames side by side."""
    return frames * FRAME + (frames - 1) * SEPARATOR


# --- placement -------------------------------------------------------------------------------


def inside(x: float, y: float, r: int) -> bool:
    return MARGIN + r <= x <= FRAME - MARGIN - r and MARGIN + r <= y <= FRAME - MARGIN - r


def clear_of(x: float, y: float, r: int, others: Iterable[Obj], gap: int = GAP) -> bool:
    return all(math.hypot(x - o.x, y - o.y) >= r + o.r + gap for o in others)


def free_spot(rng: random.Random, r: int, others: Iterable[Obj], tries: int = 300) -> tuple[int, int]:
    """A uniformly drawn position where a radius-``r`` object fits without touching ``others``."""
    others = list(others)
    lo, hi = MARGIN + r, FRAME - MARGIN - r
    for _ in range(tries):
        x, y = rng.randint(lo, hi), rng.randint(lo, hi)
        if clear_of(x, y, r, others):
            return x, y
    raise Retry(f"no room for a radius-{r} object")


Spec = tuple[str, str, str]  # (shape, colour, size)


def layout(rng: random.Random, specs: Sequence[Spec], placed: Sequence[Obj] = ()) -> list[Obj]:
    """Place ``specs`` at random free spots around the already ``placed`` objects; ids continue theirs."""
    objects = list(placed)
    next_id = max((o.id for o in objects), default=-1) + 1
    for shape, colour, size in specs:
        x, y = free_spot(rng, SIZES[size], objects)
        objects.append(Obj(next_id, shape, colour, size, x, y))
        next_id += 1
    return objects[len(placed) :]


def random_size(rng: random.Random, p_large: float = 0.5) -> str:
    return "large" if rng.random() < p_large else "small"


def point_segment_distance(px: float, py: float, ax: float, ay: float, bx: float, by: float) -> float:
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy or 1)))
    return math.hypot(px - (ax + t * dx), py - (ay + t * dy))


# --- rendering -------------------------------------------------------------------------------


def _outline(shape: str, x: float, y: float, r: float) -> list[tuple[float, float]]:
    """Polygon vertices for the angular shapes; each contains its centre pixel."""
    if shape == "square":
        h = r * 0.85  # so a square looks about as big as a circle of the same radius
        return [(x - h, y - h), (x + h, y - h), (x + h, y + h), (x - h, y + h)]
    if shape == "triangle":
        return [(x, y - r), (x + r * 0.95, y + r * 0.75), (x - r * 0.95, y + r * 0.75)]
    if shape == "diamond":
        return [(x, y - r), (x + r * 0.8, y), (x, y + r), (x - r * 0.8, y)]
    if shape == "star":
        points = []
        for k in range(10):
            radius = r if k % 2 == 0 else r * 0.45
            angle = -math.pi / 2 + k * math.pi / 5
            points.append((x + radius * math.cos(angle), y + radius * math.sin(angle)))
        return points
    raise ValueError(f"unknown shape {shape!r}")


def draw_object(draw: ImageDraw.ImageDraw, obj: Obj, dx: int = 0, fill: Any = None) -> None:
    """``obj`` in its colour, or in ``fill`` (e.g. an object id on a label map)."""
    fill = COLOURS[obj.colour] if fill is None else fill
    x, y, r = obj.x + dx, obj.y, obj.r
    if obj.shape == "circle":
        draw.ellipse((x - r, y - r, x + r, y + r), fill=fill)
    else:
        draw.polygon(_outline(obj.shape, x, y, r), fill=fill)


def draw_arrow(draw: ImageDraw.ImageDraw, src: Obj, dst: Obj, dx: int = 0) -> None:
    """A line from just outside ``src`` to a head just outside ``dst``."""
    ux, uy = dst.x - src.x, dst.y - src.y
    length = math.hypot(ux, uy)
    ux, uy = ux / length, uy / length
    x0, y0 = src.x + ux * (src.r + 2) + dx, src.y + uy * (src.r + 2)
    x1, y1 = dst.x - ux * (dst.r + 2) + dx, dst.y - uy * (dst.r + 2)
    draw.line((x0, y0, x1, y1), fill=INK, width=2)
    head, half = 7.0, 4.0
    bx, by = x1 - ux * head, y1 - uy * head
    draw.polygon([(x1, y1), (bx - uy * half, by + ux * half), (bx + uy * half, by - ux * half)], fill=INK)


def render(scene: Scene) -> Image.Image:
    n = len(scene.frames)
    image = Image.new("RGB", (strip_width(n), FRAME), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for i, frame in enumerate(scene.frames):
        dx = frame_origin(i)
        if i:
            draw.rectangle((dx - SEPARATOR, 0, dx - 1, FRAME - 1), fill=INK)
        # Arrows first: objects drawn over them keep their centre pixel exactly their colour.
        by_id = {o.id: o for o in frame.objects}
        for src, dst in frame.arrows:
            draw_arrow(draw, by_id[src], by_id[dst], dx)
        for obj in frame.objects:
            draw_object(draw, obj, dx)
    return image


def png_bytes(image: Image.Image) -> bytes:
    """PNG without metadata chunks, so equal images give equal bytes."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()
