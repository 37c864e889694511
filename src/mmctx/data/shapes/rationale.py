"""Step-by-step explanations written from a sample's scene graph, for chain-of-thought demos.

Each explanation says what the image shows, what is asked, the fact that decides it (read
from the scene graph, not from the answer), and ends with the gold answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mmctx.data.shapes.text import describe_objects, join, name, plural
from mmctx.data.shapes.world import FRAME, Obj, Scene
from mmctx.schema import Rationale, Sample

Explain = Callable[[Scene, dict, Sample], str]
EXPLAIN: dict[str, Explain] = {}


def explains(*kinds: str) -> Callable[[Explain], Explain]:
    def register(fn: Explain) -> Explain:
        for kind in kinds:
            EXPLAIN[kind] = fn
        return fn

    return register


def scene_rationale(sample: Sample) -> Rationale:
    """A short explanation of ``sample`` (a shapes-world sample) ending with its gold answer."""
    scene = Scene.from_dict(sample.meta)
    query = sample.meta["query"]
    steps = [overview(scene), EXPLAIN[query["kind"]](scene, query, sample), conclusion(sample)]
    return Rationale(reasoning=" ".join(steps), answer=sample.answer, generator="scene-graph", attempts=1)


def overview(scene: Scene) -> str:
    first = describe_objects(scene.frames[0].objects)
    if len(scene.frames) == 1:
        return f"The image shows {first}."
    return f"The image shows {len(scene.frames)} frames side by side. The first frame shows {first}."


def conclusion(sample: Sample) -> str:
    if sample.format == "caption_foil":
        return f'So the correct caption is "{sample.answer}"'
    return f"So the answer is {sample.answer}."


def by_id(scene: Scene, obj_id: int, frame: int = 0) -> Obj:
    obj = scene.frames[frame].get(obj_id)
    assert obj is not None, f"object {obj_id} not in frame {frame}"
    return obj


def of_shape(scene: Scene, shape: str, frame: int = 0) -> list[Obj]:
    return [o for o in scene.frames[frame].objects if o.shape == shape]


# --- attributes ------------------------------------------------------------------------------


@explains("colour_of_shape")
def _colour_of_shape(scene: Scene, q: dict, s: Sample) -> str:
    t = by_id(scene, q["target"])
    return f"The question asks for the colour of the {t.shape}. There is one {t.shape}, and it is {t.colour}."


@explains("shape_of_colour")
def _shape_of_colour(scene: Scene, q: dict, s: Sample) -> str:
    t = by_id(scene, q["target"])
    return f"The question asks which shape is {t.colour}. The only {t.colour} object is the {t.shape}."


@explains("colour_caption", "size_caption")
def _attribute_caption(scene: Scene, q: dict, s: Sample) -> str:
    t = by_id(scene, q["target"])
    value = t.colour if q["kind"] == "colour_caption" else t.size
    kind = "colour" if q["kind"] == "colour_caption" else "size"
    return (
        f"Both captions describe the {t.shape} and differ only in its {kind}. "
        f"The {t.shape} is {value}, not {q['foil_value']}."
    )


@explains("coref_colour", "coref_size", "coref_shape")
def _coreference(scene: Scene, q: dict, s: Sample) -> str:
    t = by_id(scene, q["target"])
    if q["kind"] == "coref_shape":
        return (
            f'"It" refers to the {t.colour} object. The only {t.colour} object is a {t.shape}, not {q["foil_value"]}.'
        )
    value = t.colour if q["kind"] == "coref_colour" else t.size
    return f'"It" refers to the {t.shape}. The only {t.shape} is {value}, not {q["foil_value"]}.'


# --- objects, plurality, counting ------------------------------------------------------------


@explains("shape_present", "shape_absent")
def _shape_options(scene: Scene, q: dict, s: Sample) -> str:
    present = sorted({o.shape for o in scene.frames[0].objects})
    shapes = f"The shapes present are: {join([plural(p) if len(of_shape(scene, p)) > 1 else p for p in present])}."
    if q["kind"] == "shape_present":
        return f"{shapes} Among the options, only the {q['shape']} is one of them."
    return f"{shapes} Among the options, only the {q['shape']} is missing from the image."


@explains("existence")
def _existence(scene: Scene, q: dict, s: Sample) -> str:
    n = len(of_shape(scene, q["shape"]))
    found = "there are none" if n == 0 else (f"there is {n}" if n == 1 else f"there are {n}")
    return f"The captions disagree on whether a {q['shape']} is present. Looking for {plural(q['shape'])}: {found}."


def _listing(scene: Scene, shape: str) -> str:
    found = of_shape(scene, shape)
    if not found:
        return f"There are no {plural(shape)}."
    listed = describe_objects(found)
    return f"The {plural(shape)} are: {listed}. That makes {len(found)}."


@explains("plurality")
def _plurality(scene: Scene, q: dict, s: Sample) -> str:
    n = len(of_shape(scene, q["shape"]))
    verdict = "exactly one" if n == 1 else "more than one"
    listing = _listing(scene, q["shape"])
    return f"The captions disagree on how many {plural(q['shape'])} there are. {listing} That is {verdict}."


@explains("count_mcqa", "count_caption")
def _count(scene: Scene, q: dict, s: Sample) -> str:
    return f"Counting the {plural(q['shape'])}, whatever their colour. {_listing(scene, q['shape'])}"


# --- space, arrows, distances ----------------------------------------------------------------

_RELATION_REASON = {
    "left of": "the two are roughly level, and the {a} is further left",
    "right of": "the two are roughly level, and the {a} is further right",
    "above": "the two are roughly aligned, and the {a} is higher up",
    "below": "the two are roughly aligned, and the {a} is lower down",
}


def true_relation(a: Obj, b: Obj) -> str:
    """The relation of ``a`` to ``b`` along the axis where they are furthest apart."""
    dx, dy = a.x - b.x, a.y - b.y
    if abs(dx) >= abs(dy):
        return "left of" if dx < 0 else "right of"
    return "above" if dy < 0 else "below"


@explains("relation_mcqa", "relation_binary")
def _relation(scene: Scene, q: dict, s: Sample) -> str:
    a, b = by_id(scene, q["subject"]), by_id(scene, q["object"])
    relation = true_relation(a, b)
    reason = _RELATION_REASON[relation].format(a=name(a))
    said = f"The {name(a)} is {relation} the {name(b)}."
    if q["kind"] == "relation_mcqa":
        return f"Comparing the {name(a)} with the {name(b)}: {reason}. {said}"
    verdict = "matches" if q["stated"] == relation else "does not match"
    claim = f"The statement says {q['stated']}, which {verdict}."
    return f"Comparing the {name(a)} with the {name(b)}: {reason}. {said} {claim}"


@explains("arrow")
def _arrow(scene: Scene, q: dict, s: Sample) -> str:
    src, dst = scene.frames[0].arrows[0]
    a, b = by_id(scene, src), by_id(scene, dst)
    return (
        f"The arrow starts at the {name(a)} and its head is at the {name(b)}. "
        f"So the {a.shape} points at the {b.shape}, not the other way round."
    )


def edge_gap(obj: Obj, edge: str) -> int:
    return {
        "left": obj.x - obj.r,
        "right": FRAME - obj.x - obj.r,
        "top": obj.y - obj.r,
        "bottom": FRAME - obj.y - obj.r,
    }[edge]


@explains("closest_to_edge")
def _closest_to_edge(scene: Scene, q: dict, s: Sample) -> str:
    ranked = sorted(scene.frames[0].objects, key=lambda o: edge_gap(o, q["edge"]))
    order = join([f"the {o.shape}" for o in ranked])
    return f"From nearest to farthest from the {q['edge']} edge: {order}. The {ranked[0].shape} is clearly the closest."


@explains("closer_to")
def _closer_to(scene: Scene, q: dict, s: Sample) -> str:
    ref, near, far = by_id(scene, q["reference"]), by_id(scene, q["target"]), by_id(scene, q["other"])

    def d(o: Obj) -> float:
        return math.hypot(o.x - ref.x, o.y - ref.y)

    if d(near) > d(far):
        near, far = far, near
    return f"Measuring from the {ref.shape}: the {near.shape} is clearly nearer to it than the {far.shape} is."


# --- time ------------------------------------------------------------------------------------


def _ordinal(i: int) -> str:
    return ("first", "second", "third", "fourth", "fifth")[i]


@explains("disappeared")
def _disappeared(scene: Scene, q: dict, s: Sample) -> str:
    first = {o.id for o in scene.frames[0].objects}
    for i, frame in enumerate(scene.frames[1:], 1):
        missing = first - {o.id for o in frame.objects}
        if missing:
            gone = by_id(scene, missing.pop())
            return f"Comparing frames, the {name(gone)} is gone from the {_ordinal(i)} frame on, while the rest stay."
    return "Comparing frames, nothing disappears."


@explains("moved")
def _moved(scene: Scene, q: dict, s: Sample) -> str:
    first, last = scene.frames[0], scene.frames[-1]

    def has_moved(o: Obj) -> bool:
        later = last.get(o.id)
        return later is not None and (later.x, later.y) != (o.x, o.y)

    movers = [o for o in first.objects if has_moved(o)]
    still = [f"the {o.shape}" for o in first.objects if not has_moved(o)]
    moving = join([f"the {name(o)}" for o in movers])
    return f"Comparing frames, {join(still)} stay in place, while {moving} changes position from frame to frame."


_EDGE_OF_DIRECTION = {"right": "right", "left": "left", "down": "bottom", "up": "top"}


@explains("next_position")
def _next_position(scene: Scene, q: dict, s: Sample) -> str:
    path = [f.get(q["target"]) for f in scene.frames]
    a, b = path[0], path[1]
    assert a is not None and b is not None
    dx, dy = b.x - a.x, b.y - a.y
    direction = ("right" if dx > 0 else "left") if abs(dx) >= abs(dy) else ("down" if dy > 0 else "up")
    edge = _EDGE_OF_DIRECTION[direction]
    return (
        f"Across the frames the {name(a)} moves {direction} by the same step each time. "
        f"One more step takes it to the {edge} edge."
    )
