"""`mmctx build fewmmbench`: convert the downloaded sources, pool them by the recipe, curate.

The recipe (YAML, shipped as ``fewmmbench.yaml`` and editable) lists, per task and kind
(``mcqa`` or ``caption_foil``), the ``source/subset`` pairs that feed it — the paper's Table 2.
Sources whose folder is missing are reported and skipped by name; a bad record is an error
of its source, reported, and never stops the others.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from mmctx.data.sources import source
from mmctx.data.sources.base import Conversion, SourceContext
from mmctx.schema import TASKS, Sample, listed

KINDS = ("mcqa", "caption_foil")
# The counted columns of the build table, in order (see `composition`).
COMPOSITION_COUNTS = ("pool", "queries", "similar_demos", "random_only_demos")


@dataclass(frozen=True)
class RecipeGroup:
    task: str
    kind: str
    inputs: tuple[str, ...]  # "source/subset"


@dataclass(frozen=True)
class Recipe:
    name: str
    groups: tuple[RecipeGroup, ...]

    @property
    def sources(self) -> list[str]:
        return sorted({i.split("/")[0] for g in self.groups for i in g.inputs})


def load_recipe(path: Path | None = None) -> Recipe:
    """The recipe at ``path``, or the shipped FewMMBench one; every entry is checked against the registry."""
    text = (
        Path(path).read_text()
        if path
        else resources.files("mmctx.data.sources").joinpath("fewmmbench.yaml").read_text()
    )
    data = yaml.safe_load(text)
    groups, problems = [], []
    for i, g in enumerate(data.get("groups", [])):
        where = f"groups[{i}]"
        if g.get("task") not in TASKS:
            problems.append(f"{where}.task: {g.get('task')!r} is not one of {TASKS}")
        if g.get("kind") not in KINDS:
            problems.append(f"{where}.kind: {g.get('kind')!r} is not one of {KINDS}")
        for entry in g.get("inputs", []):
            name, _, subset = entry.partition("/")
            try:
                info, _ = source(name)
            except ValueError as exc:
                problems.append(f"{where}.inputs: {exc}")
                continue
            if subset not in info.subsets:
                problems.append(f"{where}.inputs: {entry!r}: {name} has subsets {sorted(info.subsets)}")
        groups.append(RecipeGroup(g.get("task"), g.get("kind"), tuple(g.get("inputs", []))))
    if problems:
        raise ValueError(listed("recipe problems:", problems, shown=len(problems)))
    return Recipe(name=data.get("name", "fewmmbench"), groups=tuple(groups))


@dataclass
class SourceReport:
    name: str
    present: bool
    samples: int = 0
    skipped: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def convert_sources(root: Path, names: list[str]) -> tuple[dict[str, Conversion], list[SourceReport]]:
    """Run each named converter whose folder exists under ``root``; report the rest as missing."""
    ctx = SourceContext(Path(root))
    conversions, reports = {}, []
    for name in names:
        if not ctx.folder(name).is_dir():
            reports.append(SourceReport(name, present=False))
            continue
        _, convert = source(name)
        conv = convert(ctx)
        conversions[name] = conv
        reports.append(SourceReport(name, True, len(conv.samples), dict(conv.skipped), [str(e) for e in conv.errors]))
    return conversions, reports


def pool_from_recipe(recipe: Recipe, conversions: dict[str, Conversion]) -> list[Sample]:
    """The samples the recipe asks for, each given its group's task (the kind follows the format)."""
    from mmctx.data.groups import KIND

    wanted: dict[tuple[str, str], RecipeGroup] = {}
    for g in recipe.groups:
        for entry in g.inputs:
            wanted[tuple(entry.split("/", 1))] = g
    pool = []
    for name, conv in conversions.items():
        for s in conv.samples:
            group = wanted.get((name, s.meta.get("subset", "")))
            if group is None or KIND.get(s.format) != group.kind:
                continue
            pool.append(s.model_copy(update={"task": group.task}))
    return pool


def content_key(sample: Sample, root: Path) -> tuple:
    """What makes two samples the same item, whatever their ids and provenance.

    The same task (pools are per task, so a copy in another task's pool never sits beside the
    original), the same format, the same pictures (compared by the SHA-256 of their bytes, in
    order, so a copied or renamed file still matches), the same question, statement and context
    (whitespace collapsed, case kept), the same set of choices (their stored order does not
    matter: options are shuffled per prompt) and the same answer. ``meta`` is not compared: it
    holds provenance (file, line, index), which is what differs between repeated records. An
    ``open`` item's blocks, answer type and gold are compared too.
    """
    from mmctx.prompts.messages import file_sha256

    def text(value: str) -> str:
        return " ".join(value.split())

    images = []
    for rel in sample.images:
        path = Path(root) / rel
        # An unreadable image is reported by the embedding step; here it is compared by its path.
        images.append(file_sha256(str(path.resolve())) if path.is_file() else f"path:{rel}")
    return (
        sample.task,
        sample.format,
        tuple(images),
        text(sample.question),
        text(sample.statement),
        text(sample.context),
        tuple(sorted(text(c) for c in sample.choices)),
        text(sample.answer),
        # Context-learning items carry their text in blocks and their gold apart.
        sample.model_dump_json(include={"blocks", "answer_type", "gold"}) if sample.format == "open" else "",
    )


def drop_content_duplicates(pool: list[Sample], root: Path) -> tuple[list[Sample], dict[str, list[str]]]:
    """The pool with each item once (see `content_key`), and the ids dropped per id kept.

    The first sample of a repeated item (in pool order: source, file, record) is kept. A repeated
    record would otherwise be curated as several samples: two of its copies could be selected as
    queries, or one be the other's "most similar" demo.
    """
    first: dict[tuple, str] = {}
    kept, dropped = [], defaultdict(list)
    for s in pool:
        owner = first.setdefault(content_key(s, root), s.id)
        if owner == s.id:
            kept.append(s)
        else:
            dropped[owner].append(s.id)
    return kept, dict(dropped)


def drop_small_groups(pool: list[Sample], needed: int) -> tuple[list[Sample], dict[str, int]]:
    """The pool without groups smaller than ``needed`` (queries + demos), and those groups' sizes."""
    from mmctx.data.groups import groups_of

    small = {name: len(g) for name, g in groups_of(pool).items() if len(g) < needed}
    kept = [s for name, g in groups_of(pool).items() if name not in small for s in g]
    return kept, small


def composition(benchmark_queries: list[Sample], benchmark_demos: list[Sample], pool: list[Sample]) -> list[dict]:
    """Per task, kind and source: pool size, selected queries and demos — the layout of the paper's Table 2.

    Demos are counted apart by role, because the paper's Table 2 counts the demonstration set
    "excluding random samples": ``similar_demos`` are the distinct samples some query takes as a
    similar demo (Table 2's number); ``random_only_demos`` are those drawn only as random demos,
    the augmentation the paper adds on top. A sample that is both is counted once, as similar, so
    the two columns add up to the demo table.
    """
    from mmctx.data.groups import KIND

    similar = {k for q in benchmark_queries for k in q.demo_keys.get("similar", [])}
    rows: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    for what, samples in (("pool", pool), ("queries", benchmark_queries)):
        for s in samples:
            rows[(s.task, KIND.get(s.format, s.format), s.source)][what] += 1
    for s in benchmark_demos:
        role = "similar_demos" if s.id in similar else "random_only_demos"
        rows[(s.task, KIND.get(s.format, s.format), s.source)][role] += 1
    order = {t: i for i, t in enumerate(TASKS)}
    return [
        {"task": t, "kind": k, "source": src} | {c: counts[c] for c in COMPOSITION_COUNTS}
        for (t, k, src), counts in sorted(rows.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1], kv[0][2]))
    ]


def write_build_report(
    out: Path,
    reports: list[SourceReport],
    table: list[dict],
    *,
    duplicates: dict[str, list[str]] | None = None,
    pool: list[Sample] | None = None,
    small_groups: dict[str, int] | None = None,
    needed: int | None = None,
    left_out: dict | None = None,
    cues: list | None = None,
) -> Path:
    """``OUT/curation/build.json``: per source what was converted, what the build dropped and why, and the table.

    ``duplicates`` (kept id -> dropped ids, see `drop_content_duplicates`) is counted per source of
    the dropped samples, looked up in ``pool`` (the pool before dropping); ``small_groups`` are the
    groups skipped for having fewer than ``needed`` samples; ``left_out`` is what the FewMMBench
    layout could not hold (`mmctx.data.fewmmbench.save_fewmmbench_layout`); ``cues`` are the pool's
    surface cues (`mmctx.curate.cues.SurfaceCue`), each with its one-line description.
    """
    duplicates = duplicates or {}
    source_of = {s.id: s.source for s in pool or []}
    dropped = [d for ds in duplicates.values() for d in ds]
    report = {
        "sources": [r.__dict__ for r in reports],
        "duplicates": {
            "count": len(dropped),
            "by_source": dict(sorted(Counter(source_of.get(d, "unknown") for d in dropped).items())),
            "dropped_for": duplicates,
        },
        "skipped_groups": {name: {"samples": n, "needed": needed} for name, n in (small_groups or {}).items()},
        "left_out_of_layout": left_out or {"count": 0},
        "surface_cues": [{**c.__dict__, "description": c.describe()} for c in cues or []],
        "composition": table,
    }
    path = Path(out) / "curation" / "build.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return path
