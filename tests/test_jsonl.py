"""The one JSONL reader splits records on "\n" only."""

from __future__ import annotations

import json

import pytest

from mmctx.jsonl import JsonlError, read_jsonl, split_records

SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def test_records_holding_unicode_line_separators_stay_whole(tmp_path):
    rows = [{"id": i, "text": f"before{sep}after"} for i, sep in enumerate(SEPARATORS)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert read_jsonl(path) == rows
    assert [json.loads(line) for _, line in split_records(path.read_text(encoding="utf-8"))] == rows


def test_bom_crlf_and_blank_lines_are_tolerated(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\r\n  \n{"a": 2}\n')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"a": 1}\n{"a": \n', "rows.jsonl:2: not JSON"),
        (b'{"a": 1}\n[1, 2]\n', "rows.jsonl:2: expected a JSON object, got list"),
        (b'{"a": "\xff"}\n', "rows.jsonl:1: not UTF-8"),
    ],
)
def test_a_bad_line_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(content)
    with pytest.raises(JsonlError, match=message):
        read_jsonl(path)
