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
    text = Path(path).read_text() if path else resources.files("mmctx.data.sources").joinpath("fewmmbench.yaml").read_text()
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
        reports.append(
            SourceReport(name, True, len(conv.samples), dict(conv.skipped), [str(e) for e in conv.errors])
        )
    return conversions, reports


def pool_from_recipe(recipe: Recipe, conversions: dict[str, Conversion]) -> list[Sample]:
    """The samples the recipe asks for, each given its group's task (the kind follows the format)."""
    from mmctx.curate.pipeline import KIND

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


def drop_small_groups(pool: list[Sample], k: int, demos: int) -> tuple[list[Sample], dict[str, int]]:
    """The pool without groups too small to curate (k queries + demos), and those groups' sizes."""
    from mmctx.curate.pipeline import groups_of

    small = {name: len(g) for name, g in groups_of(pool).items() if len(g) < k + demos}
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
    from mmctx.curate.pipeline import KIND

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


def write_build_report(out: Path, reports: list[SourceReport], table: list[dict]) -> Path:
    path = Path(out) / "curation" / "build.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"sources": [r.__dict__ for r in reports], "composition": table}, indent=1) + "\n")
    return path
