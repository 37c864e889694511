"""The response store: one SQLite database per run folder, in WAL mode.

Every response is committed as it arrives, under a key that covers the model and its
revision, the full rendered prompt (image *content* hashes included) and the generation
parameters. A run that is killed — even with SIGKILL — loses at most the batch in flight;
started again, it skips every key already stored. ``INSERT OR IGNORE`` makes a response
written twice (two processes, a retried batch) impossible to duplicate.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key        TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    kind       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    error      TEXT,
    created    REAL NOT NULL
)
"""


class ResponseStore:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a committed response survives a crash
        self._db.execute(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ResponseStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def keys(self) -> set[str]:
        return {row[0] for row in self._db.execute("SELECT key FROM responses")}

    def put_many(self, rows: Iterable[tuple[str, str, str, dict[str, Any], str | None]]) -> None:
        """Commit ``(key, request_id, kind, payload, error)`` rows in one transaction."""
        now = time.time()
        with self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO responses (key, request_id, kind, payload, error, created) VALUES (?, ?, ?, ?, ?, ?)",
                [(k, rid, kind, json.dumps(payload, ensure_ascii=False), err, now) for k, rid, kind, payload, err in rows],
            )

    def get_all(self) -> dict[str, dict[str, Any]]:
        """Every stored response by key, with its error (None if it succeeded)."""
        out = {}
        for key, payload, error in self._db.execute("SELECT key, payload, error FROM responses"):
            out[key] = {**json.loads(payload), "error": error}
        return out

    def by_kind(self, kind: str) -> dict[str, dict[str, Any]]:
        """Stored responses of one kind by request id (the latest, if one was stored twice)."""
        out = {}
        rows = self._db.execute(
            "SELECT request_id, payload, error FROM responses WHERE kind = ? ORDER BY created", (kind,)
        )
        for request_id, payload, error in rows:
            out[request_id] = {**json.loads(payload), "error": error}
        return out

    def copy_from(self, other: "ResponseStore") -> int:
        """Every row of ``other`` not already here, as stored (a merge of shards); returns rows added."""
        before = len(self)
        rows = other._db.execute("SELECT key, request_id, kind, payload, error, created FROM responses").fetchall()
        with self._db:
            self._db.executemany("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?)", rows)
        return len(self) - before

    def delete_errors(self) -> int:
        """Forget responses stored as errors, so a resumed run asks for them again."""
        with self._db:
            return self._db.execute("DELETE FROM responses WHERE error IS NOT NULL").rowcount

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
