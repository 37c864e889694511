"""`StoredBackend`: any backend, with every answer kept in a `ResponseStore` and replayed from it.

Every model call outside an evaluation run — CoT rationales, judges and the extractor, the
findings CLBench-V construction asks for — goes through this wrapper, so each one survives a
kill (even SIGKILL) and, started again, asks only for what is not stored yet:

- a request whose key (`mmctx.models.keys`: model identity and revision, the full rendered
  prompt with image content hashes, the generation parameters) is stored is answered from the
  store and never sent;
- the rest go to the wrapped backend a batch at a time, and each batch's answers are
  committed as soon as it returns, so a kill loses at most the batch in flight (a batch is a
  few times the requests a remote backend keeps in flight, so its concurrency stays used);
- a batch that raises is asked again request by request, and a request that still raises
  becomes that request's error (``Generation.error``), never the caller's exception: one bad
  request does not cost the others;
- errors are stored as errors and replayed as errors, so a resumed step reproduces the
  uninterrupted one; ``retry_errors`` asks them again (and replaces them). A caller whose
  errors are transient by nature and re-derived on every pass (the judges) passes
  ``store_errors=False`` instead.

The counts of one wrapper's life are in `StoredBackend.stats` (how many answers came from the
store, how many were asked).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from mmctx.models.base import Backend, GenerateRequest, Generation, OptionScores, ScoreRequest, declared_concurrency
from mmctx.models.keys import generate_key, score_key
from mmctx.models.store import ResponseStore, backend_secrets

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

# Where the model calls that build a benchmark (CoT rationales, CLBench-V construction) keep
# their replies, relative to the benchmark folder: beside the curation record.
BUILD_RESPONSES = Path("curation") / "responses.sqlite"

DEFAULT_BATCH = 8
# A batch of this many times a remote backend's concurrency keeps its requests in flight while
# committing often enough that a kill loses little.
BATCH_PER_SLOT = 4


def default_batch(backend: Backend) -> int:
    """Requests per committed batch for ``backend`` (see `StoredBackend`'s ``batch_size``)."""
    slots = declared_concurrency(backend)
    return BATCH_PER_SLOT * slots if slots else DEFAULT_BATCH


@dataclass(frozen=True)
class StoredCall:
    """One ``generate`` call as the store files it.

    ``key`` overrides the request's own key (`generate_key`) for a caller whose calls have more
    identity than the request (a judge's re-ask after an unparseable reply is the same request,
    yet a new call); ``request_id`` names the call in the store (what a reader looks it up by);
    ``extra`` is kept with the answer.
    """

    request: GenerateRequest
    request_id: str = ""
    key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoredStats:
    """What one `StoredBackend` did: answers replayed from the store, calls asked, errors among them."""

    from_store: int = 0
    asked: int = 0
    errors: int = 0
    errors_retried: int = 0

    def add(self, other: StoredStats) -> None:
        """Count ``other``'s calls in these too."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class StoredBackend:
    """A `Backend` that answers from ``store`` what it holds and stores what it asks ``backend``.

    Args:
        backend: the model asked for what the store lacks.
        store: where answers are kept (its secrets should include the backend's; see
            `ResponseStore` and `backend_secrets`).
        kind: the store's ``kind`` column for this caller's rows (``rationale``, ``judge``, …).
        batch_size: requests per call to ``backend``, each call committed before the next;
            None: `BATCH_PER_SLOT` times the backend's ``max_concurrency`` where it declares
            one (a remote backend), else `DEFAULT_BATCH`.
        retry_errors: ask again for requests stored as errors.
        store_errors: keep failed requests (as errors); False leaves them out of the store, so
            any later call asks again.
    """

    def __init__(
        self,
        backend: Backend,
        store: ResponseStore,
        kind: str = "generate",
        batch_size: int | None = None,
        retry_errors: bool = False,
        store_errors: bool = True,
    ):
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (or None), not {batch_size}")
        self.inner = backend
        self.store = store
        self.kind = kind
        self.batch_size = batch_size or default_batch(backend)
        self.retry_errors = retry_errors
        self.store_errors = store_errors
        self.info = backend.info
        self.capabilities = backend.capabilities
        self.stats = StoredStats()

    def secrets(self) -> tuple[str, ...]:
        return backend_secrets(self.inner)

    # ---- the Backend protocol -----------------------------------------------------------------

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        return self.generate_calls([StoredCall(r) for r in requests])

    def score(self, requests: list[ScoreRequest]) -> list[OptionScores]:
        keys = [score_key(self.info, r) for r in requests]
        return self._answer(
            keys,
            [(r, key, {}) for r, key in zip(requests, keys)],
            ask=self.inner.score,
            failed=lambda error: OptionScores(error=error),
            payload=_score_payload,
            read=_scores,
            kind="ppl",
        )

    # ---- calls with their own identity --------------------------------------------------------

    def generate_calls(self, calls: Sequence[StoredCall]) -> list[Generation]:
        """A `Generation` per call, in order: from the store when its key is there, else asked."""
        keys = [c.key or generate_key(self.info, c.request) for c in calls]
        return self._answer(
            keys,
            [(c.request, c.request_id or key, c.extra) for c, key in zip(calls, keys)],
            ask=self.inner.generate,
            failed=lambda error: Generation(error=error),
            payload=_generation_payload,
            read=_generation,
            kind=self.kind,
        )

    def _answer(
        self,
        keys: list[str],
        calls: list[tuple[Any, str, dict[str, Any]]],
        ask: Callable[[list[Any]], list[R]],
        failed: Callable[[str], R],
        payload: Callable[[R], tuple[dict[str, Any], str | None]],
        read: Callable[[dict[str, Any]], R],
        kind: str,
    ) -> list[R]:
        stored = self.store.get_many(keys)
        answers: dict[str, R] = {}
        pending: dict[str, int] = {}  # key -> index of its first call (a key asked twice is sent once)
        retried: set[str] = set()
        for i, key in enumerate(keys):
            row = stored.get(key)
            if row is not None and not (row["error"] and self.retry_errors):
                answers[key] = read(row)
            elif key not in pending:
                pending[key] = i
                if row is not None:
                    retried.add(key)
        self.stats.from_store += len(keys) - sum(1 for key in keys if key in pending)
        self.stats.errors_retried += len(retried)
        order = list(pending.items())
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            outs = guarded(ask, [calls[i][0] for _, i in batch], lambda exc: failed(failure(exc)))
            if len(outs) != len(batch):
                raise RuntimeError(f"backend returned {len(outs)} answers for {len(batch)} requests")
            rows = []
            for (key, i), out in zip(batch, outs):
                answers[key] = out
                body, error = payload(out)
                self.stats.asked += 1
                self.stats.errors += error is not None
                if error is None or self.store_errors:
                    _, request_id, extra = calls[i]
                    rows.append((key, request_id, kind, {**body, **extra}, error))
            self.store.put_many(rows, replace=bool(retried))
        return [answers[key] for key in keys]


def guarded(call: Callable[[list[T]], list[R]], items: list[T], failed: Callable[[Exception], R]) -> list[R]:
    """``call(items)``; if it raises, each item alone, and an item that still raises becomes
    ``failed(exc)`` — stored as that request's error, so one bad request never stops a step.
    A batch that failed for its size (out of memory) succeeds item by item."""
    try:
        return call(items)
    except Exception as exc:  # noqa: BLE001 - any backend failure is recorded, never swallowed
        if len(items) == 1:
            log.warning("a request failed: %s", failure(exc))
            return [failed(exc)]
        return [out for item in items for out in guarded(call, [item], failed)]


def failure(exc: Exception) -> str:
    """How a raised exception reads as a request's error."""
    return f"{type(exc).__name__}: {exc}"


def _generation_payload(g: Generation) -> tuple[dict[str, Any], str | None]:
    body = {
        "text": g.text,
        "prompt_tokens": g.prompt_tokens,
        "output_tokens": g.output_tokens,
        "truncated": g.truncated,
    }
    return body, g.error


def _generation(row: dict[str, Any]) -> Generation:
    return Generation(
        text=row.get("text", ""),
        prompt_tokens=row.get("prompt_tokens", 0),
        output_tokens=row.get("output_tokens", 0),
        truncated=bool(row.get("truncated", False)),
        error=row.get("error"),
    )


def _score_payload(s: OptionScores) -> tuple[dict[str, Any], str | None]:
    body = {
        "loglikelihoods": list(s.loglikelihoods),
        "token_counts": list(s.token_counts),
        "prompt_tokens": s.prompt_tokens,
    }
    return body, s.error


def _scores(row: dict[str, Any]) -> OptionScores:
    return OptionScores(
        loglikelihoods=tuple(row.get("loglikelihoods", ())),
        token_counts=tuple(row.get("token_counts", ())),
        prompt_tokens=row.get("prompt_tokens", 0),
        error=row.get("error"),
    )
