"""A few-shot task from JSONL files of multiple-choice items with images.

One record a line::

    {"id": "q1", "images": ["img/q1.png"], "question": "What is shown?",
     "choices": ["a cat", "a dog"], "answer": "a dog"}

``answer`` is the text of the correct choice (or its 0-based index). Optional: ``task`` (a
sub-task name, default the file's stem), ``rationale`` (a demonstration's chain of thought, for
CoT settings), ``statement`` instead of ``question``/``choices`` for a yes/no verification item
(``answer`` ``"Yes"`` or ``"No"``). Image paths are relative to the file's folder and may not
leave it.

Demonstrations come from ``demos`` (another such file) or, when it is not given, from the other
records of the same file (a query is never its own demo). Random demos need nothing more;
similar demos need an ``encoder`` (as `mmctx curate --encoder`) and a separate demo file, and
are retrieved exactly as curation does (`mmctx.curate.pipeline.retrieve_step`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mmctx.curate.retrieve import random_demos
from mmctx.data.disk import save_benchmark
from mmctx.jsonl import iter_jsonl
from mmctx.prompts.presets import Preset, get_preset
from mmctx.schema import Benchmark, BenchmarkError, Problem, Rationale, Sample
from mmctx.tasks.task import Task

SHOTS: tuple[int, ...] = (4, 8)


def read_items(path: Path, task: str) -> list[Sample]:
    """The records of ``path`` as samples; a bad record is named by line and field."""
    samples, problems = [], []
    for line, record in iter_jsonl(path):
        try:
            samples.append(_sample(record, task, path.stem))
        except BadField as exc:
            problems.append(Problem(path.name, f"line {line}", exc.field, exc.message))
        except ValidationError as exc:
            for err in exc.errors():
                field = ".".join(str(x) for x in err["loc"])
                problems.append(Problem(path.name, f"line {line}", field, err["msg"]))
    if problems:
        raise BenchmarkError(problems)
    return samples


class BadField(ValueError):
    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")


def _sample(record: dict[str, Any], task: str, source: str) -> Sample:
    for key in ("id", "answer"):
        if key not in record:
            raise BadField(key, "missing")
    binary = "statement" in record
    choices = ["Yes", "No"] if binary else record.get("choices")
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        raise BadField("choices", f"need a list of at least two strings, not {choices!r}")
    answer = record["answer"]
    if isinstance(answer, int) and not isinstance(answer, bool):
        if not 0 <= answer < len(choices):
            raise BadField("answer", f"index {answer} outside the {len(choices)} choices")
        answer = choices[answer]
    if answer not in choices:
        raise BadField("answer", f"{answer!r} is not one of the choices {choices}")
    images = record.get("images") or []
    if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
        raise BadField("images", f"need a list of image paths, not {images!r}")
    rationale = record.get("rationale")
    return Sample(
        id=str(record["id"]),
        task=str(record.get("task") or task),
        source=source,
        format="binary" if binary else "mcqa",
        images=images,
        question="" if binary else str(record.get("question", "")),
        statement=str(record.get("statement", "")),
        choices=choices,
        answer=answer,
        rationale=Rationale(reasoning=rationale, answer=answer, generator="dataset") if rationale else None,
    )


def with_random_demos(queries: list[Sample], pool: list[Sample], k: int, seed: int) -> list[Sample]:
    """Each query with ``k`` seeded random demos of its task and format, never itself."""
    out = []
    for q in queries:
        candidates = [d.id for d in pool if d.id != q.id and d.task == q.task and d.format == q.format]
        picked = random_demos(q.id, q.task, candidates, min(k, len(candidates)), seed)
        out.append(q.model_copy(update={"demo_keys": {"random": picked}}))
    return out


def with_similar_demos(
    queries: list[Sample], pool: list[Sample], root: Path, work: Path, encoder: str, k: int, seed: int
) -> list[Sample]:
    """Similar and random demos retrieved as curation does (near-duplicates and same images excluded)."""
    from mmctx.curate.pipeline import embed_step, retrieve_step
    from mmctx.data.groups import group_name

    samples = queries + pool
    embeddings = embed_step(samples, root, work / "curation", encoder, progress=False)
    selections: dict[str, dict] = {}
    for q in queries:
        selections.setdefault(group_name(q.task, q.format), {"ids": []})["ids"].append(q.id)
    retrievals = retrieve_step(samples, root, embeddings, selections, work / "curation", k, seed)
    keys = {qid: rec for r in retrievals.values() for qid, rec in r["queries"].items()}
    return [q.model_copy(update={"demo_keys": {m: keys[q.id][m] for m in ("similar", "random")}}) for q in queries]


def _fewest_candidates(queries: list[Sample], pool: list[Sample]) -> int:
    """The fewest demo candidates any query has: pool items of its task and format, itself excluded."""
    counts: dict[tuple[str, str], int] = {}
    for d in pool:
        counts[(d.task, d.format)] = counts.get((d.task, d.format), 0) + 1
    own = {d.id for d in pool}
    return min((counts.get((q.task, q.format), 0) - (q.id in own) for q in queries), default=0)


def instruction_preset(instruction: str, base: str = "fewmmbench", name: str = "") -> Preset:
    """``base`` with ``instruction`` as the closing instruction of letter-answered items."""
    preset = get_preset(base)
    formats = {
        fmt: replace(template, instructions={**template.instructions, "letter": instruction})
        for fmt, template in preset.formats.items()
    }
    return replace(preset, name=name or f"{base}+instruction", formats=formats)


def jsonl_task(
    name: str,
    path: str | Path,
    demos: str | Path | None = None,
    instruction: str | None = None,
    encoder: str | None = None,
    shots: tuple[int, ...] = SHOTS,
    seed: int = 0,
) -> Task:
    """A few-shot task over the JSONL file ``path`` (see the module docstring)."""
    path = Path(path)
    demo_path = Path(demos) if demos is not None else None
    if encoder and demo_path is None:
        raise ValueError("similar demos need a demo file apart from the queries (demos=...)")

    # Read once, here: a bad record is refused when the task is named, before any run folder exists.
    queries = read_items(path, name)
    pool = read_items(demo_path, name) if demo_path else queries

    def prepare(work: Path) -> Path:
        k = max(shots, default=0)
        if encoder:
            ready = with_similar_demos(queries, pool, path.parent, work, encoder, k, seed)
        else:
            ready = with_random_demos(queries, pool, k, seed)
        used = {d for q in ready for ids in q.demo_keys.values() for d in ids}
        bench = Benchmark(
            name, ready, [d.model_copy(update={"demo_keys": {}}) for d in pool if d.id in used], path.parent
        )
        bench.check()
        return save_benchmark(bench, work / "benchmark")

    # The default grid keeps only the shot counts every query can fill: a file of 8 items, its own
    # demo pool, has 7 candidates per query, so its grid stops at 4 (asking for 8 is refused by name).
    fits = tuple(k for k in shots if k <= _fewest_candidates(queries, pool))
    strategies = ("random", "similar") if encoder else ("random",)
    has_rationales = demo_path is not None and any(s.rationale for s in pool)
    grid = ("0-shot",) + tuple(f"{k}-{m}" for k in fits for m in strategies)
    if encoder and has_rationales:
        grid += tuple(f"{k}-similar-cot" for k in fits)
    preset = instruction_preset(instruction, name=f"fewmmbench+{name}") if instruction else "fewmmbench"
    return Task(name, "fewshot", prepare, preset=preset, grid=grid, description=f"JSONL items of {path}")
