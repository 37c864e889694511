"""shapes-world: coverage of the nine tasks, determinism, exact ground truth, demo selection."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmctx.data.disk import load_benchmark
from mmctx.data.shapes import COLOURS, FRAME, GENERATORS, SHAPES, build_benchmark, generate_pool, scene_rationale
from mmctx.data.shapes.selection import cosine, features
from mmctx.data.shapes.text import RELATIONS
from mmctx.data.shapes.world import SEPARATOR, frame_origin
from mmctx.schema import BINARY_CHOICES, TASKS, Benchmark, Sample

PAPER_FORMATS = {
    "attribute_recognition": {"mcqa", "caption_foil"},
    "object_recognition": {"mcqa", "caption_foil"},
    "plurality": {"caption_foil"},
    "counting": {"mcqa", "caption_foil"},
    "spatial_relations": {"mcqa", "binary"},
    "action_recognition": {"caption_foil"},
    "commonsense": {"mcqa"},
    "temporal": {"mcqa"},
    "coreference": {"caption_foil"},
}
N_GENERATORS = sum(len(f) for f in PAPER_FORMATS.values())


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Benchmark:
    return build_benchmark(tmp_path_factory.mktemp("bench"), queries_per_task=10, seed=0)


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pool")


@pytest.fixture(scope="module")
def pool(pool_dir: Path) -> list[Sample]:
    return generate_pool(pool_dir, per_task=60, seed=7)


def by_kind(pool: list[Sample], kind: str) -> list[Sample]:
    found = [s for s in pool if s.meta["query"]["kind"] == kind]
    assert found, f"no {kind} samples"
    return found


def objects(sample: Sample, frame: int = 0) -> list[dict]:
    return sample.meta["frames"][frame]["objects"]


def obj(sample: Sample, obj_id: int, frame: int = 0) -> dict:
    return next(o for o in objects(sample, frame) if o["id"] == obj_id)


# --- coverage and structure ------------------------------------------------------------------


def test_every_task_has_the_papers_formats(bench: Benchmark) -> None:
    assert set(PAPER_FORMATS) == set(TASKS)
    assert {(t, f) for t, fs in PAPER_FORMATS.items() for f in fs} == set(GENERATORS)
    assert {(q.task, q.format) for q in bench.queries} == set(GENERATORS)
    assert bench.tasks == list(TASKS)


def test_benchmark_validates_clean_and_round_trips(bench: Benchmark) -> None:
    assert bench.validate() == []
    assert len(bench.queries) == 10 * N_GENERATORS
    assert Counter((q.task, q.format) for q in bench.queries) == {tf: 10 for tf in GENERATORS}
    reloaded = load_benchmark(bench.root)
    assert [q.model_dump() for q in reloaded.queries] == [q.model_dump() for q in bench.queries]
    # Only images the benchmark refers to are left in its folder.
    referenced = {img for s in bench.queries + bench.demos for img in s.images}
    on_disk = {p.relative_to(bench.root).as_posix() for p in (bench.root / "images").rglob("*.png")}
    assert on_disk == referenced


def test_records_are_well_formed(pool: list[Sample]) -> None:
    assert len({s.id for s in pool}) == len(pool)
    for s in pool:
        assert s.id == f"shapes/{s.task}/{s.format}/{s.meta['index']:05d}"
        assert s.source == "shapes-world"
        assert len(s.images) == 1 and s.images[0].startswith(f"images/{s.task}/")
        assert len(set(s.choices)) == len(s.choices) and s.answer in s.choices
        json.dumps(s.meta)  # the scene graph must be storable as-is
        if s.format == "caption_foil":
            assert len(s.choices) == 2 and s.choices[0] == s.answer
        if s.format == "binary":
            assert s.choices == list(BINARY_CHOICES) and s.statement
        if s.format == "mcqa":
            assert s.question.endswith("?")


def test_distractors_have_the_answers_type(pool: list[Sample]) -> None:
    for s in pool:
        if s.format != "mcqa":
            continue
        kind = s.meta["query"]["kind"]
        if kind in ("colour_of_shape",):
            assert set(s.choices) <= set(COLOURS)
        elif kind in ("shape_of_colour", "shape_present", "shape_absent", "disappeared", "moved"):
            assert set(s.choices) <= set(SHAPES)
        elif kind == "count_mcqa":
            assert all(c.isdigit() for c in s.choices) and len(s.choices) == 4
        elif kind == "relation_mcqa":
            assert sorted(s.choices) == sorted(RELATIONS)
        elif kind in ("closest_to_edge", "closer_to"):
            assert all(c.removeprefix("the ") in SHAPES for c in s.choices)


def test_unknown_task_is_refused_and_tasks_filter(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown task"):
        generate_pool(tmp_path, 1, tasks=["juggling"])
    only = generate_pool(tmp_path, 2, tasks=["counting"])
    assert {(s.task, s.format) for s in only} == {("counting", "mcqa"), ("counting", "caption_foil")}


# --- determinism -----------------------------------------------------------------------------


def _images(root: Path, samples: list[Sample]) -> list[bytes]:
    return [(root / s.images[0]).read_bytes() for s in samples]


def test_same_seed_same_records_and_bytes(tmp_path: Path) -> None:
    a = generate_pool(tmp_path / "a", 4, seed=3)
    b = generate_pool(tmp_path / "b", 4, seed=3)
    assert [s.model_dump() for s in a] == [s.model_dump() for s in b]
    assert _images(tmp_path / "a", a) == _images(tmp_path / "b", b)
    c = generate_pool(tmp_path / "c", 4, seed=4)
    differing = sum(x.meta["frames"] != y.meta["frames"] for x, y in zip(a, c, strict=True))
    assert differing >= 0.9 * len(a)
    pictures = zip(_images(tmp_path / "a", a), _images(tmp_path / "c", c), strict=True)
    assert sum(x != y for x, y in pictures) >= 0.9 * len(a)


def test_same_seed_same_benchmark(tmp_path: Path) -> None:
    a = build_benchmark(tmp_path / "a", queries_per_task=2, demos_per_query=8, pool_per_task=14, seed=5)
    b = build_benchmark(tmp_path / "b", queries_per_task=2, demos_per_query=8, pool_per_task=14, seed=5)
    assert [q.model_dump() for q in a.queries] == [q.model_dump() for q in b.queries]
    assert [d.model_dump() for d in a.demos] == [d.model_dump() for d in b.demos]


# --- demonstrations --------------------------------------------------------------------------


def test_demo_keys_are_same_task_format_never_queries(bench: Benchmark) -> None:
    query_ids = {q.id for q in bench.queries}
    for q in bench.queries:
        assert set(q.demo_keys) == {"random", "similar", "image-similar", "text-similar", "mmr"}
        for keys in q.demo_keys.values():  # as many as the largest many-shot setting asks
            assert len(keys) == 64 and len(set(keys)) == 64
            assert q.id not in keys and not set(keys) & query_ids
            for key in keys:
                d = bench.demo(key)
                assert (d.task, d.format) == (q.task, q.format)
        assert len(bench.demos_for(q, "similar", 8)) == 8


def test_similar_demos_are_more_similar_and_ordered(bench: Benchmark) -> None:
    similar, random = [], []
    for q in bench.queries:
        fq = features(q)
        scores = [cosine(fq, features(bench.demo(k))) for k in q.demo_keys["similar"]]
        # Most similar first (ties, equal up to float noise, are ordered by id instead).
        assert all(x >= y - 1e-9 for x, y in zip(scores, scores[1:], strict=False))
        similar.append(np.mean(scores[:8]))
        random.append(np.mean([cosine(fq, features(bench.demo(k))) for k in q.demo_keys["random"][:8]]))
    assert np.mean(similar) > np.mean(random) + 0.05
    assert np.mean(np.array(similar) >= np.array(random)) == 1.0


def test_demos_carry_rationales_ending_in_gold(bench: Benchmark) -> None:
    assert bench.demos
    for d in bench.demos:
        assert d.rationale is not None
        assert d.rationale.answer == d.answer
        assert d.rationale.reasoning.rstrip('."').endswith(d.answer.rstrip('."'))


def test_rationale_states_the_deciding_fact() -> None:
    s = Sample(
        id="x",
        task="attribute_recognition",
        source="shapes-world",
        format="mcqa",
        question="What colour is the triangle?",
        choices=["red", "blue", "green", "yellow"],
        answer="red",
        images=["images/x.png"],
        meta={
            "frames": [
                {
                    "objects": [
                        {"id": 0, "shape": "triangle", "colour": "red", "size": "large", "x": 20, "y": 20},
                        {"id": 1, "shape": "circle", "colour": "blue", "size": "small", "x": 70, "y": 70},
                    ],
                    "arrows": [],
                }
            ],
            "query": {"kind": "colour_of_shape", "target": 0},
        },
    )
    text = scene_rationale(s).reasoning
    assert "a large red triangle and a small blue circle" in text
    assert "colour of the triangle" in text and text.endswith("So the answer is red.")


# --- ground truth, re-derived from the scene graph -------------------------------------------


def test_counts_match_the_scene(pool: list[Sample]) -> None:
    for s in by_kind(pool, "count_mcqa") + by_kind(pool, "count_caption"):
        n = sum(o["shape"] == s.meta["query"]["shape"] for o in objects(s))
        expected = str(n) if s.format == "mcqa" else ("There is 1 " if n == 1 else f"There are {n} ")
        assert s.answer.startswith(expected)
    counts = Counter(int(s.answer) for s in by_kind(pool, "count_mcqa"))
    assert set(counts) == {1, 2, 3, 4, 5}


def test_existence_and_plurality_match_the_scene(pool: list[Sample]) -> None:
    for s in by_kind(pool, "existence"):
        shape = s.meta["query"]["shape"]
        present = any(o["shape"] == shape for o in objects(s))
        assert s.answer == (f"There is a {shape}." if present else f"There is no {shape}.").replace("a a", "an a")
    for s in by_kind(pool, "plurality"):
        n = sum(o["shape"] == s.meta["query"]["shape"] for o in objects(s))
        assert ("one" in s.answer or "single" in s.answer) == (n == 1)


def test_attributes_and_coreference_match_the_scene(pool: list[Sample]) -> None:
    for s in by_kind(pool, "colour_of_shape"):
        shape = s.question.removeprefix("What colour is the ").removesuffix("?")
        (match,) = [o for o in objects(s) if o["shape"] == shape]
        assert s.answer == match["colour"]
    for s in by_kind(pool, "coref_colour"):
        shape = s.answer.split(".")[0].split()[-1]
        (match,) = [o for o in objects(s) if o["shape"] == shape]
        assert s.answer.endswith(f"It is {match['colour']}.") and not s.choices[1].endswith(f"{match['colour']}.")


def _relation(a: dict, b: dict) -> str | None:
    """The one relation that clearly holds, or None if the layout is ambiguous."""
    dx, dy = a["x"] - b["x"], a["y"] - b["y"]
    clearance = a["r"] + b["r"] + 8
    if abs(dy) <= 6 and abs(dx) >= clearance:
        return "left of" if dx < 0 else "right of"
    if abs(dx) <= 6 and abs(dy) >= clearance:
        return "above" if dy < 0 else "below"
    return None


def test_spatial_relations_match_coordinates(pool: list[Sample]) -> None:
    for s in by_kind(pool, "relation_mcqa"):
        q = s.meta["query"]
        assert _relation(obj(s, q["subject"]), obj(s, q["object"])) == s.answer
    binary = by_kind(pool, "relation_binary")
    for s in binary:
        q = s.meta["query"]
        truth = _relation(obj(s, q["subject"]), obj(s, q["object"]))
        assert f" is {q['stated']} the " in s.statement
        assert s.answer == ("Yes" if truth == q["stated"] else "No")
    assert Counter(s.answer for s in binary) == {"Yes": 30, "No": 30}


def test_arrows_and_distances_match_the_scene(pool: list[Sample]) -> None:
    for s in by_kind(pool, "arrow"):
        (src, dst) = s.meta["frames"][0]["arrows"][0]
        a, b = obj(s, src)["shape"], obj(s, dst)["shape"]
        assert s.answer.startswith("The ") and s.answer.split(" points at ")[0].endswith(a)
        assert s.answer.removesuffix(".").endswith(b)
    for s in by_kind(pool, "closest_to_edge"):
        edge = s.meta["query"]["edge"]
        key = {
            "left": lambda o: o["x"],
            "right": lambda o: -o["x"],
            "top": lambda o: o["y"],
            "bottom": lambda o: -o["y"],
        }
        ranked = sorted(objects(s), key=key[edge])
        assert s.answer == f"the {ranked[0]['shape']}"
        assert abs(key[edge](ranked[1]) - key[edge](ranked[0])) >= 10
    for s in by_kind(pool, "closer_to"):
        ref_shape = s.question.split("closer to the ")[1].split(":")[0]
        (ref,) = [o for o in objects(s) if o["shape"] == ref_shape]
        others = [o for o in objects(s) if o is not ref]
        near = min(others, key=lambda o: math.hypot(o["x"] - ref["x"], o["y"] - ref["y"]))
        assert s.answer == f"the {near['shape']}"


def test_temporal_answers_match_the_frames(pool: list[Sample]) -> None:
    for s in by_kind(pool, "disappeared"):
        first, last = {o["shape"] for o in objects(s)}, {o["shape"] for o in objects(s, -1)}
        assert first - last == {s.answer} and 3 <= len(s.meta["frames"]) <= 4
    for s in by_kind(pool, "moved"):
        movers = {
            o["shape"] for o in objects(s, -1) if (o["x"], o["y"]) != (obj(s, o["id"])["x"], obj(s, o["id"])["y"])
        }
        assert movers == {s.answer}
    for s in by_kind(pool, "next_position"):
        a, b = obj(s, 0, 0), obj(s, 0, 1)
        dx, dy = b["x"] - a["x"], b["y"] - a["y"]
        edge = ("right" if dx > 0 else "left") if abs(dx) > abs(dy) else ("bottom" if dy > 0 else "top")
        assert s.answer == f"at the {edge} edge"


# --- the pictures ----------------------------------------------------------------------------


def test_objects_are_drawn_where_and_how_the_scene_says(pool: list[Sample], pool_dir: Path) -> None:
    for s in pool:
        with Image.open(pool_dir / s.images[0]) as im:
            pixels = np.asarray(im.convert("RGB"))
        n = len(s.meta["frames"])
        assert pixels.shape == (FRAME, n * FRAME + (n - 1) * SEPARATOR, 3)
        for f, frame in enumerate(s.meta["frames"]):
            objs = frame["objects"]
            for o in objs:
                assert tuple(pixels[o["y"], frame_origin(f) + o["x"]]) == COLOURS[o["colour"]], s.id
                assert o["r"] + 3 <= o["x"] <= FRAME - o["r"] - 3 and o["r"] + 3 <= o["y"] <= FRAME - o["r"] - 3
            for i, a in enumerate(objs):
                for b in objs[i + 1 :]:
                    assert math.hypot(a["x"] - b["x"], a["y"] - b["y"]) >= a["r"] + b["r"] + 6, s.id


def test_the_asked_colour_is_visible(pool: list[Sample], pool_dir: Path) -> None:
    for s in by_kind(pool, "colour_of_shape"):
        t = obj(s, s.meta["query"]["target"])
        with Image.open(pool_dir / s.images[0]) as im:
            patch = np.asarray(im.convert("RGB"))[t["y"] - 2 : t["y"] + 3, t["x"] - 2 : t["x"] + 3]
        assert (patch == COLOURS[s.answer]).all(axis=-1).sum() >= 20


# --- balance ---------------------------------------------------------------------------------


def test_labels_and_answer_positions_are_balanced(pool: list[Sample], bench: Benchmark) -> None:
    for fmt in ("mcqa",):
        positions = Counter(s.answer_index for s in pool if s.format == fmt and len(s.choices) == 4)
        total = sum(positions.values())
        assert all(abs(positions[i] / total - 0.25) < 0.03 for i in range(4)), positions
    queries = [q for q in bench.queries if q.format == "binary"]
    assert Counter(q.answer for q in queries) == {"Yes": 5, "No": 5}
    existence = Counter(s.meta["query"]["exists"] for s in by_kind(pool, "existence"))
    assert existence[True] == existence[False]
