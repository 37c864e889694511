"""A benchmark on disk: ``benchmark.json`` + query and demo tables (JSONL or Parquet) + image files.

    BENCH/
      benchmark.json        name, description, table format, mmctx layout version
      queries.jsonl|parquet one `Sample` per row (demo keys included)
      demos.jsonl|parquet   the demonstration table
      images/...            files referenced by relative path

Parquet has no type for free-form dicts, so the nested fields (``meta``, ``demo_keys``,
``rationale``) are stored there as JSON strings; both formats round-trip losslessly.

Reading refuses what it cannot read with the file named: a ``benchmark.json`` that is not a
JSON object (a leading BOM is tolerated, as editors on Windows write one), a table line or
Parquet cell that is not JSON (with its line, or row, id and column).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from mmctx.jsonl import iter_jsonl
from mmctx.schema import Benchmark, Sample

LAYOUT_VERSION = 1
TableFormat = Literal["jsonl", "parquet"]
_JSON_COLUMNS = ("meta", "demo_keys", "rationale", "blocks", "gold")


def write_samples(samples: list[Sample], path: Path) -> None:
    """Write samples to ``path`` (``.jsonl`` or ``.parquet``) atomically."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    rows = [s.model_dump(mode="json") for s in samples]
    if path.suffix == ".jsonl":
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        for row in rows:
            for col in _JSON_COLUMNS:
                row[col] = json.dumps(row[col], ensure_ascii=False)
        schema = pa.schema(
            [
                (name, pa.list_(pa.string())) if name in ("images", "choices") else (name, pa.string())
                for name in Sample.model_fields
            ]
        )
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    else:
        raise ValueError(f"{path}: tables must be .jsonl or .parquet")
    os.replace(tmp, path)


class TableError(ValueError):
    """A benchmark file that cannot be read; the message names the file (and line or row, record, field)."""


def read_samples(path: Path) -> list[Sample]:
    """Read a table written by `write_samples`; errors name the file and line (or row, id and column)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        samples = []
        for lineno, record in iter_jsonl(path):  # raises JsonlError (a ValueError) naming file and line
            try:
                samples.append(Sample.model_validate(record))
            except ValueError as exc:
                raise TableError(f"{path}:{lineno}{_id_of(record)}: {exc}") from None
        return samples
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        samples = []
        for i, row in enumerate(pq.read_table(path).to_pylist()):
            where = f"{path}: row {i}{_id_of(row)}"
            for col in _JSON_COLUMNS:
                if isinstance(row.get(col), str):
                    try:
                        row[col] = json.loads(row[col])
                    except json.JSONDecodeError as exc:
                        reason = f"{exc.msg}, column {exc.colno}"
                        raise TableError(f"{where}: field {col!r} is not JSON ({reason})") from None
            try:
                samples.append(Sample.model_validate(row))
            except ValueError as exc:
                raise TableError(f"{where}: {exc}") from None
        return samples
    raise TableError(f"{path}: tables must be .jsonl or .parquet")


def _id_of(record: Any) -> str:
    rid = record.get("id") if isinstance(record, dict) else None
    return f" [{rid}]" if isinstance(rid, str) and rid else ""


def _table(root: Path, name: str, preferred: str | None = None) -> Path:
    # The header's format comes first: a folder re-saved in the other format still holds the old, stale table.
    suffixes = (".jsonl", ".parquet")
    if preferred in ("jsonl", "parquet"):
        suffixes = (f".{preferred}",) + tuple(x for x in suffixes if x != f".{preferred}")
    for suffix in suffixes:
        if (root / f"{name}{suffix}").exists():
            return root / f"{name}{suffix}"
    raise FileNotFoundError(f"{root}: no {name}.jsonl or {name}.parquet")


def save_benchmark(bench: Benchmark, out: Path, table_format: TableFormat = "jsonl") -> Path:
    """Write ``bench`` under ``out``, copying its images there if it lives elsewhere."""
    from mmctx.schema import BenchmarkError, Problem, validate_sample

    out = Path(out)
    # Paths are checked before anything is copied: "../x.png" must neither be read from outside
    # the source root nor written outside ``out``.
    escaping = [
        p
        for table, records in (("queries", bench.queries), ("demos", bench.demos))
        for s in records
        for p in validate_sample(s, table, bench.root, check_images=False, confine_links=bench.confine_links)
        if p.field.startswith("images[")
    ]
    if escaping:
        raise BenchmarkError(escaping)
    out.mkdir(parents=True, exist_ok=True)
    if out.resolve() != bench.root.resolve():
        for rel in sorted({img for s in bench.queries + bench.demos for img in s.images}):
            dest = (out / rel).resolve()
            if not dest.is_relative_to(out.resolve()):
                raise BenchmarkError([Problem("images", rel, "path", "escapes the output folder")])
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(bench.image_path(rel), dest)
    write_samples(bench.queries, out / f"queries.{table_format}")
    write_samples(bench.demos, out / f"demos.{table_format}")
    header = {
        "name": bench.name,
        "description": bench.description,
        "tables": table_format,
        "layout_version": LAYOUT_VERSION,
    }
    (out / "benchmark.json").write_text(json.dumps(header, indent=2) + "\n")
    return out


def load_benchmark(path: Path) -> Benchmark:
    """Load a benchmark folder written by `save_benchmark` (JSONL or Parquet tables)."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a benchmark folder")
    header = read_header(root / "benchmark.json")
    return Benchmark(
        name=header.get("name", root.name),
        description=header.get("description", ""),
        queries=read_samples(_table(root, "queries", header.get("tables"))),
        demos=read_samples(_table(root, "demos", header.get("tables"))),
        root=root,
    )


def read_header(path: Path) -> dict[str, Any]:
    """``benchmark.json`` as a dict (empty if the file is absent); errors name the file and field."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        header = json.loads(path.read_bytes().decode("utf-8-sig"))  # -sig: a leading BOM is tolerated
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise TableError(f"{path}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
    if not isinstance(header, dict):
        raise TableError(f"{path}: must be a JSON object, not a {type(header).__name__}")
    for field in ("name", "description"):
        if field in header and not isinstance(header[field], str):
            raise TableError(f"{path}: field {field!r} must be text, not {type(header[field]).__name__}")
    if "tables" in header and header["tables"] not in ("jsonl", "parquet"):
        raise TableError(f'{path}: field \'tables\' must be "jsonl" or "parquet", not {header["tables"]!r}')
    version = header.get("layout_version", LAYOUT_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version > LAYOUT_VERSION:
        raise TableError(
            f"{path}: field 'layout_version' is {version!r}; this mmctx reads layout {LAYOUT_VERSION} and older"
        )
    return header


def load_pool(path: Path) -> tuple[list[Sample], Path]:
    """A pool folder (``pool.jsonl`` or ``pool.parquet`` + images) and the root its images resolve against.

    A benchmark folder is accepted too: its queries and demos together form the pool.
    """
    root = Path(path)
    for suffix in (".jsonl", ".parquet"):
        if (root / f"pool{suffix}").exists():
            return read_samples(root / f"pool{suffix}"), root
    if (root / "benchmark.json").exists():
        bench = load_benchmark(root)
        return bench.queries + bench.demos, root
    raise FileNotFoundError(f"{root}: no pool.jsonl, pool.parquet or benchmark.json")
