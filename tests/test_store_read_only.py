"""Reading a run never writes it: a store left by a killed process (its answers still in the
write-ahead log) is read whole, and the database and its log stay byte for byte as they were."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mmctx.models.store import ResponseStore

KILLED_WRITER = """
import os, sys
from pathlib import Path
from mmctx.models.store import ResponseStore
store = ResponseStore(Path(sys.argv[1]))
store.put_many([(f"k{i}", "generate", "m", {"text": str(i)}, None) for i in range(50)])
os._exit(0)  # no close, no checkpoint: what SIGKILL leaves
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_killed_writers_store_is_read_without_being_written(tmp_path):
    path = tmp_path / "responses.sqlite"
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], check=True, timeout=120)
    wal = path.with_name(path.name + "-wal")
    assert wal.is_file() and wal.stat().st_size > 0  # the answers are in the log, not yet in the file
    before = (_digest(path), _digest(wal))
    with ResponseStore(path, read_only=True) as store:
        assert len(store.get_all()) == 50
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.put_many([("k99", "generate", "m", {"text": "x"}, None)])
    assert (_digest(path), _digest(wal)) == before


def test_a_missing_store_is_not_created_by_a_reader(tmp_path):
    with pytest.raises(FileNotFoundError, match="no response store"):
        ResponseStore(tmp_path / "responses.sqlite", read_only=True)
    assert not (tmp_path / "responses.sqlite").exists()
