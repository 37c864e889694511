"""`mmctx.schema` validation: every problem names its table, record and field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.benchmarks import clean_benchmark
from fixtures.images import write_image

from mmctx.schema import Benchmark, BenchmarkError, Problem, Rationale, Sample


def rebuilt(bench: Benchmark) -> Benchmark:
    """A fresh Benchmark over the (mutated) samples, so its demo index is current."""
    return Benchmark(bench.name, bench.queries, bench.demos, bench.root, bench.description)


def get(bench: Benchmark, sample_id: str) -> Sample:
    return next(s for s in bench.queries + bench.demos if s.id == sample_id)


@pytest.fixture
def bench(tmp_path: Path) -> Benchmark:
    return clean_benchmark(tmp_path / "bench")


def test_clean_benchmark_has_no_problems(bench: Benchmark) -> None:
    assert bench.validate() == []
    bench.check()  # does not raise


Mutation = Callable[[Benchmark], None]


def _corrupt_image(b: Benchmark) -> None:
    (b.root / "images" / "bad.png").write_bytes(b"\x89PNG but not really \x00\x01\x02")
    get(b, "d-mc-1").images[0] = "images/bad.png"


def _outside_image(b: Benchmark) -> None:
    write_image(b.root.parent / "outside.png")
    get(b, "q-cf-1").images = ["../outside.png"]


def _absolute_image(b: Benchmark) -> None:
    # Refused even though the file exists inside the root: paths must be relative.
    get(b, "q-cf-1").images = [str((b.root / "images" / "red.png").resolve())]


def _symlink_out(b: Benchmark) -> None:
    target = write_image(b.root.parent / "elsewhere" / "secret.png")
    (b.root / "images" / "link.png").symlink_to(target)
    get(b, "q-bin-1").images = ["images/link.png"]


def _duplicate_id(b: Benchmark) -> None:
    b.demos.append(get(b, "d-cf-1").model_copy(deep=True))


@pytest.mark.parametrize(
    ("mutate", "where", "says"),
    [
        (
            lambda b: setattr(get(b, "q-cf-1"), "answer", "There are no cats."),
            ("queries", "q-cf-1", "answer"),
            "is not among choices",
        ),
        (_duplicate_id, ("demos", "d-cf-1", "id"), "duplicate id (2 records)"),
        (
            lambda b: setattr(get(b, "q-mc-1"), "choices", ["Right", "Right"]),
            ("queries", "q-mc-1", "choices"),
            "duplicate choice",
        ),
        (
            lambda b: get(b, "q-mc-1").images.__setitem__(1, "images/gone.png"),
            ("queries", "q-mc-1", "images[1]"),
            "missing image file",
        ),
        (_corrupt_image, ("demos", "d-mc-1", "images[0]"), "corrupt image file"),
        (_outside_image, ("queries", "q-cf-1", "images[0]"), "escapes the benchmark root"),
        (_absolute_image, ("queries", "q-cf-1", "images[0]"), "is absolute"),
        (
            lambda b: get(b, "q-cf-1").demo_keys["similar"].append("d-ghost"),
            ("queries", "q-cf-1", "demo_keys.similar"),
            "unknown demo key 'd-ghost'",
        ),
        (
            lambda b: get(b, "q-cf-1").demo_keys["random"].append("q-cf-1"),
            ("queries", "q-cf-1", "demo_keys.random"),
            "query listed among its own demos",
        ),
        (
            lambda b: get(b, "q-cf-1").demo_keys["similar"].append("d-mc-1"),
            ("queries", "q-cf-1", "demo_keys.similar"),
            "demo 'd-mc-1' is mcqa, query is caption_foil",
        ),
        (
            lambda b: get(b, "q-cf-1").demo_keys["similar"].append("d-cf-1"),
            ("queries", "q-cf-1", "demo_keys.similar"),
            "repeated demo key",
        ),
        (
            lambda b: (
                setattr(get(b, "q-bin-1"), "choices", ["True", "False"]),
                setattr(get(b, "q-bin-1"), "answer", "True"),
            ),
            ("queries", "q-bin-1", "choices"),
            "binary choices must be",
        ),
        (lambda b: setattr(get(b, "d-bin-1"), "statement", " "), ("demos", "d-bin-1", "statement"), "no statement"),
        (lambda b: setattr(get(b, "q-mc-1"), "question", "   "), ("queries", "q-mc-1", "question"), "no question"),
        (
            lambda b: setattr(get(b, "d-cf-1"), "rationale", Rationale(reasoning="r", answer="Five dogs.")),
            ("demos", "d-cf-1", "rationale.answer"),
            "differs from the gold answer",
        ),
        (lambda b: setattr(get(b, "q-cf-1"), "images", []), ("queries", "q-cf-1", "images"), "no image"),
        (lambda b: setattr(get(b, "q-mc-1"), "choices", ["Right"]), ("queries", "q-mc-1", "choices"), "at least 2"),
    ],
    ids=lambda v: v[2] if isinstance(v, tuple) else None,
)
def test_each_problem_names_record_and_field(
    bench: Benchmark, mutate: Mutation, where: tuple[str, str, str], says: str
) -> None:
    mutate(bench)
    problems = rebuilt(bench).validate()
    assert [(p.table, p.record, p.field) for p in problems] == [where]
    assert says in problems[0].message
    assert str(problems[0]).startswith(f"{where[0]}[{where[1]}].{where[2]}: ")


def test_skipping_image_checks_still_refuses_escaping_paths(bench: Benchmark) -> None:
    get(bench, "q-mc-1").images = ["images/gone.png", "../../etc/passwd"]
    problems = bench.validate(check_images=False)
    assert [(p.record, p.field) for p in problems] == [("q-mc-1", "images[1]")]
    assert "escapes" in problems[0].message


def test_check_raises_with_every_problem_listed(bench: Benchmark) -> None:
    get(bench, "q-cf-1").answer = "wrong"
    get(bench, "q-mc-1").question = ""
    get(bench, "q-bin-1").demo_keys["random"].append("nope")
    bench = rebuilt(bench)
    with pytest.raises(BenchmarkError) as info:
        bench.check()
    problems = info.value.problems
    assert {(p.record, p.field) for p in problems} == {
        ("q-cf-1", "answer"),
        ("q-mc-1", "question"),
        ("q-bin-1", "demo_keys.random"),
    }
    message = str(info.value)
    assert message.startswith("3 problem(s) in benchmark")
    for p in problems:
        assert str(p) in message


def test_problem_string_form() -> None:
    assert str(Problem("demos", "d1", "images[0]", "missing")) == "demos[d1].images[0]: missing"


def test_demos_for_takes_first_k_in_stored_order(bench: Benchmark) -> None:
    q = get(bench, "q-cf-1")
    assert [d.id for d in bench.demos_for(q, "similar", 1)] == ["d-cf-1"]
    with pytest.raises(BenchmarkError, match=r"queries\[q-cf-1\]\.demo_keys\.similar: needs 4 demos, has 1"):
        bench.demos_for(q, "similar", 4)


def test_links_out_of_the_root_are_refused_unless_the_benchmark_opts_in(bench: Benchmark) -> None:
    """A folder one is handed may not lead readers elsewhere; one's own sources (shared COCO links) may."""
    _symlink_out(bench)
    assert [str(p) for p in bench.validate()] == [
        "queries[q-bin-1].images[0]: 'images/link.png' is a symbolic link (or lies under one) leading outside "
        "the benchmark root"
    ]
    bench.confine_links = False
    assert bench.validate() == []
