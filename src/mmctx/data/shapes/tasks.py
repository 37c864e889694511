"""One generator per (task, format): draws a scene and asks about it, with the answer known exactly.

Each generator takes a `Draw` (the sample's private RNG) and returns an `Item`; it raises
`Retry` when a draw is unusable (objects collide, a relation or distance is too close to
call), and is simply called again with the same RNG, which keeps generation deterministic.
Every ``query`` carries a ``kind`` unique across generators, which the rationale writer keys on.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmctx.data.shapes.draws import Draw
from mmctx.data.shapes.text import RELATIONS, article, count_sentence, name, plural
from mmctx.data.shapes.world import (
    COLOURS,
    FRAME,
    MARGIN,
    SHAPES,
    SIZES,
    Frame,
    Obj,
    Retry,
    Scene,
    Spec,
    free_spot,
    inside,
    layout,
    point_segment_distance,
    random_size,
)
from mmctx.schema import BINARY_CHOICES


@dataclass
class Item:
    """What a generator produces; `mmctx.data.shapes.pool` turns it into a `Sample` and an image."""

    scene: Scene
    choices: list[str]
    answer: str
    query: dict[str, Any] = field(default_factory=dict)
    question: str = ""
    statement: str = ""


Generator = Callable[[Draw], Item]
GENERATORS: dict[tuple[str, str], Generator] = {}


def generator(task: str, fmt: str) -> Callable[[Generator], Generator]:
    def register(fn: Generator) -> Generator:
        GENERATORS[(task, fmt)] = fn
        return fn

    return register


# --- shared draws ----------------------------------------------------------------------------


def distinct_specs(
    rng: random.Random, n: int, shapes: Sequence[str] = SHAPES, unique_colours: bool = True, p_large: float = 0.5
) -> list[Spec]:
    """``n`` objects of different shapes, so "the triangle" always names exactly one object."""
    chosen = rng.sample(list(shapes), n)
    colours = rng.sample(list(COLOURS), n) if unique_colours else [rng.choice(list(COLOURS)) for _ in chosen]
    return [(s, c, random_size(rng, p_large)) for s, c in zip(chosen, colours, strict=True)]


def other(values: Sequence[str], *exclude: str) -> list[str]:
    return [v for v in values if v not in exclude]


def caption_foil(caption: str, foil: str, query: dict[str, Any], scene: Scene) -> Item:
    # The stored order is [caption, foil]; the prompt layer shuffles.
    return Item(scene, [caption, foil], caption, query)


# --- attribute recognition -------------------------------------------------------------------


@generator("attribute_recognition", "mcqa")
def attribute_mcqa(d: Draw) -> Item:
    rng = d.rng
    kind = d.balanced("kind", ("colour_of_shape", "shape_of_colour"))
    objects = layout(rng, distinct_specs(rng, rng.randint(2, 4)))
    target = rng.choice(objects)
    if kind == "colour_of_shape":
        question, answer, values = f"What colour is the {target.shape}?", target.colour, list(COLOURS)
    else:
        question, answer, values = f"What shape is the {target.colour} object?", target.shape, list(SHAPES)
    choices = d.arrange(answer, rng.sample(other(values, answer), 3))
    return Item(Scene.single(objects), choices, answer, {"kind": kind, "target": target.id}, question=question)


@generator("attribute_recognition", "caption_foil")
def attribute_caption(d: Draw) -> Item:
    rng = d.rng
    kind = d.balanced("kind", ("colour_caption", "colour_caption", "size_caption"))
    objects = layout(rng, distinct_specs(rng, rng.randint(2, 4), unique_colours=False))
    t = rng.choice(objects)
    if kind == "colour_caption":
        foil_value = rng.choice(other(list(COLOURS), t.colour))
        caption = f"There is {article(f'{t.colour} {t.shape}')}."
        foil = f"There is {article(f'{foil_value} {t.shape}')}."
    else:
        foil_value = other(list(SIZES), t.size)[0]
        caption = f"There is {article(f'{t.size} {t.colour} {t.shape}')}."
        foil = f"There is {article(f'{foil_value} {t.colour} {t.shape}')}."
    return caption_foil(caption, foil, {"kind": kind, "target": t.id, "foil_value": foil_value}, Scene.single(objects))


# --- object recognition ----------------------------------------------------------------------


@generator("object_recognition", "mcqa")
def object_mcqa(d: Draw) -> Item:
    rng = d.rng
    kind = d.balanced("kind", ("shape_present", "shape_absent"))
    present = rng.sample(SHAPES, rng.randint(1, 2) if kind == "shape_present" else 3)
    extra = rng.randint(0, 2)
    shapes = present + [rng.choice(present) for _ in range(extra)]
    objects = layout(rng, [(s, rng.choice(list(COLOURS)), random_size(rng)) for s in shapes])
    absent = other(SHAPES, *present)
    if kind == "shape_present":
        question, answer, distractors = (
            "Which of these shapes is in the image?",
            rng.choice(present),
            rng.sample(absent, 3),
        )
    else:
        question, answer, distractors = "Which of these shapes is NOT in the image?", rng.choice(absent), present
    query = {"kind": kind, "shape": answer, "present": sorted(present)}
    return Item(Scene.single(objects), d.arrange(answer, distractors), answer, query, question=question)


@generator("object_recognition", "caption_foil")
def object_existence(d: Draw) -> Item:
    rng = d.rng
    exists = d.balanced("exists", (True, False))
    shape = rng.choice(SHAPES)
    shapes = [rng.choice(other(SHAPES, shape)) for _ in range(rng.randint(1, 3))]
    if exists:
        shapes += [shape] * rng.randint(1, 2)
    rng.shuffle(shapes)
    objects = layout(rng, [(s, rng.choice(list(COLOURS)), random_size(rng)) for s in shapes])
    yes, no = f"There is {article(shape)}.", f"There is no {shape}."
    caption, foil = (yes, no) if exists else (no, yes)
    return caption_foil(caption, foil, {"kind": "existence", "shape": shape, "exists": exists}, Scene.single(objects))


# --- plurality and counting ------------------------------------------------------------------

PLURALITY_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("There is exactly one {s}.", "There are several {p}."),
    ("There is a single {s}.", "There are multiple {p}."),
)


def counted_scene(rng: random.Random, shape: str, n: int, max_others: int) -> list[Obj]:
    """``n`` objects of ``shape`` (mixed colours: the count is by shape) among other shapes."""
    specs = [(shape, rng.choice(list(COLOURS)), random_size(rng, 0.3)) for _ in range(n)]
    specs += [
        (rng.choice(other(SHAPES, shape)), rng.choice(list(COLOURS)), random_size(rng, 0.3))
        for _ in range(rng.randint(0, max_others))
    ]
    rng.shuffle(specs)
    return layout(rng, specs)


@generator("plurality", "caption_foil")
def plurality_caption(d: Draw) -> Item:
    rng = d.rng
    many = d.balanced("plural", (False, True))
    shape = rng.choice(SHAPES)
    n = rng.randint(2, 4) if many else 1
    objects = counted_scene(rng, shape, n, max_others=2)
    one, several = (t.format(s=shape, p=plural(shape)) for t in rng.choice(PLURALITY_TEMPLATES))
    caption, foil = (several, one) if many else (one, several)
    return caption_foil(caption, foil, {"kind": "plurality", "shape": shape, "count": n}, Scene.single(objects))


@generator("counting", "mcqa")
def counting_mcqa(d: Draw) -> Item:
    rng = d.rng
    n = d.balanced("count", (1, 2, 3, 4, 5))
    shape = rng.choice(SHAPES)
    objects = counted_scene(rng, shape, n, max_others=2)
    distractors = [str(m) for m in rng.sample([m for m in range(1, 7) if m != n], 3)]
    question = f"How many {plural(shape)} are there?"
    query = {"kind": "count_mcqa", "shape": shape, "count": n}
    return Item(Scene.single(objects), d.arrange(str(n), distractors), str(n), query, question=question)


@generator("counting", "caption_foil")
def counting_caption(d: Draw) -> Item:
    rng = d.rng
    n = d.balanced("count", (1, 2, 3, 4, 5))
    shape = rng.choice(SHAPES)
    objects = counted_scene(rng, shape, n, max_others=2)
    wrong = rng.choice([m for m in range(1, 7) if m != n])
    query = {"kind": "count_caption", "shape": shape, "count": n, "foil_count": wrong}
    return caption_foil(count_sentence(n, shape), count_sentence(wrong, shape), query, Scene.single(objects))


# --- spatial relations -----------------------------------------------------------------------

# Offsets that make exactly one relation true: far apart along one axis, nearly aligned on the other.
MIN_CLEARANCE, MAX_CLEARANCE, MAX_MISALIGN = 10, 30, 6


def related_pair(rng: random.Random, relation: str) -> list[Obj]:
    """Objects 0 (A) and 1 (B) with "A is <relation> B" clearly true, plus maybe a bystander."""
    (sa, ca, za), (sb, cb, zb), (sc, cc, zc) = distinct_specs(rng, 3)
    bx, by = free_spot(rng, SIZES[zb], [])
    along = SIZES[za] + SIZES[zb] + rng.randint(MIN_CLEARANCE, MAX_CLEARANCE)
    across = rng.randint(-MAX_MISALIGN, MAX_MISALIGN)
    dx, dy = {
        "left of": (-along, across),
        "right of": (along, across),
        "above": (across, -along),
        "below": (across, along),
    }[relation]
    if not inside(bx + dx, by + dy, SIZES[za]):
        raise Retry("A falls outside the frame")
    pair = [Obj(0, sa, ca, za, bx + dx, by + dy), Obj(1, sb, cb, zb, bx, by)]
    bystander = layout(rng, [(sc, cc, zc)], placed=pair) if rng.random() < 0.5 else []
    return pair + bystander


@generator("spatial_relations", "mcqa")
def spatial_mcqa(d: Draw) -> Item:
    relation = d.balanced("relation", RELATIONS)
    objects = related_pair(d.rng, relation)
    a, b = objects[0], objects[1]
    question = f"Where is the {name(a)} relative to the {name(b)}?"
    query = {"kind": "relation_mcqa", "subject": a.id, "object": b.id, "relation": relation}
    return Item(
        Scene.single(objects), d.arrange(relation, other(RELATIONS, relation)), relation, query, question=question
    )


@generator("spatial_relations", "binary")
def spatial_binary(d: Draw) -> Item:
    relation = d.balanced("relation", RELATIONS)
    true = d.balanced("truth", (True, False))
    objects = related_pair(d.rng, relation)
    a, b = objects[0], objects[1]
    # A false claim is the opposite or a perpendicular relation: both are clearly wrong given the layout.
    stated = relation if true else d.rng.choice(other(RELATIONS, relation))
    answer = BINARY_CHOICES[0] if true else BINARY_CHOICES[1]
    query = {"kind": "relation_binary", "subject": a.id, "object": b.id, "relation": relation, "stated": stated}
    statement = f"The {name(a)} is {stated} the {name(b)}."
    return Item(Scene.single(objects), list(BINARY_CHOICES), answer, query, statement=statement)


# --- action recognition (analogue): who points at whom ---------------------------------------


@generator("action_recognition", "caption_foil")
def action_caption(d: Draw) -> Item:
    rng = d.rng
    with_colour = d.balanced("naming", (False, True))
    specs = distinct_specs(rng, 3)
    a, b = layout(rng, specs[:2])
    if math.hypot(a.x - b.x, a.y - b.y) < a.r + b.r + 26:
        raise Retry("too close for a visible arrow")
    objects = [a, b]
    if rng.random() < 0.5:
        (c,) = layout(rng, specs[2:], placed=objects)
        if point_segment_distance(c.x, c.y, a.x, a.y, b.x, b.y) < c.r + 6:
            raise Retry("bystander sits on the arrow")
        objects.append(c)
    na, nb = name(a, colour=with_colour), name(b, colour=with_colour)
    query = {"kind": "arrow", "source": a.id, "target": b.id}
    scene = Scene.single(objects, arrows=[(a.id, b.id)])
    return caption_foil(f"The {na} points at the {nb}.", f"The {nb} points at the {na}.", query, scene)


# --- commonsense (analogue of CV-Bench relative distance) ------------------------------------

EDGES: tuple[str, ...] = ("left", "right", "top", "bottom")
MIN_EDGE_GAP, MIN_DISTANCE_GAP = 10, 12


def edge_distance(obj: Obj, edge: str, extent: bool = True) -> int:
    """Distance from the object's centre (or its nearest point, with ``extent``) to a frame edge."""
    r = obj.r if extent else 0
    return {"left": obj.x - r, "right": FRAME - obj.x - r, "top": obj.y - r, "bottom": FRAME - obj.y - r}[edge]


@generator("commonsense", "mcqa")
def commonsense_mcqa(d: Draw) -> Item:
    rng = d.rng
    kind = d.balanced("kind", ("closest_to_edge", "closer_to"))
    if kind == "closest_to_edge":
        objects = layout(rng, distinct_specs(rng, 4))
        edge = rng.choice(EDGES)
        for extent in (True, False):  # the winner must be clear whichever way one measures
            first, second = sorted(edge_distance(o, edge, extent) for o in objects)[:2]
            if second - first < MIN_EDGE_GAP:
                raise Retry("no clear winner")
        nearest = min(objects, key=lambda o: edge_distance(o, edge))
        answer = f"the {nearest.shape}"
        distractors = [f"the {o.shape}" for o in objects if o is not nearest]
        question = f"Which object is closest to the {edge} edge?"
        query = {"kind": kind, "edge": edge, "target": nearest.id}
        return Item(Scene.single(objects), d.arrange(answer, distractors, "slot4"), answer, query, question=question)

    objects = layout(rng, distinct_specs(rng, 3))
    ref, p, q = objects

    def dist(o: Obj) -> float:
        return math.hypot(o.x - ref.x, o.y - ref.y)

    if abs(dist(p) - dist(q)) < MIN_DISTANCE_GAP + abs(p.r - q.r):  # clear centre-to-centre and edge-to-edge
        raise Retry("too close to call")
    near = min((p, q), key=dist)
    far = q if near is p else p
    question = f"Which object is closer to the {ref.shape}: the {p.shape} or the {q.shape}?"
    answer = f"the {near.shape}"
    query = {"kind": kind, "reference": ref.id, "target": near.id, "other": far.id}
    return Item(
        Scene.single(objects), d.arrange(answer, [f"the {far.shape}"], "slot2"), answer, query, question=question
    )


# --- temporal: frames side by side in one image ----------------------------------------------

DIRECTION_EDGE: dict[str, str] = {"right": "right", "left": "left", "down": "bottom", "up": "top"}


@generator("temporal", "mcqa")
def temporal_mcqa(d: Draw) -> Item:
    kind = d.balanced("kind", ("disappeared", "moved", "next_position"))
    return {"disappeared": disappeared, "moved": moved, "next_position": next_position}[kind](d)


def shape_choices(d: Draw, answer: Obj, objects: Sequence[Obj]) -> list[str]:
    return d.arrange(answer.shape, [o.shape for o in objects if o.id != answer.id])


def disappeared(d: Draw) -> Item:
    rng = d.rng
    objects = layout(rng, distinct_specs(rng, 4))
    n_frames = rng.randint(3, 4)
    gone = rng.choice(objects)
    since = rng.randint(1, n_frames - 1)  # first frame (0-based) without it
    frames = [Frame(list(objects) if i < since else [o for o in objects if o is not gone]) for i in range(n_frames)]
    query = {"kind": "disappeared", "target": gone.id, "frame": since}
    return Item(Scene(frames), shape_choices(d, gone, objects), gone.shape, query, question="Which shape disappeared?")


def moved(d: Draw) -> Item:
    rng = d.rng
    specs = distinct_specs(rng, 4)
    n_frames = rng.randint(3, 4)
    vx, vy = rng.randint(-20, 20), rng.randint(-20, 20)
    if not 14 <= math.hypot(vx, vy) <= 24:
        raise Retry("step too small to see or too large to fit")
    shape, colour, size = specs[0]
    x0, y0 = free_spot(rng, SIZES[size], [])
    path = [Obj(0, shape, colour, size, x0 + i * vx, y0 + i * vy) for i in range(n_frames)]
    if not all(inside(o.x, o.y, o.r) for o in path):
        raise Retry("moves out of the frame")
    still = layout(rng, specs[1:], placed=path)
    frames = [Frame([position, *still]) for position in path]
    query = {"kind": "moved", "target": 0, "step": [vx, vy]}
    return Item(
        Scene(frames), shape_choices(d, path[0], [path[0], *still]), shape, query, question="Which shape moved?"
    )


def next_position(d: Draw) -> Item:
    """Three frames of an object stepping towards one edge; the fourth (unshown) frame reaches it."""
    rng = d.rng
    direction = d.balanced("direction", tuple(DIRECTION_EDGE))
    shape, colour, size = distinct_specs(rng, 1)[0]
    r = SIZES[size]
    start, end = MARGIN + r + 1, FRAME - MARGIN - r - 1
    along = [round(start + i * (end - start) / 3) for i in range(4)]
    if direction in ("left", "up"):
        along.reverse()
    across = rng.randint(FRAME // 2 - 8, FRAME // 2 + 8)  # mid-lane, so no other edge is also "right"
    xy = [(p, across) if direction in ("left", "right") else (across, p) for p in along]
    path = [Obj(0, shape, colour, size, x, y) for x, y in xy]
    still = layout(rng, distinct_specs(rng, rng.randint(1, 2), shapes=other(SHAPES, shape)), placed=path)
    frames = [Frame([position, *still]) for position in path[:3]]
    answer = f"at the {DIRECTION_EDGE[direction]} edge"
    distractors = [f"at the {e} edge" for e in ("left", "right", "top", "bottom") if e != DIRECTION_EDGE[direction]]
    question = f"The {name(path[0])} moves steadily. Where will it be in the next frame?"
    query = {"kind": "next_position", "target": 0, "direction": direction, "next": [path[3].x, path[3].y]}
    return Item(Scene(frames), d.arrange(answer, distractors), answer, query, question=question)


# --- coreference -----------------------------------------------------------------------------


@generator("coreference", "caption_foil")
def coreference_caption(d: Draw) -> Item:
    rng = d.rng
    kind = d.balanced("kind", ("coref_colour", "coref_size", "coref_shape"))
    objects = layout(rng, distinct_specs(rng, rng.randint(2, 4)))
    t = rng.choice(objects)
    if kind == "coref_colour":
        foil_value = rng.choice(other(list(COLOURS), t.colour))
        intro, true_value = f"There is {article(t.shape)}.", t.colour
    elif kind == "coref_size":
        foil_value = other(list(SIZES), t.size)[0]
        intro, true_value = f"There is {article(t.shape)}.", t.size
    else:
        foil_value = article(rng.choice(other(SHAPES, t.shape)))
        intro, true_value = f"There is {article(t.colour + ' object')}.", article(t.shape)
    query = {"kind": kind, "target": t.id, "foil_value": foil_value}
    return caption_foil(f"{intro} It is {true_value}.", f"{intro} It is {foil_value}.", query, Scene.single(objects))


def task_formats(tasks: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """The registered (task, format) pairs, in registration (= the paper's task) order."""
    return [tf for tf in GENERATORS if tasks is None or tf[0] in tasks]
