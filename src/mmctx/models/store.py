"""The response store: one SQLite database per run folder, in WAL mode.

Every response is committed as it arrives, under a key that covers the model and its
revision, the full rendered prompt (image *content* hashes included) and the generation
parameters. A run that is killed — even with SIGKILL — loses at most the batch in flight;
started again, it skips every key already stored. ``INSERT OR IGNORE`` makes a response
written twice (two processes, a retried batch) impossible to duplicate.

Credentials never enter it: every string of a response (its text, its error, anything in its
payload) has the secrets the store was opened with replaced by ``***`` before it is written —
here, where every response of every backend enters, because a server may echo the key inside a
successful reply, not only in an error. ``results.jsonl`` and the viewer are built from the
store, so they never see the key either.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REDACTED = "***"
# Shorter "keys" (a local server's "EMPTY", "x") are not credentials, and replacing them would
# rewrite ordinary words in the answers being scored.
MIN_SECRET_LENGTH = 8

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


def backend_secrets(*backends: object) -> tuple[str, ...]:
    """The credentials of the given backends (None skipped): what their stores must never hold.

    A backend that holds a credential (an API key) says so with a ``secrets()`` method.
    """
    found: list[str] = []
    for backend in backends:
        secrets = getattr(backend, "secrets", None)
        if callable(secrets):
            found.extend(s for s in secrets() if s and s not in found)
    return tuple(found)


def redact_secrets(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with every occurrence of each secret, in every string it holds, replaced by ``***``."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: redact_secrets(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_secrets(v, secrets) for v in value)
    return value


class ResponseStore:
    """Args:
    path: the SQLite file (created if absent).
    secrets: credentials to take out of every response written (see `backend_secrets`).
    read_only: open an existing store for reading only; the files are left byte for byte as they are.
    """

    def __init__(self, path: Path, secrets: Iterable[str] = (), *, read_only: bool = False):
        self.path = Path(path)
        # Longest first, so a key that contains another is replaced whole.
        kept = {s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}
        self._secrets = tuple(sorted(kept, key=len, reverse=True))
        if read_only:
            # Reading never writes: a read-write connection would checkpoint a killed run's
            # write-ahead log into the file and delete the log when it closes.
            # A store whose log is empty or gone is read as an immutable file: no lock, no shared-
            # memory index, nothing touched. Answers still in a log (a killed writer) can only be
            # read through SQLite's shared-memory index, which it rebuilds; the data files stay as
            # they are either way.
            if not self.path.is_file():
                raise FileNotFoundError(f"{self.path}: no response store")
            wal = self.path.with_name(self.path.name + "-wal")
            mode = "mode=ro" if wal.is_file() and wal.stat().st_size else "mode=ro&immutable=1"
            self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?{mode}", uri=True, timeout=60)
            return
        self._db = sqlite3.connect(self.path, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a committed response survives a crash
        self._db.execute(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResponseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def keys(self) -> set[str]:
        return {row[0] for row in self._db.execute("SELECT key FROM responses")}

    def put_many(self, rows: Iterable[tuple[str, str, str, dict[str, Any], str | None]], replace: bool = False) -> None:
        """Commit ``(key, request_id, kind, payload, error)`` rows in one transaction, secrets taken out.

        A key already stored keeps its row, unless ``replace`` (a retried error's new answer).
        """
        now = time.time()
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self._db:
            self._db.executemany(
                f"{verb} INTO responses (key, request_id, kind, payload, error, created) VALUES (?, ?, ?, ?, ?, ?)",
                [self._row(k, rid, kind, payload, err, now) for k, rid, kind, payload, err in rows],
            )

    def _row(
        self, key: str, request_id: str, kind: str, payload: dict[str, Any], error: str | None, now: float
    ) -> tuple:
        if self._secrets:
            clean, clean_error = redact_secrets(payload, self._secrets), redact_secrets(error, self._secrets)
            if clean != payload or clean_error != error:
                log.warning("the response to %s held a configured API key; stored as %s", request_id, REDACTED)
            payload, error = clean, clean_error
        return (key, request_id, kind, json.dumps(payload, ensure_ascii=False), error, now)

    def get_all(self) -> dict[str, dict[str, Any]]:
        """Every stored response by key, with its error (None if it succeeded)."""
        out = {}
        for key, payload, error in self._db.execute("SELECT key, payload, error FROM responses"):
            out[key] = {**json.loads(payload), "error": error}
        return out

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored responses among ``keys``, by key, with their error (None if it succeeded)."""
        wanted = list(dict.fromkeys(keys))
        out = {}
        for start in range(0, len(wanted), 500):  # SQLite bounds the number of bound parameters
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT key, payload, error FROM responses WHERE key IN ({marks})"
            for key, payload, error in self._db.execute(query, chunk):
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

    def copy_from(self, other: ResponseStore) -> int:
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
