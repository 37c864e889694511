"""The papers' result figures, written as PNG and PDF (matplotlib, Agg).

- `accuracy_bars`: grouped bars per model and setting, ``Avg.`` accuracy with 95% CI error
  bars (Figure 1 / 4 for generation, Figure 5 for perplexity ranking).
- `uncertainty_violins`: probability of the chosen option, correct vs incorrect, per setting,
  one panel per model (Figures 6 and 9).
- `reliability_diagrams`: accuracy vs confidence per bin, one panel per setting, one line per model.
- `difficulty_bars`: items per "how many models got it right" bucket, per setting (Figure 10).
- `shots_curve`: ``Avg.`` accuracy against the number of demos of one strategy (0 to 64 shots),
  one panel per scorer, one line per model — many-shot, beyond the papers' 4 and 8.

Colours are Okabe–Ito (safe for the common colour-vision deficiencies); CoT settings are also
hatched, so bars stay distinguishable in greyscale. Sized for a paper page (7 in wide, 8–9 pt text).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mmctx.reporting.figures import _pyplot, _save
from mmctx.reporting.summary import ModelCells, ordered_settings, setting_label
from mmctx.run.settings import Setting
from mmctx.scoring.results import AVERAGE
from mmctx.scoring.stats import ConfidenceSplit, DifficultyCounts, ReliabilityDiagram

__all__ = ["accuracy_bars", "difficulty_bars", "reliability_diagrams", "shots_curve", "uncertainty_violins"]

OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#000000")
CORRECT, INCORRECT = "#0072B2", "#D55E00"  # the papers' blue / red, in Okabe–Ito
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
PAGE_WIDTH = 7.0  # inches: a two-column paper's full text width
MODELS_PER_ROW = 6  # accuracy bars: model groups per row of the figure
LEGEND_PER_PANEL = 4  # reliability diagrams: up to this many models, a legend with ECEs in every panel

SCORER_TITLES = {
    "generate": "Generation accuracy",
    "ppl": "Perplexity-ranked accuracy",
    "ppl-calibrated": "Calibrated perplexity-ranked accuracy",
}


@contextlib.contextmanager
def _paper_style() -> Iterator[Any]:
    plt = _pyplot()
    with plt.rc_context(
        {
            "font.size": 8,
            "axes.titlesize": 9,
            "axes.labelsize": 8,
            "legend.fontsize": 7,
            "xtick.labelsize": 7,
            "ytick.labelsize": 7,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "hatch.linewidth": 0.6,
        }
    ):
        yield plt


def _finish(plt, fig, out: Path) -> list[Path]:
    paths = _save(fig, out)
    plt.close(fig)
    return paths


def _setting_colour(index: int) -> str:
    return OKABE_ITO[index % len(OKABE_ITO)]


def _hatch(setting: str) -> str:
    return "///" if Setting.parse(setting).cot else ""


def _grid(n: int, max_cols: int) -> tuple[int, int]:
    cols = max(1, min(n, max_cols))
    return math.ceil(n / cols), cols


# --- accuracy -----------------------------------------------------------------------------------


def accuracy_bars(runs: Sequence[ModelCells], scorer: str, out: Path) -> list[Path]:
    """Grouped bars: one group per model, one bar per setting; ``Avg.`` accuracy (%) ± 95% CI.

    Models wrap onto rows of `MODELS_PER_ROW` so that 26 models still fit a page's width.
    """
    avg = {(m, c.setting): c for m, cs in runs for c in cs if c.task == AVERAGE and c.scorer == scorer}
    settings = ordered_settings([s for _, s in avg])
    models = [m for m, _ in runs]
    chunks = [models[i : i + MODELS_PER_ROW] for i in range(0, len(models), MODELS_PER_ROW)] or [[]]
    per_row = max(len(c) for c in chunks)
    with _paper_style() as plt:
        fig, axes = plt.subplots(len(chunks), 1, figsize=(PAGE_WIDTH, 0.4 + 2.3 * len(chunks)), squeeze=False)
        for ax, chunk in zip(axes[:, 0], chunks):
            _accuracy_row(ax, chunk, settings, avg, rotate=per_row > 3)
            ax.set_xlim(-0.5, per_row - 0.5)  # the same bar width on every row
        axes[0, 0].set_title(f"{SCORER_TITLES.get(scorer, scorer)}: average over tasks (95% CI)")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.tight_layout()
        fig.legend(handles, labels, ncol=min(len(settings), 7), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   frameon=False)  # fmt: skip
        return _finish(plt, fig, out)


def shots_by_strategy(runs: Sequence[ModelCells], strategy: str) -> dict[tuple[str, str], dict[int, Any]]:
    """Per (model, scorer), the ``Avg.`` cell at each number of ``strategy`` demos (0: ``0-shot``),
    plain settings only (no CoT, vision modifier or other demo order)."""
    out: dict[tuple[str, str], dict[int, Any]] = {}
    for model, cells in runs:
        for c in cells:
            s = Setting.parse(c.setting)
            plain = not (s.cot or s.last or s.order or s.option_order) and s.vision == "full"
            if c.task == AVERAGE and plain and (s.shots == 0 or s.demos == strategy):
                out.setdefault((model, c.scorer), {})[s.shots] = c
    return out


def shots_curve(runs: Sequence[ModelCells], out: Path, strategy: str = "similar") -> list[Path]:
    """``Avg.`` accuracy (%) ± 95% CI against the number of ``strategy`` demos, one panel per scorer,
    one line per model, the shots on a log-2 axis; nothing is written with fewer than 3 shot counts."""
    curves = {key: cells for key, cells in shots_by_strategy(runs, strategy).items() if len(cells) >= 3}
    scorers = [sc for sc in SCORER_TITLES if any(sc == scorer for _, scorer in curves)]
    if not scorers:
        return []
    models = list(dict.fromkeys(m for m, _ in curves))
    with _paper_style() as plt:
        fig, axes = plt.subplots(1, len(scorers), figsize=(PAGE_WIDTH, 2.4), squeeze=False, sharey=True)
        for ax, scorer in zip(axes[0], scorers):
            for i, model in enumerate(models):
                cells = curves.get((model, scorer))
                if not cells:
                    continue
                shots = sorted(cells)
                x = [max(k, 0.5) for k in shots]  # 0-shot drawn at ½ on the log axis, labelled 0
                acc = np.array([cells[k].accuracy for k in shots]) * 100
                low = np.array([cells[k].ci_low for k in shots]) * 100
                high = np.array([cells[k].ci_high for k in shots]) * 100
                err = np.nan_to_num(np.vstack([acc - low, high - acc]), nan=0.0).clip(min=0)
                ax.errorbar(x, acc, yerr=err, marker=MARKERS[i % len(MARKERS)], color=_setting_colour(i),
                            capsize=2, linewidth=1, markersize=3.5, label=model)  # fmt: skip
            ax.set_xscale("log", base=2)
            ticks = sorted({max(k, 0.5) for (m, sc), cells in curves.items() if sc == scorer for k in cells})
            ax.set_xticks(ticks, [("0" if t < 1 else str(int(t))) for t in ticks])
            ax.set_xlabel(f"{strategy} demos")
            ax.set_title(SCORER_TITLES[scorer])
        axes[0, 0].set_ylabel("Avg. accuracy (%)")
        fig.tight_layout()
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, ncol=min(len(models), 4), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   frameon=False)  # fmt: skip
        return _finish(plt, fig, out)


def _accuracy_row(ax, models: Sequence[str], settings: Sequence[str], avg: dict, rotate: bool) -> None:
    width = 0.8 / max(1, len(settings))
    x = np.arange(len(models))
    for j, setting in enumerate(settings):
        cells = [avg.get((m, setting)) for m in models]
        acc = np.array([c.accuracy if c else math.nan for c in cells]) * 100
        low = np.array([c.ci_low if c else math.nan for c in cells]) * 100
        high = np.array([c.ci_high if c else math.nan for c in cells]) * 100
        shown = ~np.isnan(acc)
        err = np.nan_to_num(np.vstack([acc - low, high - acc]), nan=0.0).clip(min=0)
        ax.bar(
            (x + (j - (len(settings) - 1) / 2) * width)[shown],
            acc[shown],
            width * 0.95,
            yerr=err[:, shown],
            color=_setting_colour(j),
            hatch=_hatch(setting),
            edgecolor="#333333" if _hatch(setting) else "white",
            linewidth=0.4,
            error_kw={"elinewidth": 0.7, "capsize": 1.5, "ecolor": "#333333"},
            label=setting_label(setting),
        )
    ax.set_xticks(x, models, rotation=15 if rotate else 0, ha="right" if rotate else "center")
    ax.set_ylabel("Accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3, linewidth=0.5)
    ax.set_axisbelow(True)


# --- uncertainty --------------------------------------------------------------------------------


def _distribution(ax, samples: Sequence[float], position: float, colour: str, width: float) -> None:
    """A violin where a density exists (two or more distinct values), else the points; plus the mean."""
    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        return
    if np.unique(values).size >= 2:
        body = ax.violinplot([values], positions=[position], widths=width, showextrema=False)
        for patch in body["bodies"]:
            patch.set_facecolor(colour)
            patch.set_edgecolor(colour)
            patch.set_alpha(0.55)
    else:
        ax.scatter(np.full(values.size, position), values, s=8, color=colour, alpha=0.8, linewidths=0)
    ax.hlines(values.mean(), position - width / 3, position + width / 3, color=colour, linewidth=1.4)


def uncertainty_violins(models: Sequence[tuple[str, Sequence[ConfidenceSplit]]], out: Path) -> list[Path]:
    """Per model a panel; per setting two violins: the chosen option's probability when correct / incorrect."""
    rows, cols = _grid(len(models), 3)
    with _paper_style() as plt:
        fig, axes = plt.subplots(rows, cols, figsize=(PAGE_WIDTH, 2.3 * rows), squeeze=False, sharey=True)
        for ax, (model, splits) in zip(axes.flat, models):
            for i, split in enumerate(splits):
                _distribution(ax, split.correct, i - 0.2, CORRECT, 0.38)
                _distribution(ax, split.incorrect, i + 0.2, INCORRECT, 0.38)
            ax.set_xticks(range(len(splits)), [setting_label(s.setting) for s in splits], rotation=30, ha="right")
            ax.set_xlim(-0.7, len(splits) - 0.3)
            ax.set_ylim(0, 1)
            ax.set_title(model)
            ax.grid(axis="y", alpha=0.3, linewidth=0.5)
        for ax in axes.flat[len(models) :]:
            ax.set_visible(False)
        for ax in axes[:, 0]:
            ax.set_ylabel("P(chosen option)")
        handles = [
            plt.Rectangle((0, 0), 1, 1, color=CORRECT, alpha=0.55, label="correct"),
            plt.Rectangle((0, 0), 1, 1, color=INCORRECT, alpha=0.55, label="incorrect"),
        ]
        fig.legend(handles=handles, loc="upper right", ncol=2, frameon=False)
        fig.suptitle("Uncertainty: probability of the chosen option (line: mean)", x=0.02, ha="left", fontsize=9)
        fig.tight_layout()
        return _finish(plt, fig, out)


def reliability_diagrams(models: Sequence[tuple[str, Sequence[ReliabilityDiagram]]], out: Path) -> list[Path]:
    """Per setting a panel: accuracy vs mean confidence of each non-empty bin, one line per model.

    Marker area grows with the bin's count; the dashed diagonal is perfect calibration. Up to
    `LEGEND_PER_PANEL` models each panel's legend gives the ECEs; beyond, one shared legend.
    """
    settings = ordered_settings([d.setting for _, ds in models for d in ds])
    rows, cols = _grid(len(settings), 4)
    with _paper_style() as plt:
        fig, axes = plt.subplots(rows, cols, figsize=(PAGE_WIDTH, 1.9 * rows + 0.4), squeeze=False)
        for ax, setting in zip(axes.flat, settings):
            ax.plot([0, 1], [0, 1], linestyle="--", color="#888888", linewidth=0.7)
            for k, (model, diagrams) in enumerate(models):
                d = next((d for d in diagrams if d.setting == setting), None)
                if d is None or d.n == 0:
                    continue
                filled = np.array(d.counts) > 0
                conf, acc = np.array(d.confidence)[filled], np.array(d.accuracy)[filled]
                sizes = 6 + 40 * np.sqrt(np.array(d.counts)[filled] / d.n)
                colour, marker = OKABE_ITO[k % len(OKABE_ITO)], MARKERS[k % len(MARKERS)]
                ax.plot(conf, acc, color=colour, linewidth=0.8)
                ax.scatter(
                    conf, acc, s=sizes, color=colour, marker=marker, label=f"{model} (ECE {d.ece:.2f})", zorder=3
                )
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_aspect("equal")
            ax.set_title(setting_label(setting))
            ax.set_xlabel("Confidence")
            if len(models) <= LEGEND_PER_PANEL:
                ax.legend(loc="upper left", fontsize=5.5, frameon=False, handletextpad=0.2)
        for ax in axes.flat[len(settings) :]:
            ax.set_visible(False)
        for ax in axes[:, 0]:
            ax.set_ylabel("Accuracy")
        fig.suptitle("Reliability diagrams (perplexity-ranked options)", x=0.02, ha="left", fontsize=9)
        fig.tight_layout()
        if len(models) > LEGEND_PER_PANEL:  # one shared legend of model names (ECEs: uncertainty.csv)
            handles = [
                plt.Line2D([], [], color=OKABE_ITO[k % len(OKABE_ITO)], marker=MARKERS[k % len(MARKERS)], label=m)
                for k, (m, _) in enumerate(models)
            ]
            fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, frameon=False)
        return _finish(plt, fig, out)


# --- difficulty ---------------------------------------------------------------------------------


def difficulty_bars(counts: Sequence[DifficultyCounts], out: Path) -> list[Path]:
    """Figure 10: per setting, one bar per bucket of how many models answered an item correctly."""
    if not counts:
        raise ValueError("no difficulty counts to plot")
    labels = counts[0].labels
    cmap = _pyplot().get_cmap("cividis")  # sequential and colour-blind safe: few models → dark
    colours = [cmap(v) for v in np.linspace(0.1, 0.9, len(labels))]
    with _paper_style() as plt:
        fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 2.8))
        x = np.arange(len(counts))
        width = 0.8 / len(labels)
        for j, label in enumerate(labels):
            heights = [d.counts[j] for d in counts]
            pos = x + (j - (len(labels) - 1) / 2) * width
            bars = ax.bar(pos, heights, width * 0.95, color=colours[j], label=label, edgecolor="white", linewidth=0.4)
            ax.bar_label(bars, fontsize=6, padding=1)
        ax.set_xticks(x, [setting_label(d.setting) for d in counts])
        ax.set_ylabel("Items")
        ax.grid(axis="y", alpha=0.3, linewidth=0.5)
        ax.set_axisbelow(True)
        scorer = counts[0].scorer
        ax.set_title(f"Items by number of models (of {counts[0].n_models}) answering correctly — {scorer}")
        ax.legend(title="models correct", ncol=len(labels), loc="upper center", bbox_to_anchor=(0.5, -0.12),
                  frameon=False)  # fmt: skip
        return _finish(plt, fig, out)


def capability_heatmap(scores: dict[str, dict[str, float]], out: Path, title: str = "Capability profile") -> list[Path]:
    """CLBench-V Figure 2: models (rows) × datasets (columns), scores in %, each column's best outlined.

    ``scores[model][dataset]`` in [0, 1]; a missing cell is left blank.
    """
    models = list(scores)
    datasets = sorted({d for row in scores.values() for d in row})
    grid = np.array([[scores[m].get(d, np.nan) for d in datasets] for m in models], dtype=float)
    with _paper_style() as plt:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(datasets) + 2), max(2.0, 0.35 * len(models) + 1)))
        image = ax.imshow(100 * grid, cmap="cividis", vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(len(datasets)), datasets, rotation=45, ha="right")
        ax.set_yticks(range(len(models)), models)
        for j in range(len(datasets)):
            column = grid[:, j]
            if np.all(np.isnan(column)):
                continue
            best = int(np.nanargmax(column))
            ax.add_patch(plt.Rectangle((j - 0.5, best - 0.5), 1, 1, fill=False, edgecolor="#D55E00", linewidth=1.5))
            for i, value in enumerate(column):
                if not np.isnan(value):
                    ax.text(j, i, f"{100 * value:.0f}", ha="center", va="center", fontsize=6,
                            color="white" if value < 0.5 else "black")  # fmt: skip
        fig.colorbar(image, ax=ax, label="score (%)")
        ax.set_title(title)
        return _finish(plt, fig, out)


def complexity_scatter(
    points: Sequence[tuple[float, float]], out: Path, xlabel: str = "context tokens", title: str = "Context complexity"
) -> list[Path]:
    """Score against a context-complexity measure (tokens, image count), with Pearson and Spearman in the title."""
    from scipy import stats as sps

    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    with _paper_style() as plt:
        fig, ax = plt.subplots(figsize=(3.5, 3.0))
        ax.scatter(x, 100 * y, s=10, color="#0072B2", alpha=0.7, linewidths=0)
        if len(points) >= 3 and np.std(x) > 0 and np.std(y) > 0:
            r, _ = sps.pearsonr(x, y)
            rho, _ = sps.spearmanr(x, y)
            title = f"{title}\nPearson r = {r:.2f}, Spearman ρ = {rho:.2f}"
        ax.set_xlabel(xlabel)
        ax.set_ylabel("score (%)")
        ax.set_title(title)
        return _finish(plt, fig, out)
