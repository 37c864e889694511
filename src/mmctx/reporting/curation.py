"""The curation figures, and curation with them drawn.

`figures_step` draws ``OUT/curation/figures``: the cosine of similar against random demos per
group (``demo_similarity``) and each group's pool projected to 2-D with its selected queries
highlighted (``projection_<group>``), PNG and PDF each. `curate` and `curate_samples` are
`mmctx.curate.pipeline`'s, with these figures as its figures step; ``mmctx curate`` runs them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mmctx.analysis.projection import project
from mmctx.curate import pipeline
from mmctx.curate.embed import Embeddings
from mmctx.curate.pipeline import CurateOptions, CurateOutcome
from mmctx.reporting.figures import demo_similarity_boxplot, projection_scatter
from mmctx.schema import Sample

__all__ = ["curate", "curate_samples", "figures_step"]


def figures_step(
    embeddings: dict[str, Embeddings], selections: dict, retrievals: dict, out: Path, projection: str = "pca"
) -> list[Path]:
    sims = {
        name: {
            "similar": [c for k in r["queries"].values() for c in k["similar_cosines"]],
            "random": [c for k in r["queries"].values() for c in k["random_cosines"]],
        }
        for name, r in retrievals.items()
    }
    paths = demo_similarity_boxplot(sims, out / "demo_similarity")
    for name, emb in embeddings.items():
        coords = project(emb.joint, projection)
        title = f"{name.replace('__', ' / ')}: {projection.upper()} of the pool, selected queries highlighted"
        paths += projection_scatter(coords, np.array(selections[name]["indices"]), title, out / f"projection_{name}")
    return paths


def curate(pool: Path, out: Path, opts: CurateOptions, progress: bool = True) -> CurateOutcome:
    """`mmctx.curate.pipeline.curate`, drawing the figures when ``opts.figures`` is set."""
    return pipeline.curate(pool, out, opts, progress, figures=figures_step)


def curate_samples(
    samples: list[Sample], root: Path, out: Path, opts: CurateOptions, progress: bool = True
) -> CurateOutcome:
    """`mmctx.curate.pipeline.curate_samples`, drawing the figures when ``opts.figures`` is set."""
    return pipeline.curate_samples(samples, root, out, opts, progress, figures=figures_step)
