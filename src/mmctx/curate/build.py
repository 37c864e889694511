"""FewMMBench built from its source datasets: convert each source, pool the samples by the recipe
(the paper's Table 2), drop what cannot be curated, then curate each task and record the build.

Two steps, so a caller can say what the first found before the long second one starts:
`gather_pool` (conversion, recipe, duplicates, groups too small, surface cues) and
`curate_pool` (the curation pipeline, the composition table, ``OUT/curation/build.json``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mmctx.curate.cues import SurfaceCue, find_surface_cues
from mmctx.curate.pipeline import (
    CurateOptions,
    CurateOutcome,
    CurationError,
    FiguresStep,
    curate_samples,
    needed_per_group,
)
from mmctx.data.sources.build import (
    SourceReport,
    composition,
    convert_sources,
    drop_content_duplicates,
    drop_small_groups,
    load_recipe,
    pool_from_recipe,
    write_build_report,
)
from mmctx.schema import Sample


@dataclass
class GatheredPool:
    """The recipe's pool from the sources, and what was left out of it and why."""

    sources_dir: Path
    reports: list[SourceReport]
    recipe_pool: list[Sample]  # before duplicates and small groups were dropped
    pool: list[Sample]
    duplicates: dict[str, list[str]]  # id kept -> content duplicates dropped
    small_groups: dict[str, int]  # group -> its size, below `needed`
    needed: int  # samples a group needs: k + the fewest demos a query may store (`needed_per_group`)
    cues: list[SurfaceCue] = field(default_factory=list)

    def duplicates_by_source(self) -> Counter:
        source_of = {s.id: s.source for s in self.recipe_pool}
        return Counter(source_of[d] for ds in self.duplicates.values() for d in ds)


@dataclass
class BuildOutcome:
    curated: CurateOutcome
    rows: list[dict]  # the composition table: per task, kind and source
    report_path: Path

    @property
    def left_out(self) -> dict[str, str]:
        return self.curated.layout_left_out


class NothingToCurate(CurationError):
    pass


def gather_pool(sources_dir: Path, k: int, demos: int, recipe: Path | None = None) -> GatheredPool:
    """Convert the recipe's sources under ``sources_dir`` and pool them (`load_recipe` errors on a bad recipe)."""
    plan = load_recipe(recipe)
    conversions, reports = convert_sources(sources_dir, plan.sources)
    recipe_pool = pool_from_recipe(plan, conversions)
    pool, duplicates = drop_content_duplicates(recipe_pool, sources_dir)
    need = needed_per_group(k, demos)
    pool, small = drop_small_groups(pool, need)
    return GatheredPool(sources_dir, reports, recipe_pool, pool, duplicates, small, need, find_surface_cues(pool))


def curate_pool(
    gathered: GatheredPool, out: Path, opts: CurateOptions, figures: FiguresStep | None = None
) -> BuildOutcome:
    """Curate the gathered pool into the benchmark at ``out`` and write ``OUT/curation/build.json``.

    An empty pool still gets its build report, then `NothingToCurate` naming it. ``figures`` draws
    the curation figures (`mmctx.reporting.curation.figures_step`), as in `curate_samples`.
    """
    report = {"duplicates": gathered.duplicates, "pool": gathered.recipe_pool, "small_groups": gathered.small_groups,
              "needed": gathered.needed, "cues": gathered.cues}  # fmt: skip
    if not gathered.pool:
        path = write_build_report(out, gathered.reports, [], **report)
        raise NothingToCurate(
            f"no samples left to curate: the recipe's sources are missing or too small (details: {path})"
        )
    curated = curate_samples(gathered.pool, gathered.sources_dir, out, opts, figures=figures)
    left_out = curated.layout_left_out
    rows = composition(curated.benchmark.queries, curated.benchmark.demos, gathered.pool)
    left_out_report = {"count": len(left_out), "by_reason": dict(Counter(left_out.values())), "samples": left_out}
    path = write_build_report(out, gathered.reports, rows, left_out=left_out_report, **report)
    return BuildOutcome(curated, rows, path)
