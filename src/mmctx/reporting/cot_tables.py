"""The CoT tables: failure tags per model, task and CoT setting; a judge's readings of the reasoning.

Markdown cells read ``count (share %)`` of the setting's tagged CoT responses; a response may
carry several tags, so a row's tags can add up to more than its responses. The CSV holds the
counts (one row per model × task × setting, one column per tag). Names are written with
`markdown_text` in the Markdown and as they are in the CSV.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from mmctx.analysis.cot_failures import CotJudgementCounts, CotTagCounts
from mmctx.reporting.escaping import markdown_text as md
from mmctx.scoring.cot_tags import cot_tag_descriptions

ModelCotCounts = tuple[str, Sequence[CotTagCounts]]
ModelJudgementCounts = tuple[str, Sequence[CotJudgementCounts]]


def _cell(count: int, row: CotTagCounts) -> str:
    return f"{count} ({100 * row.share(count):.0f}%)" if row.responses else "–"


def _tag_names(runs: Sequence[ModelCotCounts]) -> list[str]:
    return list(dict.fromkeys(tag for _, rows in runs for row in rows for tag in row.tags))


def cot_tags_markdown(runs: Sequence[ModelCotCounts]) -> str:
    """The table and a legend of the tags in it; "" when no run has a tagged CoT response."""
    tags = _tag_names(runs)
    if not tags:
        return ""
    head = ["Model", "Task", "Setting", "CoT responses", "no tag"] + [md(t) for t in tags]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, rows in runs:
        for row in rows:
            cells = [md(model), md(row.task), md(row.setting), str(row.responses), _cell(row.no_tag, row)]
            cells += [_cell(row.tags.get(t, 0), row) for t in tags]
            lines.append("| " + " | ".join(cells) + " |")
    described = cot_tag_descriptions()
    legend = [f"- {md(t)}: {md(described[t])}" if t in described else f"- {md(t)}" for t in tags]
    note = "Share of the row's CoT responses; one response can carry several tags."
    return "\n".join(lines) + "\n\n" + note + "\n\n" + "\n".join(legend) + "\n"


def cot_tags_rows(runs: Sequence[ModelCotCounts]) -> list[dict]:
    """One CSV row per model × task × setting: the counts, one column per tag."""
    tags = _tag_names(runs)
    return [
        {"model": model, "task": row.task, "setting": row.setting, "responses": row.responses, "no_tag": row.no_tag}
        | {t: row.tags.get(t, 0) for t in tags}
        for model, rows in runs
        for row in rows
    ]


_JUDGED = (
    ("reasoning correct", "reasoning_correct"),
    ("right reasoning, wrong answer", "right_reasoning_wrong_answer"),
    ("wrong reasoning, right answer", "wrong_reasoning_right_answer"),
)


def cot_judgements_markdown(runs: Sequence[ModelJudgementCounts]) -> str:
    """Per model and setting: responses judged, judge errors, and each reading as ``count (share %)``."""
    if not any(rows for _, rows in runs):
        return ""
    head = ["Model", "Setting", "judged", "judge errors"] + [title for title, _ in _JUDGED]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, rows in runs:
        for row in rows:
            cells = [md(model), md(row.setting), str(row.judged), str(row.judge_errors)]
            cells += [
                f"{getattr(row, key)} ({100 * row.share(getattr(row, key)):.0f}%)" if row.judged else "–"
                for _, key in _JUDGED
            ]
            lines.append("| " + " | ".join(cells) + " |")
    note = "Shares of the judged responses; a wrong answer includes an unparsed one."
    return "\n".join(lines) + "\n\n" + note + "\n"


def cot_judgements_rows(runs: Sequence[ModelJudgementCounts]) -> list[dict]:
    return [{"model": model} | asdict(row) for model, rows in runs for row in rows]
