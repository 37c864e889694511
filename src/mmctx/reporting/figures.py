"""Curation figures in the style of the FewMMBench paper, written as PNG and PDF.

- `demo_similarity_boxplot`: per task, the cosine between each query and its similar demos
  vs its random demos (appendix B.2, Figure 7).
- `projection_scatter`: a pool in 2-D with the selected queries highlighted (Figures 11–19).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
SIMILAR, RANDOM, POOL, SELECTED = "#0072B2", "#E69F00", "#BBBBBB", "#D55E00"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: Path) -> list[Path]:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".png"), out.with_suffix(".pdf")]
    for p in paths:
        fig.savefig(p, dpi=150, bbox_inches="tight")
    return paths


def demo_similarity_boxplot(similarities: dict[str, dict[str, list[float]]], out: Path) -> list[Path]:
    """``similarities[group]["similar" | "random"]`` → query–demo cosines; one pair of boxes per group."""
    plt = _pyplot()
    groups = sorted(similarities)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 2), 4))
    positions = np.arange(len(groups)) * 3.0
    for offset, kind, colour in ((-0.55, "similar", SIMILAR), (0.55, "random", RANDOM)):
        data = [similarities[g].get(kind, []) or [np.nan] for g in groups]
        box = ax.boxplot(data, positions=positions + offset, widths=0.9, patch_artist=True, showfliers=False)
        for patch in box["boxes"]:
            patch.set_facecolor(colour)
            patch.set_alpha(0.8)
        ax.plot([], [], color=colour, linewidth=8, label=f"{kind.capitalize()}-shot demos")
    ax.set_xticks(positions, [g.replace("__", "\n") for g in groups], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("Cosine similarity to the query")
    ax.set_title("Query–demonstration similarity: similar vs random demos")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    paths = _save(fig, out)
    plt.close(fig)
    return paths


def projection_scatter(coords: np.ndarray, selected: np.ndarray, title: str, out: Path) -> list[Path]:
    """The pool in 2-D (grey) with the selected queries on top."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    mask = np.zeros(len(coords), dtype=bool)
    mask[np.asarray(selected, dtype=int)] = True
    ax.scatter(coords[~mask, 0], coords[~mask, 1], s=6, c=POOL, label=f"pool ({(~mask).sum()})", linewidths=0)
    ax.scatter(coords[mask, 0], coords[mask, 1], s=14, c=SELECTED, label=f"selected ({mask.sum()})", linewidths=0)
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(loc="best", fontsize=8)
    paths = _save(fig, out)
    plt.close(fig)
    return paths
