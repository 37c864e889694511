"""A benchmark on disk: ``benchmark.json`` + query and demo tables (JSONL or Parquet) + image files.

    BENCH/
      benchmark.json        name, description, table format, mmctx layout version
      queries.jsonl|parquet one `Sample` per row (demo keys included)
      demos.jsonl|parquet   the demonstration table
      images/...            files referenced by relative path

Parquet has no type for free-form dicts, so the nested fields (``meta``, ``demo_keys``,
``rationale``) are stored there as JSON strings; both formats round-trip losslessly.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Literal

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
            [(name, pa.list_(pa.string())) if name in ("images", "choices") else (name, pa.string()) for name in Sample.model_fields]
        )
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    else:
        raise ValueError(f"{path}: tables must be .jsonl or .parquet")
    os.replace(tmp, path)


def read_samples(path: Path) -> list[Sample]:
    """Read a table written by `write_samples`; errors name the file and line."""
    path = Path(path)
    if path.suffix == ".jsonl":
        samples = []
        # Binary lines, decoded one at a time, so bad UTF-8 is reported with its line like bad JSON is.
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                    if not line.strip():
                        continue
                    samples.append(Sample.model_validate_json(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{lineno}: {exc}") from exc
        return samples
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        samples = []
        for i, row in enumerate(pq.read_table(path).to_pylist()):
            for col in _JSON_COLUMNS:
                if isinstance(row.get(col), str):
                    row[col] = json.loads(row[col])
            try:
                samples.append(Sample.model_validate(row))
            except ValueError as exc:
                raise ValueError(f"{path}: row {i}: {exc}") from exc
        return samples
    raise ValueError(f"{path}: tables must be .jsonl or .parquet")


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
        for p in validate_sample(s, table, bench.root, check_images=False)
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
    header = {"name": bench.name, "description": bench.description, "tables": table_format, "layout_version": LAYOUT_VERSION}
    (out / "benchmark.json").write_text(json.dumps(header, indent=2) + "\n")
    return out


def load_benchmark(path: Path) -> Benchmark:
    """Load a benchmark folder written by `save_benchmark` (JSONL or Parquet tables)."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a benchmark folder")
    header_path = root / "benchmark.json"
    header = json.loads(header_path.read_text()) if header_path.exists() else {}
    return Benchmark(
        name=header.get("name", root.name),
        description=header.get("description", ""),
        queries=read_samples(_table(root, "queries", header.get("tables"))),
        demos=read_samples(_table(root, "demos", header.get("tables"))),
        root=root,
    )


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
