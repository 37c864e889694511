"""Bad input is refused before any work starts, with the file, record and field named.

Undecodable and oversized images, image links leading out of the root, malformed
``benchmark.json`` headers and Parquet cells, benchmarks a run could not ask, and malformed
context-suite records, through the library and from the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fixtures.benchmarks import clean_benchmark
from fixtures.images import image_bytes, png_with_undecodable_pixels, write_image
from PIL import Image
from typer.testing import CliRunner

from mmctx import schema
from mmctx.cli import app
from mmctx.data.clbench.loader import SuiteFormatError, load_clbench
from mmctx.data.disk import load_benchmark, read_samples, save_benchmark
from mmctx.prompts import build
from mmctx.prompts.presets import get_preset
from mmctx.schema import Benchmark, Sample

runner = CliRunner()


def refused(*args: str, code: int | None = None) -> str:
    """Run the CLI, expect a non-zero exit that is a clean message (no traceback); return its output."""
    result = runner.invoke(app, list(args))
    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, result.output
    # typer.Exit surfaces as SystemExit; anything else escaped as a traceback.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return " ".join(result.output.split())  # rich wraps long lines


def get(bench: Benchmark, sample_id: str) -> Sample:
    return next(s for s in bench.queries + bench.demos if s.id == sample_id)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A clean benchmark saved to disk (``saved/``), images and all."""
    return save_benchmark(clean_benchmark(tmp_path / "src"), tmp_path / "saved")


def _edit(folder: Path, sample_id: str, **changes) -> None:
    """Rewrite one record of a saved benchmark's JSONL tables, bypassing the model's checks."""
    for table in ("queries.jsonl", "demos.jsonl"):
        path = folder / table
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            if row["id"] == sample_id:
                row.update(changes)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# --- images that do not decode --------------------------------------------------------------


def test_a_png_whose_pixels_cannot_be_decoded_is_refused(saved):
    (saved / "images" / "broken.png").write_bytes(png_with_undecodable_pixels())
    _edit(saved, "q-bin-1", images=["images/broken.png"])
    problems = [str(p) for p in load_benchmark(saved).validate()]
    assert len(problems) == 1 and problems[0].startswith("queries[q-bin-1].images[0]: corrupt image file"), problems
    out = refused("validate", str(saved), code=1)
    assert "queries[q-bin-1].images[0]" in out and "broken.png" in out


@pytest.mark.parametrize("side", [40, 100])  # over the limit (PIL warns), over twice the limit (PIL raises)
def test_decompression_bombs_are_refused(saved, monkeypatch, side):
    # PIL's own limit, lowered so the test's image stays small; the check must honour it.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    (saved / "images" / "huge.png").write_bytes(image_bytes("red", size=(side, side)))
    _edit(saved, "q-bin-1", images=["images/huge.png"])
    problems = [str(p) for p in load_benchmark(saved).validate()]
    assert len(problems) == 1 and "queries[q-bin-1].images[0]" in problems[0], problems
    assert "decompression bomb" in problems[0]


def test_a_jpeg_is_checked_at_thumbnail_size_and_passes(saved):
    write_image(saved / "images" / "photo.jpg", "blue", fmt="JPEG")
    _edit(saved, "q-bin-1", images=["images/photo.jpg"])
    assert load_benchmark(saved).validate() == []


# --- links leading out of the root ----------------------------------------------------------


def _link_out(folder: Path) -> Path:
    """``folder/images/link.png`` → a file outside ``folder``; returns the outside file."""
    secret = write_image(folder.parent / "elsewhere" / "secret.png", "gray")
    (folder / "images" / "link.png").symlink_to(secret)
    return secret


def test_an_image_linked_outside_the_benchmark_is_refused(saved):
    _link_out(saved)
    _edit(saved, "q-bin-1", images=["images/link.png"])
    bench = load_benchmark(saved)
    problems = [str(p) for p in bench.validate()]
    assert len(problems) == 1 and problems[0].startswith("queries[q-bin-1].images[0]:"), problems
    assert "outside the benchmark root" in problems[0]
    with pytest.raises(schema.ImagePathError, match="outside the benchmark root"):
        bench.image_path("images/link.png")
    out = refused("validate", str(saved), code=1)
    assert "queries[q-bin-1].images[0]" in out and "outside the benchmark root" in out


def test_a_linked_folder_leading_outside_is_refused_too(saved):
    shared = saved.parent / "shared"
    write_image(shared / "a.png")
    (saved / "images" / "shared").symlink_to(shared, target_is_directory=True)
    _edit(saved, "q-bin-1", images=["images/shared/a.png"])
    assert [p.field for p in load_benchmark(saved).validate()] == ["images[0]"]


def test_links_that_stay_inside_the_root_are_followed(saved):
    (saved / "images" / "alias.png").symlink_to(saved / "images" / "red.png")
    _edit(saved, "q-bin-1", images=["images/alias.png"])
    bench = load_benchmark(saved)
    assert bench.validate() == []
    assert bench.image_path("images/alias.png") == (saved / "images" / "red.png").resolve()


def test_a_benchmark_assembled_from_a_users_own_sources_may_follow_links(tmp_path):
    """Source folders link image sets to shared copies (COCO, VG); such a benchmark opts in to follow them."""
    bench = clean_benchmark(tmp_path / "src")
    _link_out(bench.root)
    get(bench, "q-bin-1").images = ["images/link.png"]
    assert [p.field for p in bench.validate()] == ["images[0]"]
    bench.confine_links = False
    assert bench.validate() == []
    saved = save_benchmark(bench, tmp_path / "out")  # the saved copy holds the file itself
    assert not (saved / "images" / "link.png").is_symlink()
    assert load_benchmark(saved).validate() == []


def _suite(folder: Path, *records: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _item(rid: str = "it-1", **fields) -> dict:
    record = {
        "id": rid,
        "subset": "CourtSI",
        "context": [{"type": "text", "text": "The court is 10 m long."}],
        "question": "How long is the court, in metres?",
        "gold": {"value": 10, "abs_tol": 0.5},
    }
    record.update(fields)
    return record


def test_a_suite_image_linked_outside_is_refused(tmp_path):
    suite = _suite(tmp_path / "suite", _item(context=[{"type": "image", "path": "images/link.png"}]))
    (suite / "images").mkdir()
    _link_out(suite)
    problems = [str(p) for p in load_clbench(suite).validate()]
    assert problems == [p for p in problems if "outside the benchmark root" in p] and len(problems) == 1
    assert problems[0].startswith("queries[it-1].blocks[0].image:")
    out = refused("clbench", "validate", str(suite), code=1)
    assert "queries[it-1].blocks[0].image" in out and "outside the benchmark root" in out


# --- benchmark.json and Parquet cells -------------------------------------------------------


def test_a_header_with_a_bom_is_read(saved):
    header = (saved / "benchmark.json").read_text()
    (saved / "benchmark.json").write_bytes(b"\xef\xbb\xbf" + header.encode())
    assert load_benchmark(saved).name == "tiny"


@pytest.mark.parametrize(
    ("text", "said"),
    [("{name: 'x'}", "not JSON"), ('["a", "b"]', "must be a JSON object, not a list"), ('{"tables": "csv"}', "tables")],
)
def test_a_bad_header_is_an_error_naming_the_file(saved, text, said):
    (saved / "benchmark.json").write_text(text)
    with pytest.raises(ValueError, match="benchmark.json") as err:
        load_benchmark(saved)
    assert said in str(err.value)
    out = refused("validate", str(saved), code=2)
    assert "benchmark.json" in out and said in out


def test_bad_json_in_a_parquet_cell_names_the_row_record_and_field(tmp_path):
    saved = save_benchmark(clean_benchmark(tmp_path / "src"), tmp_path / "pq", table_format="parquet")
    table = pq.read_table(saved / "queries.parquet")
    rows = table.to_pylist()
    rows[1]["meta"] = "{not json"
    pq.write_table(table.from_pylist(rows, schema=table.schema), saved / "queries.parquet")
    with pytest.raises(ValueError) as err:
        read_samples(saved / "queries.parquet")
    message = str(err.value)
    assert "queries.parquet" in message and "row 1" in message and rows[1]["id"] in message and "'meta'" in message
    out = refused("validate", str(saved), code=2)
    assert "queries.parquet" in out and "'meta'" in out


# --- what the run refuses, validate refuses -------------------------------------------------


def test_more_choices_than_the_preset_has_labels_are_refused_by_validate_and_the_run(saved, tmp_path):
    choices = [f"option {i}" for i in range(9)]
    _edit(saved, "q-mc-1", choices=choices, answer="option 3")
    bench = load_benchmark(saved)
    problems = [str(p) for p in build.preset_problems(bench, get_preset("fewmmbench"))]
    assert problems == ["queries[q-mc-1].choices: 9 choices but preset 'fewmmbench' has 8 labels"]
    out = refused("validate", str(saved), code=1)
    assert "queries[q-mc-1].choices: 9 choices but preset 'fewmmbench' has 8 labels" in out
    out = refused("run", str(saved), "--model", "builtin:no-such-model", "--out", str(tmp_path / "run"))
    assert "queries[q-mc-1].choices: 9 choices but preset 'fewmmbench' has 8 labels" in out
    assert not (tmp_path / "run").exists()  # refused before any model was loaded


def test_an_empty_option_is_refused(saved):
    _edit(saved, "q-mc-1", choices=["Left", " ", "Right"])
    problems = [str(p) for p in load_benchmark(saved).validate()]
    assert problems == ["queries[q-mc-1].choices[1]: empty option"]
    assert "queries[q-mc-1].choices[1]: empty option" in refused("validate", str(saved), code=1)


def test_an_empty_queries_table_is_refused_by_validate_and_by_the_run_before_any_model(saved, tmp_path):
    (saved / "queries.jsonl").write_text("")
    assert [str(p) for p in load_benchmark(saved).validate()] == ["queries: the table has no records"]
    assert "queries: the table has no records" in refused("validate", str(saved), code=1)
    # A model spec that cannot load: the benchmark's error comes first, so no model was loaded.
    out = refused("run", str(saved), "--model", "builtin:no-such-model", "--out", str(tmp_path / "run"))
    assert "queries: the table has no records" in out
    assert not (tmp_path / "run").exists()


# --- malformed context-suite records --------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"choices": 5}, "choices", "a list"),
        ({"choices": ["A", {"x": 1}]}, "choices[1]", "text"),
        ({"context": None, "query": "look <image>", "images": 7}, "images", "a list"),
        ({"meta": ["a", "b"]}, "meta", "an object"),
        ({"context": {"type": "text"}}, "context", "a list"),
        ({"context": [{"type": "text", "text": 5}]}, "context[0].text", "text"),
        ({"question": ["q"]}, "question", "text"),
        ({"gold": {"value": 10, "abs_tol": float("inf")}}, "gold.abs_tol", "Infinity"),
        ({"gold": {"value": float("nan")}}, "gold.value", "NaN"),
    ],
)
def test_malformed_context_records_name_file_line_record_and_field(tmp_path, fields, field, said):
    record = _item("it-2", **fields)
    if record.get("context") is None:
        record.pop("context")
    suite = _suite(tmp_path / "suite", _item("it-1"), record)
    with pytest.raises(SuiteFormatError) as err:
        load_clbench(suite)
    message = str(err.value)
    assert f"samples.jsonl:2 [it-2]: field '{field}'" in message and said in message, message
    out = refused("clbench", "validate", str(suite), code=2)
    assert f"samples.jsonl:2 [it-2]: field '{field}'" in out
    # The run reads the suite before it loads any model: the same error, and no run folder.
    out = refused("clbench", "run", str(suite), "--model", "builtin:no-such-model", "--out", str(tmp_path / "run"))
    assert f"field '{field}'" in out and not (tmp_path / "run").exists()


def test_a_non_finite_tolerance_in_memory_is_a_gold_problem():
    assert "abs_tol" in schema.gold_problem("number", {"value": 1.0, "abs_tol": float("inf")})
    assert "value" in schema.gold_problem("number", {"value": float("inf")})
    assert schema.gold_problem("point", {"xy": [1.0, float("inf")], "radius": 1.0})


def test_a_point_gold_is_three_dimensional_as_courtsi_or_planar():
    assert schema.gold_problem("point", {"xyz": [1.0, 2.0, 0.4], "radius": 0.3}) is None
    assert schema.gold_problem("point", {"xy": [1.0, 2.0], "radius": 0.3}) is None
    for bad in (
        {"xyz": [1.0, 2.0], "radius": 0.3},  # two coordinates under the 3-D key
        {"xy": [1.0, 2.0, 0.4], "radius": 0.3},
        {"xyz": [1.0, 2.0, 0.4], "xy": [1.0, 2.0], "radius": 0.3},  # which one is gold?
        {"xyz": [1.0, 2.0, True], "radius": 0.3},
        {"xyz": [1.0, 2.0, 0.4], "radius": 0},
    ):
        assert schema.gold_problem("point", bad), bad


@pytest.mark.parametrize("content", ["", "\n\n", "\ufeff\n"])
def test_an_empty_suite_is_refused(tmp_path, content):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "samples.jsonl").write_text(content)
    with pytest.raises(SuiteFormatError, match="no records"):
        load_clbench(suite)
    assert "no records" in refused("clbench", "validate", str(suite), code=2)
    out = refused("clbench", "run", str(suite), "--model", "builtin:no-such-model", "--out", str(tmp_path / "run"))
    assert "no records" in out


def test_a_suite_line_that_is_not_an_object_names_its_line(tmp_path):
    suite = _suite(tmp_path / "suite", _item("it-1"))
    with open(suite / "samples.jsonl", "a") as f:
        f.write("[1, 2]\n")
    with pytest.raises(SuiteFormatError, match=r"samples.jsonl:2: expected a JSON object"):
        load_clbench(suite)
