"""The papers' tables from scored runs: Markdown in the layout of FewMMBench Tables 4 and 5, and CSV.

Layout: one block per shot count; rows are models; columns are tasks, each split into the
demo settings present (R = random, S = similar, S+C = similar with CoT), then the average.
Generation blocks carry a second row per model with the unparsed rate, because an answer
the rules could not read is its own outcome, not a wrong answer in disguise. Model, task and
setting names are written with `markdown_text`, so they render as text whatever they hold.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict
from pathlib import Path

from mmctx.reporting.escaping import markdown_text as md
from mmctx.run.settings import Setting
from mmctx.schema import TASKS
from mmctx.scoring.results import AVERAGE, CellMetrics

TASK_HEADERS = {
    "attribute_recognition": "Attribute",
    "object_recognition": "Object",
    "plurality": "Plurality",
    "counting": "Counting",
    "spatial_relations": "Relations",
    "action_recognition": "Action",
    "commonsense": "Commonsense",
    "temporal": "Temporal",
    "coreference": "Coreference",
}
SCORER_TITLES = {
    "generate": "Accuracy (generation, Table 4 layout)",
    "ppl": "Perplexity-ranked accuracy (Table 5 layout)",
    "ppl-calibrated": "Perplexity-ranked accuracy, contextually calibrated (Table 5 layout)",
}


def _short(setting: Setting) -> str:
    # a shortcut check must never read as its full-vision setting
    ablation = ("" if setting.vision == "full" else f" {setting.vision}") + (
        f"#p{setting.option_order}" if setting.option_order else ""
    )
    if setting.shots == 0:
        return "0" + ("+C" if setting.cot else "") + ablation
    demos = {"random": "R", "similar": "S"}.get(setting.demos or "", str(setting.demos))
    return demos + ("+C" if setting.cot else "") + ablation


def _fmt(value: float, scale: float = 100.0) -> str:
    return "–" if value is None or math.isnan(value) else f"{value * scale:.1f}"


def markdown_tables(runs: list[tuple[str, list[CellMetrics]]]) -> str:
    """All blocks for all scorers present, as Markdown."""
    cells = [(model, c) for model, cs in runs for c in cs]
    out: list[str] = []
    for scorer in SCORER_TITLES:
        mine = [(m, c) for m, c in cells if c.scorer == scorer]
        if not mine:
            continue
        out.append(f"## {SCORER_TITLES[scorer]}\n")
        settings = sorted({Setting.parse(c.setting) for _, c in mine}, key=lambda s: s.sort_key)
        for shots in sorted({s.shots for s in settings}):
            out.append(_block(shots, [s for s in settings if s.shots == shots], mine, runs, scorer))
    notes = [
        f"- {md(model)}: {md(c.task)} / {md(c.setting)} / {md(c.scorer)}: {c.errors} error(s), {c.missing} missing"
        for model, c in cells
        if c.task != AVERAGE and (c.errors or c.missing)
    ]
    if notes:
        out.append("Requests without a score (left out of the accuracy denominators):\n" + "\n".join(notes) + "\n")
    return "\n".join(out)


# Up to this many settings per shot count, a block has the papers' layout (a column per task and
# setting); beyond it (strategies, orders, shortcut checks), a row per model and setting.
WIDE_SETTINGS = 3


def _block(shots: int, settings: list[Setting], cells, runs, scorer: str) -> str:
    tasks = [t for t in TASKS if any(c.task == t for _, c in cells)]
    tasks += sorted({c.task for _, c in cells} - set(TASKS) - {AVERAGE})
    title = "Zero-shot" if shots == 0 else f"{shots}-shot"
    if len(settings) > WIDE_SETTINGS:  # a row per model and setting, a column per task
        head = ["Model", "Setting"] + [md(TASK_HEADERS.get(t, t)) for t in tasks + [AVERAGE]]
        rows = [(m, [md(m), md(s.name)], [(t, s) for t in tasks + [AVERAGE]]) for m, _ in runs for s in settings]
    else:  # the papers' layout: a row per model, a column per task and setting
        columns = [(t, s) for t in tasks + [AVERAGE] for s in settings]
        head = ["Model"] + [
            md(f"{TASK_HEADERS.get(t, t)} {_short(s)}" if len(settings) > 1 else TASK_HEADERS.get(t, t))
            for t, s in columns
        ]
        rows = [(m, [md(m)], columns) for m, _ in runs]
    lines = [f"### {title}\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    index = {(m, c.task, c.setting): c for m, c in cells}

    def row(model: str, labels: list[str], columns: list, field: str) -> str:
        values = [_fmt(getattr(index.get((model, t, s.name)), field, math.nan)) for t, s in columns]
        return "| " + " | ".join(labels + values) + " |"

    for model, labels, columns in rows:
        lines.append(row(model, labels, columns, "accuracy"))
        if scorer == "generate":
            lines.append(row(model, [f"{labels[0]} · unparsed %", *labels[1:]], columns, "unparsed_rate"))
    return "\n".join(lines) + "\n"


def write_csv(runs: list[tuple[str, list[CellMetrics]]], path: Path) -> None:
    fields = ["model"] + list(CellMetrics.__dataclass_fields__)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for model, cells in runs:
            for c in cells:
                writer.writerow({"model": model, **asdict(c)})
