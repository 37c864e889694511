"""The report's "Human validation of demonstrations" section, from an `mmctx annotate export` folder.

Before the forms come back it lists what was sent (demos per task, the annotators' forms);
once `mmctx annotate import` has written ``validation.json`` beside them, it gives the
agreement per criterion (mean rating, Fleiss' κ and Krippendorff's α with their intervals).
Nothing here is estimated: a criterion the import did not measure is not shown.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from mmctx.curate.annotation.export import EXPORT_FILE, load_export
from mmctx.reporting.annotation_report import VALIDATION_FILE
from mmctx.reporting.escaping import markdown_text as md


def _interval(estimate: dict) -> str:
    value, low, high = (estimate.get(k) for k in ("value", "low", "high"))
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if low is None or high is None:
        return f"{value:.2f}"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def annotation_markdown(export_dir: Path) -> str:
    """The section's Markdown for the export in ``export_dir`` (errors name the file)."""
    export_dir = Path(export_dir)
    export = load_export(export_dir / EXPORT_FILE)
    per_task = Counter(d.task for d in export.demos)
    lines = [
        "## Human validation of demonstrations\n",
        f"Export {md(export.export_id)}: {len(export.demos)} demos with a rationale, sampled up to "
        f"{export.per_task} per task (seed {export.seed}), each rated by {len(export.annotators)} annotators "
        f"on {', '.join(export.criteria)} (FewMMBench appendix B.3).\n",
        "| task | demos sampled |",
        "|---|---:|",
        *(f"| {md(task)} | {n} |" for task, n in sorted(per_task.items())),
        "",
    ]
    validation = export_dir / VALIDATION_FILE
    if not validation.is_file():
        forms = ", ".join(f"`{md(f.html)}`" for f in export.annotators)
        lines.append(
            f"Ratings not imported yet. Each annotator fills a form in `{md(str(export_dir))}` ({forms}); "
            f"then `mmctx annotate import {md(str(export_dir))}` measures their agreement, and the report shows it here.\n"
        )
        return "\n".join(lines)
    try:
        return "\n".join(lines + _agreement_lines(json.loads(validation.read_text(encoding="utf-8")))) + "\n"
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{validation}: not the {VALIDATION_FILE} `mmctx annotate import` writes ({exc!r})") from None


def _agreement_lines(summary: dict) -> list[str]:
    missing = ", ".join(md(a) for a in summary.get("missing_annotators") or [])
    level = {round(100 * r.get("confidence", 0.95)) for r in summary["criteria"].values()}
    ci = f"{level.pop()}% CI" if len(level) == 1 else "CI"
    lines = [
        f"Ratings from {len(summary['annotators'])} annotators on {summary['demos']} demos"
        + (f" (no form from {missing})" if missing else "")
        + ":\n",
        f"| criterion | level | mean [{ci}] | Fleiss' κ [{ci}] | Krippendorff's α [{ci}] |",
        "|---|---|---|---|---|",
    ]
    for name, record in summary["criteria"].items():
        lines.append(
            f"| {md(name)} | {md(record['level'])} | {_interval(record['mean'])} | {_interval(record['kappa'])} | "
            f"{_interval(record['alpha'])} |"
        )
    return lines
