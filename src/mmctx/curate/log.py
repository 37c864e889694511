"""A benchmark's curation log: ``BENCH/curation/log.jsonl``, one JSON object a line.

Every change made to a benchmark after it was written (demos whose rationale human validation
rejected, for one) appends an entry: when, what, why, and the benchmark's fingerprint before
and after, so a run's ``benchmark_sha256`` can be traced to the state it ran on. Entries are
only ever appended; the log is never rewritten.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mmctx.jsonl import read_jsonl

LOG_FILE = Path("curation") / "log.jsonl"


def log_path(bench_root: Path) -> Path:
    return Path(bench_root) / LOG_FILE


def append_entry(bench_root: Path, action: str, **fields: Any) -> dict[str, Any]:
    """Append one entry (``time`` and ``action`` first, then ``fields``) and return it."""
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "action": action, **fields}
    path = log_path(bench_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())  # the entry describes a change already on disk: it must survive a crash too
    return entry


def read_log(bench_root: Path) -> list[dict[str, Any]]:
    """Every entry, oldest first; none when the benchmark has no log."""
    path = log_path(bench_root)
    return read_jsonl(path) if path.exists() else []
