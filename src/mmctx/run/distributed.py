"""`mmctx run --ray`: the plan executed by Ray actors, one model replica each, into ONE run folder.

    driver (the `mmctx run --ray` process)           Ray actors (one per GPU, or N on CPU)
    - validates, plans, writes manifest.json         - load the backend once, from its spec
      and requests.jsonl, as a single run does       - run a chunk with the single-process code
    - deals chunks of queries to free actors  ---->  - return the chunk's rows; never open the
    - commits each returned chunk to         <----     run folder
      responses.sqlite: the ONLY writer

Rows are committed by the driver, not by the actors. SQLite in WAL mode needs every writer on
the same machine (its shared-memory index does not work over a network filesystem), so actors
on several nodes writing into one ``responses.sqlite`` would be wrong even on a shared
filesystem. Returning rows needs no shared filesystem at all, keeps one writer per store, and
keeps the single-process guarantees: each chunk is one transaction, keys come from the same
plan and model info, ``INSERT OR IGNORE`` makes a chunk delivered twice harmless, and a killed
driver loses only the chunks in flight (at most `QUEUED_PER_WORKER` per worker) — started
again, it asks only for keys not yet stored. A single-process run can resume a Ray run's
folder and vice versa.

Images travel by path. A worker that cannot read an image at its path (another node, no shared
filesystem) or finds different bytes there says so; from then on the driver ships that
worker the bytes of its chunks' images through the Ray object store (each image put once), and
the worker keeps them in a local cache named by content hash. Cache keys never depend on paths.

Ray is an optional extra (``pip install 'mmctx[ray]'``); this module imports it only when used.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mmctx.models import BUILTIN_PREFIX, cache_root, load_backend, options_for, resolve_builtin
from mmctx.models.base import Backend, Capabilities, ModelInfo
from mmctx.models.registry import is_remote
from mmctx.models.store import backend_secrets
from mmctx.prompts.messages import ImagePart, Message, file_sha256
from mmctx.run.plan import PlannedRequest
from mmctx.run.runner import (
    RunConfig,
    RunError,
    RunStats,
    _run_chunk,
    check_capabilities,
    execute_with,
    manifest_for,
    open_run,
)

Row = tuple[str, str, str, dict[str, Any], str | None]  # (key, request_id, kind, payload, error)

QUEUED_PER_WORKER = 2  # chunks sent to a worker before it answers: one running, one waiting
CPU_WORKERS = 2  # workers on a cluster without GPUs, unless told otherwise


@dataclass(frozen=True)
class RayOptions:
    """How `evaluate` runs on Ray: the cluster to join and how many model replicas to start."""

    # Passed to ray.init: None joins RAY_ADDRESS or a cluster `ray start`-ed on this machine, else
    # starts a local instance; "auto" insists on an existing one; "local" always starts one.
    address: str | None = None
    workers: int | None = None  # None: one per GPU of the cluster, or CPU_WORKERS without GPUs


def execute_distributed(
    plan: list[PlannedRequest],
    backend_spec: str,
    options: Any,
    run_dir: Path,
    *,
    config: RunConfig,
    workers: int | None = None,
    address: str | None = None,
    batch_size: int = 8,
    show_progress: bool = True,
    retry_errors: bool = False,
) -> RunStats:
    """Start the replicas, check capabilities, open the run folder and execute the plan into it.

    Does what `evaluate` does between "load backend" and "execute", with the backend loaded
    inside each Ray actor instead of here; the run folder it leaves is the one a
    single-process run would leave (same manifest, requests and response keys).

    ``options`` is the backend's options record (`mmctx.models.options_for`), shipped to every
    actor as it is (options records are frozen dataclasses: they pickle), or flat values for it.
    """
    run_dir = Path(run_dir)
    options = _options(backend_spec, options)
    with ReplicaPool.start(backend_spec, options, workers=workers, address=address) as pool:
        check_capabilities(plan, pool)  # type: ignore[arg-type] - needs only .info and .capabilities
        open_run(run_dir, manifest_for(config, pool), plan, pool.info)  # type: ignore[arg-type]
        stats = pool.execute(
            plan, run_dir, batch_size=batch_size, show_progress=show_progress, retry_errors=retry_errors
        )
        stats.usage = pool.usage()
        return stats


# ---- the worker side ------------------------------------------------------------------------


@dataclass(frozen=True)
class MissingImages:
    """A worker's answer when it can read some of a chunk's images neither at their paths nor as shipped bytes."""

    sha256s: frozenset[str]


class Replica:
    """One model replica; runs as a Ray actor. Loads the backend once and returns rows, never writes them."""

    def __init__(self, spec: str, options: Any):
        self.backend = _load_backend(spec, options)
        self.image_cache = Path(tempfile.gettempdir()) / "mmctx-ray-images"

    def describe(self) -> tuple[ModelInfo, Capabilities]:
        return self.backend.info, self.backend.capabilities

    def usage(self) -> dict:
        """What the backend reports about its work (e.g. vLLM's prefix-cache hits); {} if nothing."""
        usage = getattr(self.backend, "usage", None)
        return usage() if callable(usage) else {}

    def secrets(self) -> tuple[str, ...]:
        """The backend's credentials, for the driver's store to take out of the rows it commits."""
        return backend_secrets(self.backend)

    def run(
        self, chunk: list[PlannedRequest], key_of: dict[str, str], shipped: Mapping[str, Any]
    ) -> list[Row] | MissingImages:
        """The rows of one chunk, exactly as the single-process runner makes them."""
        try:
            local = localize(chunk, shipped, self.image_cache)
        except ImagesUnavailable as exc:
            return MissingImages(exc.sha256s)
        return _run_chunk(local, self.backend, key_of)


def _options(spec: str, options: Any) -> Any:
    """The backend's options record; flat values (a mapping) go through `options_for`."""
    return options_for(spec, options) if isinstance(options, Mapping) else options


def _load_backend(spec: str, options: Any) -> Backend:
    if spec.startswith(BUILTIN_PREFIX):
        # Replicas on one node share the cache: the first builds the tiny checkpoint, the rest wait.
        with _file_lock(cache_root() / "models" / ".build.lock"):
            resolve_builtin(spec)
    return load_backend(spec, options)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl  # POSIX, like Ray's workers; imported here so this module loads anywhere

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class ImagesUnavailable(Exception):
    """Some images of a chunk are readable here neither at their paths nor from shipped bytes."""

    def __init__(self, sha256s: set[str]):
        super().__init__(f"{len(sha256s)} images cannot be read on this worker")
        self.sha256s = frozenset(sha256s)


def localize(chunk: list[PlannedRequest], shipped: Mapping[str, Any], cache: Path) -> list[PlannedRequest]:
    """The chunk with every image at a path readable here and holding the image's exact bytes.

    An image stays at its own path when that holds the right bytes; otherwise it comes from the
    local cache, filled from ``shipped`` (sha256 → bytes, or a Ray object ref to them). Raises
    `ImagesUnavailable` with the hashes of images found nowhere.
    """
    paths: dict[str, str] = {}
    missing: set[str] = set()
    for part in _images(chunk):
        if part.sha256 in paths or part.sha256 in missing:
            continue
        path = _readable_copy(part, cache)
        if path is None and part.sha256 in shipped:
            path = _cache_image(part, _as_bytes(shipped[part.sha256]), cache)
        if path is None:
            missing.add(part.sha256)
        else:
            paths[part.sha256] = path
    if missing:
        raise ImagesUnavailable(missing)
    return [_with_image_paths(r, paths) for r in chunk]


def _images(chunk: list[PlannedRequest]) -> Iterator[ImagePart]:
    for r in chunk:
        for m in r.prompt.messages:
            yield from m.images


def _readable_copy(part: ImagePart, cache: Path) -> str | None:
    if os.path.isfile(part.path) and file_sha256(part.path) == part.sha256:
        return part.path
    cached = cache / _cache_name(part)
    return str(cached) if cached.is_file() else None


def _cache_name(part: ImagePart) -> str:
    return part.sha256 + Path(part.path).suffix


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    import ray

    return ray.get(value)


def _cache_image(part: ImagePart, data: bytes, cache: Path) -> str:
    if hashlib.sha256(data).hexdigest() != part.sha256:
        raise RunError(f"shipped bytes of image {part.path} do not match its hash {part.sha256}")
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / _cache_name(part)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # several workers may share the cache
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return str(path)


def _with_image_paths(request: PlannedRequest, paths: dict[str, str]) -> PlannedRequest:
    if all(paths[p.sha256] == p.path for p in _images([request])):
        return request
    messages = tuple(
        Message(m.role, tuple(replace(p, path=paths[p.sha256]) if isinstance(p, ImagePart) else p for p in m.content))
        for m in request.prompt.messages
    )
    return replace(request, prompt=replace(request.prompt, messages=messages))


# ---- the driver side ------------------------------------------------------------------------


@dataclass
class _Worker:
    actor: Any  # a Ray actor handle of `Replica`
    queued: int = 0
    alive: bool = True
    ships_images: bool = False  # set once the worker could not read an image at its path


class ReplicaPool:
    """Model replicas as Ray actors, and the loop that deals them chunks and commits their rows.

    Stands in for the backend where the run needs only its ``info`` and ``capabilities``
    (`check_capabilities`, `manifest_for`, request keys).
    """

    def __init__(self, workers: list[_Worker], info: ModelInfo, capabilities: Capabilities, owns_ray: bool):
        self.workers = workers
        self.info = info
        self.capabilities = capabilities
        self._owns_ray = owns_ray
        self._image_refs: dict[str, Any] = {}

    @classmethod
    def start(cls, spec: str, options: Any, *, workers: int | None = None, address: str | None = None) -> ReplicaPool:
        """Join (or start) Ray, start the replicas and wait until each has loaded the model."""
        options = _options(spec, options)
        if str(getattr(options, "device", "auto")).startswith("cuda:"):
            raise RunError("with --ray every worker gets its own GPU; use --device auto or cuda, not a GPU index")
        ray = _import_ray()
        owns_ray = not ray.is_initialized()
        if owns_ray:
            ray.init(address=address)
        try:
            resources, count = _placement(spec, options, workers, ray.cluster_resources())
            actor_class = ray.remote(Replica).options(**resources)
            handles = [actor_class.remote(spec, options) for _ in range(count)]
            try:
                described = ray.get([h.describe.remote() for h in handles])
            except ray.exceptions.RayActorError as exc:
                raise RunError(f"a Ray worker could not load model {spec!r}: {exc}") from exc
            info, capabilities = _agreed(described)
        except BaseException:
            if owns_ray:
                ray.shutdown()
            raise
        return cls([_Worker(h) for h in handles], info, capabilities, owns_ray)

    def usage(self) -> dict:
        """Each live replica's backend usage, under ``workers``; {} when no backend reports any."""
        ray = _import_ray()
        alive = [w for w in self.workers if w.alive]
        try:
            reports = ray.get([w.actor.usage.remote() for w in alive])
        except ray.exceptions.RayError:
            return {}  # a report, never a failure
        return {"workers": reports} if any(reports) else {}

    def secrets(self) -> tuple[str, ...]:
        """Every live replica's credentials (see `backend_secrets`): the driver stores their rows."""
        ray = _import_ray()
        found = ray.get([w.actor.secrets.remote() for w in self.workers if w.alive])
        return tuple(dict.fromkeys(s for secrets in found for s in secrets))

    def close(self) -> None:
        ray = _import_ray()
        for w in self.workers:
            ray.kill(w.actor)
        self._image_refs.clear()
        if self._owns_ray:
            ray.shutdown()

    def __enter__(self) -> ReplicaPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(
        self,
        plan: list[PlannedRequest],
        run_dir: Path,
        *,
        batch_size: int = 8,
        show_progress: bool = True,
        retry_errors: bool = False,
    ) -> RunStats:
        """Send every request not yet stored; commit each chunk as a worker returns it."""
        return execute_with(
            plan, self.info, run_dir, lambda chunks, key_of: self._completed(deque(chunks), key_of),
            f"requests on {len(self.workers)} Ray workers", batch_size, show_progress, retry_errors,
            secrets=self.secrets(),
        )  # fmt: skip

    def _completed(
        self, todo: deque[list[PlannedRequest]], key_of: dict[str, str]
    ) -> Iterator[tuple[list[PlannedRequest], list[Row]]]:
        """Each chunk with its rows, in the order workers finish them.

        A free worker takes the next chunk, so a slow replica never holds back the rest. A chunk
        whose worker died goes back to the queue for the others; with no worker left the run
        stops (everything committed so far stays).
        """
        ray = _import_ray()
        in_flight: dict[Any, tuple[_Worker, list[PlannedRequest], bool]] = {}  # ref -> worker, chunk, images shipped
        while todo or in_flight:
            for w in self.workers:
                while w.alive and w.queued < QUEUED_PER_WORKER and todo:
                    chunk = todo.popleft()
                    keys = {r.id: key_of[r.id] for r in chunk}
                    ref = w.actor.run.remote(chunk, keys, self._ship(chunk) if w.ships_images else {})
                    in_flight[ref] = (w, chunk, w.ships_images)
                    w.queued += 1
            if not in_flight:
                raise RunError(f"all {len(self.workers)} Ray workers died; {len(todo)} chunks were not run")
            [ref], _ = ray.wait(list(in_flight), num_returns=1)
            worker, chunk, shipped = in_flight.pop(ref)
            worker.queued -= 1
            try:
                out = ray.get(ref)
            except ray.exceptions.RayActorError:
                worker.alive = False
                todo.appendleft(chunk)
                continue
            if isinstance(out, MissingImages):
                if shipped:
                    raise RunError(f"a Ray worker cannot read images {sorted(out.sha256s)} even when shipped")
                worker.ships_images = True
                todo.appendleft(chunk)
                continue
            yield chunk, out

    def _ship(self, chunk: list[PlannedRequest]) -> dict[str, Any]:
        """Object refs to the bytes of the chunk's images, each image put in the object store once."""
        ray = _import_ray()
        shipped = {}
        for part in _images(chunk):
            if part.sha256 not in self._image_refs:
                self._image_refs[part.sha256] = ray.put(Path(part.path).read_bytes())
            shipped[part.sha256] = self._image_refs[part.sha256]
        return shipped


def _import_ray():
    try:
        import ray
    except ImportError:
        raise RunError("--ray needs Ray: pip install 'mmctx[ray]'") from None
    return ray


def _placement(spec: str, options: Any, workers: int | None, cluster: dict[str, float]) -> tuple[dict[str, float], int]:
    """The resources of one replica and how many replicas to start.

    A replica gets a GPU when the cluster has some, unless its backend calls a server or is
    told to run on the CPU (a backend without a ``device`` option runs where it is placed).
    """
    gpus = int(cluster.get("GPU", 0))
    cpus = int(cluster.get("CPU", 0))
    device = getattr(_options(spec, options), "device", "auto")
    wants_gpu = gpus > 0 and device != "cpu" and not is_remote(spec)
    count = workers if workers is not None else (gpus if wants_gpu else CPU_WORKERS)
    if count < 1:
        raise RunError(f"--ray-workers must be at least 1, got {count}")
    if wants_gpu and count > gpus:
        raise RunError(f"{count} Ray workers need {count} GPUs; the cluster has {gpus}")
    if not wants_gpu and count > cpus:
        raise RunError(f"{count} Ray workers need {count} CPUs; the cluster has {cpus}")
    return ({"num_gpus": 1} if wants_gpu else {"num_cpus": 1}), count


def _agreed(described: list[tuple[ModelInfo, Capabilities]]) -> tuple[ModelInfo, Capabilities]:
    """The one model every replica loaded; replicas that differ (dtype, revision…) would key responses differently."""
    distinct = {json.dumps([asdict(i), asdict(c)], sort_keys=True) for i, c in described}
    if len(distinct) > 1:
        listed = "\n  ".join(sorted(distinct))
        raise RunError(f"the Ray workers loaded different models (revision, dtype or device differ):\n  {listed}")
    return described[0]
