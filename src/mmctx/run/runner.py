"""Execute a plan against a backend into a run folder, resumably.

    RUN/
      manifest.json     everything that can change a score (see `RunConfig`)
      requests.jsonl    the plan: one line per request, enough to score without the benchmark
      responses.sqlite  the response store (see `ResponseStore`)
      run.lock          held by the process working in the folder (see `run_lock`)

A run started again in the same folder checks that its manifest matches, then asks only for
the requests whose keys are not stored yet. One process at a time works in a folder: a second
one started on it refuses at once (`run_lock`).

Requests go out a chunk (``batch_size`` queries) per backend call. A backend whose calls may
overlap (an API client declaring ``max_concurrency``) gets several chunks at once, from threads
of their own, enough to keep its concurrency full (`pipelined`); the thread that opened the
store commits each chunk as it finishes. A local model gets one chunk at a time.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sized
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

import mmctx
from mmctx.extract import extractor_version
from mmctx.jsonl import read_jsonl
from mmctx.models.base import (
    Backend,
    GenerateRequest,
    Generation,
    ModelInfo,
    OptionScores,
    ScoreRequest,
    declared_concurrency,
)
from mmctx.models.store import ResponseStore, backend_secrets
from mmctx.run.files import LOCK, MANIFEST, REQUESTS, STORE
from mmctx.run.manifest import read_manifest
from mmctx.run.plan import GenerationLimits, PlannedRequest
from mmctx.run.settings import CONTENT_FREE


class RunError(RuntimeError):
    """The run cannot start or continue as asked."""


@dataclass(frozen=True)
class RunConfig:
    """The choices of a run that can change its scores; written to the manifest."""

    benchmark: str
    benchmark_name: str
    benchmark_sha256: str
    settings: list[str]
    scorers: list[str]
    preset: str
    seed: int
    limits: GenerationLimits
    limit: int | None = None
    tasks: list[str] | None = None
    batch_size: int = 8
    shard: str | None = None  # "i/n": this run holds one shard of the plan
    # `Preset.fingerprint()` of the preset the prompts were built with: a preset *file* edited
    # since the run began keeps its name but renders other prompts, so resuming is refused.
    preset_sha256: str = ""
    # Prompt budget (`mmctx.run.budget`): tokens, or "window"; None: prompts as planned.
    max_prompt_tokens: int | str | None = None


@dataclass
class RunStats:
    planned: int = 0
    cached: int = 0  # answered from the store (an earlier run in the folder)
    done: int = 0
    errors: int = 0
    seconds: float = 0.0
    queries: int = 0
    errors_retried: int = 0
    usage: dict | None = None  # backend-reported, e.g. vLLM's prefix-cache hit rate
    shared: int = 0  # answered by another request's call (ppl and ppl-calibrated share one)


def check_capabilities(plan: list[PlannedRequest], backend: Backend) -> None:
    """Refuse a plan the backend cannot honour, before any request is sent."""
    caps = backend.capabilities
    name = backend.info.name
    ranking = sorted({r.scorer for r in plan if r.call == "ppl" and r.scorer != CONTENT_FREE})
    if ranking and not caps.loglikelihood:
        raise RunError(f"model {name!r} cannot score option log-likelihoods; drop the scorer(s) {ranking}")
    if not caps.chat_template:
        raise RunError(f"model {name!r} has no chat template")
    most = max((sum(len(m.images) for m in r.prompt.messages) for r in plan), default=0)
    if caps.max_images is not None and most > caps.max_images:
        raise RunError(f"model {name!r} takes at most {caps.max_images} images per prompt; this plan needs {most}")
    multi_turn_images = any(sum(1 for m in r.prompt.messages if m.images) > 1 for r in plan)
    if multi_turn_images and not caps.interleaved:
        raise RunError(f"model {name!r} cannot take images in several turns; use a single-turn preset")


def manifest_for(config: RunConfig, backend: Backend) -> dict:
    return {
        "mmctx_version": mmctx.__version__,
        "model": asdict(backend.info),
        "capabilities": asdict(backend.capabilities),
        "config": asdict(config),
        "extractor_version": extractor_version(),  # the chain as it runs, naming any rule a plugin added
        "python": platform.python_version(),
    }


# Config fields added after runs were made, with the value that stands for "not recorded": a run
# made before one was added has none (read as that value), and such a run still resumes and
# merges, compared on everything else; a run that recorded the field must match it.
_ADDED_CONFIG_FIELDS = {"preset_sha256": ""}
# Config fields added later whose absence is a value: a run made before one was added ran with
# that value, so its manifest reads as recording it and a run asking another is refused.
_DEFAULTED_CONFIG_FIELDS = {"max_prompt_tokens": None}


def _comparable(manifest: dict) -> dict:
    """The manifest less what may differ between a run and its resumption."""
    # Where the benchmark lives and how big the batches are may change; what it holds may not.
    config = {k: v for k, v in manifest["config"].items() if k not in ("batch_size", "benchmark")}
    return {"model": manifest["model"], "config": config}


def _comparables(manifests: list[dict]) -> list[dict]:
    """`_comparable` of each manifest, each added field dropped from all where one did not record it,
    each defaulted field read as its default where one did not record it."""
    out = [_comparable(m) for m in manifests]
    for key, unrecorded in _ADDED_CONFIG_FIELDS.items():
        if any(c["config"].get(key, unrecorded) == unrecorded for c in out):
            for c in out:
                c["config"].pop(key, None)
    for key, default in _DEFAULTED_CONFIG_FIELDS.items():
        if any(key in c["config"] for c in out):
            for c in out:
                c["config"].setdefault(key, default)
    return out


_held: dict[Path, int] = {}  # run folders this process holds, and how many nested holds each
_held_guard = threading.Lock()


@contextmanager
def run_lock(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir`` for this process while the block runs; creates the folder.

    A second process asking for a folder that is held is refused at once with a `RunError`
    naming the folder and the holder's pid — it does not wait: a run that waited would only
    find every response stored by the first, and an evaluation started twice by mistake should
    say so rather than sit idle. Without the lock two runs on one folder would both pass the
    manifest check and both compute every request.

    The lock is an ``fcntl.flock`` on ``RUN/run.lock``, which holds the holder's pid; the kernel
    releases it when the process ends, however it ends (SIGKILL included), so a stale lock
    never blocks a resume. The file stays behind (removing it would race with a process
    opening it). Nested holds in one process are allowed (``evaluate`` holds the folder and
    calls functions that hold it too). ``flock`` is local to one machine: processes on
    different machines sharing the folder over a network filesystem are not kept apart.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key = run_dir.resolve()
    with _held_guard:
        if key in _held:
            _held[key] += 1
            fd = None
        else:
            fd = _acquire(run_dir)
            _held[key] = 1
    try:
        yield
    finally:
        with _held_guard:
            _held[key] -= 1
            if not _held[key]:
                del _held[key]
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the lock


def _acquire(run_dir: Path) -> int:
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise RunError(
            f"{run_dir} is in use by another mmctx process (pid {holder}); "
            "wait for it to finish (then run again to resume), or use another --out folder"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def open_run(run_dir: Path, manifest: dict, plan: list[PlannedRequest], model: ModelInfo) -> None:
    """Create the run folder, or check that an existing one is the same run (the caller holds `run_lock`)."""
    open_run_manifest(run_dir, manifest)
    lines = [json.dumps(r.record(model), ensure_ascii=False) for r in plan]
    _write_atomic(run_dir / REQUESTS, "\n".join(lines) + "\n")


def open_run_manifest(run_dir: Path, manifest: dict, refresh: tuple[str, ...] = ()) -> None:
    """Write the manifest of a new run, or check an existing run's is the same run.

    ``refresh`` names manifest fields that may change between sessions of one run (the judge a
    context run scores with): they are rewritten, everything else must match.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / MANIFEST
    if path.exists():
        old = read_manifest(run_dir).fields
        stored, requested = _comparables([old, manifest])
        if stored != requested:
            raise RunError(
                f"{run_dir} holds a different run (model, settings or preset differ); use another --out folder.\n"
                f"  stored:    {json.dumps(stored, sort_keys=True)}\n"
                f"  requested: {json.dumps(requested, sort_keys=True)}"
            )
        if any(old.get(k) != manifest.get(k) for k in refresh):
            _write_atomic(path, json.dumps({**old, **{k: manifest.get(k) for k in refresh}}, indent=2) + "\n")
    else:
        manifest = {**manifest, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _write_atomic(path, json.dumps(manifest, indent=2) + "\n")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _chunks_by_query(pending: list[PlannedRequest], queries_per_chunk: int) -> list[list[PlannedRequest]]:
    """Consecutive requests of up to ``queries_per_chunk`` queries (the plan is in query order)."""
    chunks: list[list[PlannedRequest]] = []
    current: list[PlannedRequest] = []
    ids: set[str] = set()
    for r in pending:
        if r.query_id not in ids and len(ids) == queries_per_chunk:
            chunks.append(current)
            current, ids = [], set()
        ids.add(r.query_id)
        current.append(r)
    if current:
        chunks.append(current)
    return chunks


Chunk = list[PlannedRequest]
# Turns chunks of pending requests (and their store keys) into (chunk, rows) as they complete.
Completer = Callable[[list[Chunk], dict[str, str]], Iterator[tuple[Chunk, list[tuple]]]]


def execute(
    plan: list[PlannedRequest],
    backend: Backend,
    run_dir: Path,
    batch_size: int = 8,
    show_progress: bool = True,
    retry_errors: bool = False,
) -> RunStats:
    """Send every request not yet stored; commit each chunk as it completes.

    Chunks overlap up to the backend's declared concurrency (`pipelined`), else go one at a time.
    """

    def complete(chunks: list[Chunk], key_of: dict[str, str]) -> Iterator[tuple[Chunk, list[tuple]]]:
        return pipelined(chunks, lambda chunk: _run_chunk(chunk, backend, key_of), declared_concurrency(backend))

    return execute_with(
        plan, backend.info, run_dir, complete, "requests", batch_size, show_progress, retry_errors,
        secrets=backend_secrets(backend),
    )  # fmt: skip


def execute_with(
    plan: list[PlannedRequest],
    model: ModelInfo,
    run_dir: Path,
    complete: Completer,
    label: str,
    batch_size: int = 8,
    show_progress: bool = True,
    retry_errors: bool = False,
    secrets: tuple[str, ...] = (),
) -> RunStats:
    """The resumable loop any executor shares: skip stored keys, commit each chunk's rows as
    ``complete`` hands them back, count, show progress. ``secrets`` (the backend's credentials,
    see `backend_secrets`) are taken out of every row stored."""
    started = time.perf_counter()
    stats = RunStats(planned=len(plan))
    with ResponseStore(Path(run_dir) / STORE, secrets=secrets) as store:
        if retry_errors:
            stats.errors_retried = store.delete_errors()
        key_of = {r.id: r.key(model) for r in plan}
        # Each key is asked once: requests sharing one (ppl and ppl-calibrated of a setting, a
        # content-free prompt several queries share) share its response.
        stored = store.keys()
        asked, pending = set(stored), []
        for r in plan:
            if key_of[r.id] not in asked:
                asked.add(key_of[r.id])
                pending.append(r)
        stats.cached = sum(key_of[r.id] in stored for r in plan)
        stats.shared = len(plan) - len(pending) - stats.cached
        stats.queries = len({r.query_id for r in pending})
        with _progress(show_progress) as progress:
            task = progress.add_task(f"{len(pending)} {label}", total=stats.queries)
            for chunk, rows in complete(_chunks_by_query(pending, batch_size), key_of):
                store.put_many(rows)
                stats.done += len(rows)
                stats.errors += sum(1 for row in rows if row[4])
                progress.update(task, advance=len({r.query_id for r in chunk}))
    stats.seconds = time.perf_counter() - started
    return stats


Batch = TypeVar("Batch", bound=Sized)
Out = TypeVar("Out")


def pipelined(batches: list[Batch], run: Callable[[Batch], Out], capacity: int | None) -> Iterator[tuple[Batch, Out]]:
    """``(batch, run(batch))`` for every batch, in the order they finish.

    ``capacity`` None: one batch at a time, on the caller's thread (a local model's calls must
    not overlap). Else each batch runs on a thread of its own, and batches are started while
    fewer requests than the next one holds wait beyond ``capacity``: the backend's slots stay
    full, a batch's worth of requests waits to take each slot as it frees (a batch finishes
    only with its slowest request), and a kill loses no more than what was started.

    Results come back on the caller's thread, which alone writes the store. The threads are
    daemons, and after an exception (Ctrl-C included) nothing waits for them: the batches in
    flight are abandoned, as a killed run's are, and a resumed run asks for them again.
    """
    if capacity is None:
        for batch in batches:
            yield batch, run(batch)
        return
    todo = deque(batches)
    finished: queue.SimpleQueue = queue.SimpleQueue()  # (batch, out, exception) as each ends

    def work(batch: Batch) -> None:
        try:
            finished.put((batch, run(batch), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
            finished.put((batch, None, exc))

    load = _start_while_room(todo, 0, capacity, work)
    while load:
        batch, out, exc = finished.get()
        load -= len(batch)
        if exc is not None:
            raise exc
        # Before handing this one back: the backend keeps working while the caller commits.
        load = _start_while_room(todo, load, capacity, work)
        yield batch, out


def _start_while_room(todo: deque, load: int, capacity: int, work: Callable) -> int:
    """Start batches from ``todo`` on daemon threads while the requests waiting beyond ``capacity``
    are fewer than the next batch holds; ``load`` is the requests already running. Returns the new load."""
    while todo and load - capacity < len(todo[0]):
        batch = todo.popleft()
        load += len(batch)
        threading.Thread(target=work, args=(batch,), name="mmctx-batch", daemon=True).start()
    return load


def _guarded(call, items: list, failed) -> list:
    """``call(items)``; if it raises, each item alone, and an item that still raises becomes
    ``failed(exc)`` — stored as that request's error, so one bad request never stops a run.
    A batch that failed for its size (out of memory) succeeds item by item."""
    try:
        return call(items)
    except Exception as exc:  # noqa: BLE001 - any backend failure is recorded, never swallowed
        if len(items) == 1:
            return [failed(exc)]
        return [out for item in items for out in _guarded(call, [item], failed)]


def _failure(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _run_chunk(chunk: list[PlannedRequest], backend: Backend, key_of: dict[str, str]) -> list[tuple]:
    rows: list[tuple] = []
    by_limit: dict[int, list[PlannedRequest]] = {}
    for r in chunk:
        if r.call == "generate":
            by_limit.setdefault(r.max_new_tokens or 0, []).append(r)
    for limit, group in by_limit.items():
        requests = [GenerateRequest(r.prompt.messages, limit) for r in group]
        outs = _guarded(backend.generate, requests, lambda exc: Generation(error=_failure(exc)))
        for r, g in zip(group, outs):
            payload = {
                "text": g.text,
                "prompt_tokens": g.prompt_tokens,
                "output_tokens": g.output_tokens,
                "truncated": g.truncated,
            }
            rows.append((key_of[r.id], r.id, "generate", payload, g.error))
    ranked = [r for r in chunk if r.call == "ppl"]
    # One call for the chunk: a remote backend scores its queries concurrently.
    requests = [ScoreRequest(r.prompt.messages, r.prompt.options.texts) for r in ranked]
    for r, s in zip(ranked, _guarded(backend.score, requests, lambda exc: OptionScores(error=_failure(exc)))):
        payload = {
            "loglikelihoods": list(s.loglikelihoods),
            "token_counts": list(s.token_counts),
            "prompt_tokens": s.prompt_tokens,
        }
        rows.append((key_of[r.id], r.id, "ppl", payload, s.error))
    return rows


class _SamplesPerSecond(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- samples/s" if speed is None else f"{speed:.2f} samples/s")


def _progress(show: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _SamplesPerSecond(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        disable=not show,
    )


def merge_runs(shards: list[Path], out: Path) -> int:
    """Combine shard run folders into one run at ``out``; returns the number of responses.

    Shards must be the same run (model, settings, benchmark…) apart from their shard, and
    distinct shards of one split. The merged requests keep the whole plan's order, so scoring
    the merge gives exactly what a single process would have.
    """
    manifests = [read_manifest(s).fields for s in shards]
    unsharded = _comparables([_without_shard(m) for m in manifests])
    for path, m in zip(shards[1:], unsharded[1:]):
        if m != unsharded[0]:
            raise RunError(f"{path} is a different run from {shards[0]} (model or settings differ); not merging")
    specs = [m["config"].get("shard") for m in manifests]
    if None in specs or len(set(specs)) != len(specs) or len({s.split("/")[1] for s in specs}) != 1:
        raise RunError(f"shards must be distinct parts of one split, got {specs}")
    n = int(specs[0].split("/")[1])
    absent = sorted(set(range(n)) - {int(s.split("/")[0]) for s in specs})
    if absent:
        # A partial merge would score a subset of the items as if it were the whole run.
        raise RunError(f"shards {[f'{i}/{n}' for i in absent]} are missing; merge all {n} shards")
    out = Path(out)
    with run_lock(out):
        return _merge_into(shards, manifests, specs, out)


def _merge_into(shards: list[Path], manifests: list[dict], specs: list[str], out: Path) -> int:
    if (out / STORE).exists() or (out / MANIFEST).exists():
        raise RunError(f"{out} already holds a run; merge into a new folder")
    merged = {**_without_shard(manifests[0]), "merged_from": [str(s) for s in shards], "shards": specs}
    _write_atomic(out / MANIFEST, json.dumps(merged, indent=2) + "\n")
    records: dict[str, dict] = {}
    for shard in shards:
        for record in read_jsonl(Path(shard) / REQUESTS):
            records.setdefault(record["id"], record)
    ordered = sorted(records.values(), key=lambda record: record["position"])
    _write_atomic(out / REQUESTS, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ordered))
    with ResponseStore(out / STORE) as store:
        for shard in shards:
            with ResponseStore(Path(shard) / STORE) as other:
                store.copy_from(other)
        return len(store)


def _without_shard(manifest: dict) -> dict:
    return {**manifest, "config": {**manifest["config"], "shard": None}}
