"""The report's "Prompt budget" section: which prompts a run cut to fit its model, per setting.

A budgeted run (`mmctx.run.budget`) records on each request the budget, the count of the prompt
sent and the demos dropped; a ``64-similar`` cell then means "up to 64". This says how far below.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from mmctx.reporting.escaping import markdown_text as md
from mmctx.reporting.summary import setting_key
from mmctx.scoring.results import load_requests, scored_requests


def budget_rows(runs: Sequence[tuple[str, Path]]) -> list[dict]:
    """Per model, setting and scorer of a budgeted run: prompts, prompts cut, demos dropped (min–max)."""
    rows = []
    for model, run_dir in runs:
        groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for r in scored_requests(load_requests(run_dir)):
            if r.get("max_prompt_tokens") is not None:
                groups[(r["setting"], r["scorer"])].append(r)
        for (setting, scorer), requests in sorted(groups.items(), key=lambda g: (setting_key(g[0][0]), g[0][1])):
            dropped = [len(r["demos_dropped"]) for r in requests if r["demos_dropped"]]
            rows.append({
                "model": model, "setting": setting, "scorer": scorer, "budget": requests[0]["max_prompt_tokens"],
                "prompts": len(requests), "cut": len(dropped), "dropped_min": min(dropped, default=0),
                "dropped_max": max(dropped, default=0),
                "largest_prompt": max(r["prompt_tokens_counted"] for r in requests),
            })  # fmt: skip
    return rows


def budget_markdown(rows: Sequence[dict]) -> str:
    """The section, listing only the settings where some prompt was cut; empty when none was."""
    cut = [r for r in rows if r["cut"]]
    if not cut:
        return ""
    lines = [
        "## Prompt budget\n",
        "Prompts cut to fit the model (`max_prompt_tokens`), dropping their least similar demos; a setting's "
        "cells count these prompts with the demos they kept. Settings not listed were sent whole.\n",
        "| model | setting | scorer | budget (tokens) | prompts | cut | demos dropped | largest prompt sent |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    for r in cut:
        span = (
            str(r["dropped_min"]) if r["dropped_min"] == r["dropped_max"] else f"{r['dropped_min']}–{r['dropped_max']}"
        )
        lines.append(
            f"| {md(r['model'])} | {md(r['setting'])} | {md(r['scorer'])} | {r['budget']} | {r['prompts']} | "
            f"{r['cut']} | {span} | {r['largest_prompt']} |"
        )
    return "\n".join(lines) + "\n"
