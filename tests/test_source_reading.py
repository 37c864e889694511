"""Bytes that are not UTF-8 cost only the record that holds them, named by file and line."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from fixtures.sources_real import SAMPLES, place_gvtbench, place_mme, place_valse, place_vsr

from mmctx.data.sources import source
from mmctx.data.sources.base import Conversion, SourceContext
from mmctx.data.sources.reader import Reader

BAD = b"\xff"


def reader_for(root: Path) -> Reader:
    (root / "ds").mkdir(parents=True, exist_ok=True)
    return Reader(SourceContext(root), "ds", Conversion())


def where(reader: Reader) -> list[tuple[str, str, str]]:
    return [(e.file, e.where, e.field) for e in reader.out.errors]


def spoil(path: Path, text: bytes, occurrence: int = 0) -> int:
    """Replace the first byte of the ``occurrence``-th ``text`` in ``path`` by 0xff; return its offset."""
    data = path.read_bytes()
    at = -1
    for _ in range(occurrence + 1):
        at = data.index(text, at + 1)
    path.write_bytes(data[:at] + BAD + data[at + 1 :])
    return at


# -- the reader's helpers ---------------------------------------------------------------------------


def test_jsonl_bad_byte_rejects_only_its_line(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "a.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"q": "one"}\r\n{"q": "t' + BAD + b'o"}\r\n\n{"q": "three \xe2\x80\xa8 ok"}\n')
    assert [(n, r["q"]) for n, r in reader.jsonl(path)] == [(1, "one"), (4, "three \u2028 ok")]
    assert where(reader) == [("a.jsonl", "line 2", "(encoding)")]
    message = reader.out.errors[0].message
    assert "not UTF-8" in message and "0xff" in message and "column 9" in message


def test_text_lines_bad_byte_rejects_only_its_line(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "q.txt"
    path.write_bytes(b"first\tYes\nsec" + BAD + b"ond\tNo\nthird\tYes\n")
    assert list(reader.lines(path)) == [(1, "first\tYes"), (3, "third\tYes")]
    assert where(reader) == [("q.txt", "line 2", "(encoding)")]


def test_json_list_bad_byte_rejects_only_its_record_and_keeps_indices(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "list.json"
    records = [{"q": "zero"}, {"q": "one", "more": ["x", "bad"]}, {"q": "two"}]
    path.write_text(json.dumps(records))
    offset = spoil(path, b"bad")
    got = [(index, record) for _, _, index, record in reader.list_records({"all": "list.json"})]
    assert got == [(0, {"q": "zero"}), (2, {"q": "two"})]  # the third record keeps its index
    assert where(reader) == [("list.json", "index 1", "more[1]")]
    message = reader.out.errors[0].message
    assert "not UTF-8" in message and f"byte offset {offset}" in message and "line 1" in message


def test_json_keyed_records_bad_byte_rejects_only_its_record(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "keyed.json"
    path.write_text(json.dumps({"k1": {"caption": "fine"}, "k2": {"caption": "bad one"}}, indent=4))
    spoil(path, b"bad")
    data = reader.json_file(path)
    assert data == {"k1": {"caption": "fine"}}
    assert where(reader) == [("keyed.json", "key k2", "caption")]
    assert "line 6" in reader.out.errors[0].message


def test_json_nested_record_list_keeps_the_rest(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "nested.json"
    path.write_text(json.dumps({"meta_data": {"name": "x"}, "data": [{"a": "ok"}, {"a": "bad"}, {"a": "ok"}]}))
    spoil(path, b"bad")
    data = reader.json_file(path)
    assert data["data"][0] == data["data"][2] == {"a": "ok"}
    assert reader.record(data["data"][1], path, "index 1") is None  # already reported, not twice
    assert where(reader) == [("nested.json", "index 1", "a")]  # the field within its record


def test_json_bad_byte_outside_any_record_rejects_the_file_naming_the_place(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "meta.json"
    path.write_text(json.dumps({"meta_data": {"name": "bad"}, "data": [{"a": "ok"}]}, indent=1))
    offset = spoil(path, b"bad")
    assert reader.json_file(path) is None
    assert where(reader) == [("meta.json", "line 3", "meta_data.name")]
    assert f"byte offset {offset}" in reader.out.errors[0].message


def test_json_bad_byte_in_a_key_shows_no_raw_surrogate(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "keys.json"
    path.write_text(json.dumps({"good": {"a": "x"}, "bad": {"a": "y"}}))
    spoil(path, b"bad")
    assert reader.json_file(path) == {"good": {"a": "x"}}
    text = str(reader.out.errors[0])
    text.encode("utf-8")  # printable and writable to build.json
    assert "\ufffdad" in text


def test_tsv_bad_byte_rejects_only_its_row(tmp_path):
    reader = reader_for(tmp_path)
    path = reader.folder / "t.tsv"
    path.write_bytes(b'\xef\xbb\xbfindex\tquestion\n0\tfirst\n1\t"multi\nline ' + BAD + b'"\n2\tthird\n')
    rows = list(reader.table_rows(path, delimiter="\t"))
    assert [(line, row["index"], row["question"]) for line, row in rows] == [(2, "0", "first"), (5, "2", "third")]
    assert where(reader) == [("t.tsv", "line 3", "(encoding)")]


# -- the converters, on the real excerpts -----------------------------------------------------------

needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"real source excerpts not found at {SAMPLES}")


def convert(name: str, root: Path) -> Conversion:
    return source(name)[1](SourceContext(root))


@needs_samples
def test_vsr_bad_byte_costs_one_line(tmp_path):
    folder = place_vsr(tmp_path)
    spoil(folder / "data" / "splits" / "random" / "test.jsonl", b"The bird")
    conv = convert("vsr", tmp_path)
    expected = [("data/splits/random/test.jsonl", "line 3", "(encoding)")]
    assert [(e.file, e.where, e.field) for e in conv.errors] == expected
    assert Counter(s.meta["subset"] for s in conv.samples) == {"random_test": 12, "random_train": 8}


@needs_samples
def test_gvtbench_bad_byte_costs_one_record(tmp_path):
    folder = place_gvtbench(tmp_path)
    spoil(folder / "GVTBench" / "coco_mci.json", b"Does cup")
    conv = convert("gvtbench", tmp_path)
    assert [(e.file, e.where, e.field) for e in conv.errors] == [("GVTBench/coco_mci.json", "index 1", "text_in")]
    ids = {s.id for s in conv.samples}
    assert len(ids) == 31 and "gvtbench/coco_mci/1" not in ids and "gvtbench/coco_mci/2" in ids


@needs_samples
def test_valse_bad_byte_costs_one_record(tmp_path):
    folder = place_valse(tmp_path)
    spoil(folder / "data" / "relations.json", b"giraffes")
    conv = convert("valse", tmp_path)
    assert [(e.file, e.where, e.field) for e in conv.errors] == [
        ("data/relations.json", "key relations:coco_2017:538080", "caption")
    ]
    assert "line " in conv.errors[0].message
    assert sum(s.meta["subset"] == "relations" for s in conv.samples) == 5


@needs_samples
def test_mme_bad_byte_costs_one_question(tmp_path):
    folder = place_mme(tmp_path)
    txt = folder / "MME_Benchmark_release_version" / "MME_Benchmark" / "commonsense_reasoning" / "0001.txt"
    spoil(txt, b"\tNo")
    before = convert("mme", place_mme(tmp_path / "clean").parent)
    conv = convert("mme", tmp_path)
    assert [(e.where, e.field) for e in conv.errors] == [("line 2", "(encoding)")]
    assert len(conv.samples) == len(before.samples) - 1


# -- converters that read tables and JSON lists through the reader ------------------------------------


def test_mmbench_bad_byte_rejects_only_its_row(tmp_path):
    from fixtures.sources_synth_b import write_mmbench

    path = write_mmbench(tmp_path)
    spoil(path, b"Question 3?")
    result = source("mmbench")[1](SourceContext(tmp_path))
    kept = {s.id for s in result.samples}
    assert "mmbench/physical_relation/3" not in kept and "mmbench/attribute_recognition/0" in kept
    assert [(e.file, e.field) for e in result.errors if e.field == "(encoding)"] == [
        ("MMBench_DEV_EN.tsv", "(encoding)")
    ]


def test_milebench_bad_byte_is_one_error_for_its_record(tmp_path):
    from fixtures.sources_synth_b import write_milebench

    write_milebench(tmp_path)
    path = tmp_path / "milebench" / "ActionSequence" / "ActionSequence.json"
    spoil(path, b"Jumped.")
    result = source("milebench")[1](SourceContext(tmp_path))
    about_index_2 = [e for e in result.errors if e.file.endswith("ActionSequence.json") and e.where == "index 2"]
    assert len(about_index_2) == 1 and "not UTF-8" in about_index_2[0].message
