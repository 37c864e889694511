"""`mmctx.data.disk`: lossless table round-trips, located read errors, and self-contained saves."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures.benchmarks import clean_benchmark

from mmctx.data.disk import load_benchmark, read_samples, save_benchmark, write_samples
from mmctx.schema import Benchmark, Rationale, Sample

FORMATS = ("jsonl", "parquet")


def awkward_samples() -> list[Sample]:
    """Text and structure that a careless writer would mangle."""
    return [
        Sample(
            id="q-ü-1",
            task="commonsense",
            source="SEED-Bench",
            format="mcqa",
            images=["images/a b/ä.png", "images/猫.jpg", "images/x.webp"],
            question='Was zeigt das Bild? 图中是什么？ "quoted" \\ back\tslash\nnew line',
            context="line\u2028separator and next\u0085line and \r carriage",
            choices=["Ein Hund 🐕", "عربي", "  padded  ", ""],
            answer="عربي",
            rationale=Rationale(reasoning="Step 1 → step 2.\n\nSo: عربي", answer="عربي"),
            demo_keys={"similar": ["d-1", "d-2"], "random": [], "clip": ["d-3"]},
            meta={
                "fewmmbench": {"config": "multiple_choice_qa_test", "example_id": 17, "extra": {"hint": None}},
                "nested": {"list": [1, 2.5, None, True, "ß", {"deep": []}], "empty": {}},
                "score": -0.0,
            },
        ),
        Sample(id="minimal", task="counting", source="", format="open", answer=""),
        Sample(
            id="cf-1",
            task="counting",
            source="VALSE",
            format="caption_foil",
            images=["images/one.png"],
            choices=["There are two dogs.", "There are three dogs."],
            answer="There are two dogs.",
        ),
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_tables_round_trip_losslessly(tmp_path: Path, fmt: str) -> None:
    samples = awkward_samples()
    path = tmp_path / f"queries.{fmt}"
    write_samples(samples, path)
    back = read_samples(path)
    assert [s.model_dump() for s in back] == [s.model_dump() for s in samples]
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file was moved into place


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_table_round_trips(tmp_path: Path, fmt: str) -> None:
    write_samples([], tmp_path / f"demos.{fmt}")
    assert read_samples(tmp_path / f"demos.{fmt}") == []


def test_unknown_table_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.jsonl or \.parquet"):
        write_samples(awkward_samples(), tmp_path / "queries.csv")
    with pytest.raises(ValueError, match=r"\.jsonl or \.parquet"):
        read_samples(tmp_path / "queries.csv")


def _jsonl(samples: list[Sample]) -> list[bytes]:
    return [json.dumps(s.model_dump(mode="json")).encode() + b"\n" for s in samples]


@pytest.mark.parametrize(
    ("bad_line", "line_number"),
    [
        (b'{"id": "broken", "task": \n', 2),  # not JSON
        (b'{"id": "x", "task": "t", "source": "s", "format": "mcqa"}\n', 2),  # no answer
        (b'{"id": "x", "task": "t", "source": "s", "format": "nope", "answer": "a"}\n', 2),  # bad format
        (b"\xff\xfe not utf-8\n", 2),  # bad bytes: still located
    ],
)
def test_corrupt_jsonl_line_is_named_by_file_and_line(tmp_path: Path, bad_line: bytes, line_number: int) -> None:
    good = _jsonl(awkward_samples())
    path = tmp_path / "queries.jsonl"
    path.write_bytes(good[0] + bad_line + good[1])
    with pytest.raises(ValueError) as info:
        read_samples(path)
    # The record's id follows the line where the line has one: `path:2 [x]: ...`.
    assert re.match(rf"{re.escape(str(path))}:{line_number}( \[x\])?: ", str(info.value)), str(info.value)


def test_blank_jsonl_lines_are_skipped(tmp_path: Path) -> None:
    good = _jsonl(awkward_samples())
    path = tmp_path / "queries.jsonl"
    path.write_bytes(b"\n" + good[0] + b"   \n" + good[1])
    assert [s.id for s in read_samples(path)] == ["q-ü-1", "minimal"]


def test_invalid_parquet_row_is_named_by_file_and_row(tmp_path: Path) -> None:
    path = tmp_path / "demos.parquet"
    write_samples(awkward_samples()[:2], path)
    rows = pq.read_table(path).to_pylist()
    rows[1]["format"] = "essay"
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(ValueError, match=rf"^{path}: row 1 \[minimal\]: "):
        read_samples(path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_save_to_a_new_folder_copies_images_and_loads_back(tmp_path: Path, fmt: str) -> None:
    bench = clean_benchmark(tmp_path / "src")
    out = save_benchmark(bench, tmp_path / "out" / "bench", table_format=fmt)
    assert (out / f"queries.{fmt}").is_file() and (out / f"demos.{fmt}").is_file()
    header = json.loads((out / "benchmark.json").read_text())
    assert header["tables"] == fmt and header["name"] == "tiny"
    for rel in {img for s in bench.queries + bench.demos for img in s.images}:
        assert (out / rel).read_bytes() == bench.image_path(rel).read_bytes()

    shutil.rmtree(tmp_path / "src")  # the saved copy must not depend on the original
    back = load_benchmark(out)
    assert back.root == out
    assert (back.name, back.description) == (bench.name, bench.description)
    assert [s.model_dump() for s in back.queries] == [s.model_dump() for s in bench.queries]
    assert [s.model_dump() for s in back.demos] == [s.model_dump() for s in bench.demos]
    assert back.validate() == []


def test_save_in_place_keeps_images_and_tables(tmp_path: Path) -> None:
    bench = clean_benchmark(tmp_path / "bench")
    save_benchmark(bench, bench.root)
    back = load_benchmark(bench.root)
    assert back.validate() == []
    assert [s.id for s in back.queries] == [s.id for s in bench.queries]


def test_load_reads_the_table_format_the_header_names(tmp_path: Path) -> None:
    bench = clean_benchmark(tmp_path / "bench")
    save_benchmark(bench, bench.root, table_format="jsonl")
    fewer = Benchmark(bench.name, bench.queries[:1], bench.demos, bench.root)
    save_benchmark(fewer, bench.root, table_format="parquet")  # the old queries.jsonl is still there
    assert [q.id for q in load_benchmark(bench.root).queries] == ["q-cf-1"]


def test_loading_a_missing_folder_or_table_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a benchmark folder"):
        load_benchmark(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no queries.jsonl or queries.parquet"):
        load_benchmark(tmp_path / "empty")


def test_save_refuses_image_paths_that_escape_before_copying_anything(tmp_path):
    from mmctx.data.disk import save_benchmark
    from mmctx.schema import Benchmark, BenchmarkError, Sample

    secret = tmp_path / "secret.png"
    secret.write_bytes(b"top secret")
    root = tmp_path / "root"
    root.mkdir()
    sample = Sample(id="q", task="counting", source="x", format="caption_foil", images=["../secret.png"],
                    choices=["a", "b"], answer="a")  # fmt: skip
    bench = Benchmark("b", [sample], [], root)
    with pytest.raises(BenchmarkError, match="escapes the benchmark root"):
        save_benchmark(bench, tmp_path / "out" / "deep")
    assert not (tmp_path / "out").exists()
