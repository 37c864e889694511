"""CLBench-V diagnostics over run folders: judge comparison, context complexity, failure taxonomy.

Glue between stored runs (``results.jsonl``, ``requests.jsonl``) and the pure analyses in
`agreement`, `complexity` and `failures`; each function returns Markdown for the terminal and
writes its files where asked, except the complexity report, written by `mmctx.reporting.complexity`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from mmctx.jsonl import read_jsonl
from mmctx.models.base import Backend
from mmctx.run.manifest import read_manifest

JUDGED_EVALUATORS = ("semantic", "mmlongbench", "rubric", "conclusions")
_NOT_ANSWERED = ("invalid_sample", "error")


def _fmt(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "judge"


def judge_comparison(run_dir: Path, bench, judges: list[Backend], out: Path, extractor: Backend | None = None) -> str:
    """Re-judge a run's stored predictions with each judge; Table 4 (macro per judge) and agreement.

    Only items whose evaluator uses a judge are compared (the paper's "datasets requiring LLM
    judging"). Macro scores count every such item (failures as 0, as the tables do); agreement
    (κ, α) is computed only over items each judge actually decided by a call — not items settled
    without one (an exact match, an empty answer) nor ones that ended ``judge_error`` — so a
    judge that fails is not counted as agreeing. Pass the run's extractor so free-form items
    are extracted as they were in the run. Each judge's verdicts go to ``OUT/<judge>/results.jsonl``;
    its calls are cached in the run's ``judges.sqlite`` like any judge's.
    """
    from mmctx.analysis.agreement import judge_agreement, macro_by_dataset
    from mmctx.scoring.context import probe_all, score_context_run

    if len(judges) < 1:
        raise ValueError("give at least one --judge")
    names = [j.info.name for j in judges]
    if len(set(names)) != len(names):
        raise ValueError(f"judges must have distinct names, got {names}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    scores: dict[str, dict[str, float]] = {}
    datasets: dict[str, str] = {}
    failed: dict[str, int] = {}
    table_rows = []
    for judge in judges:
        probe_all(judge, None)
        name = judge.info.name
        folder = out / _slug(name)
        folder.mkdir(parents=True, exist_ok=True)
        rows = score_context_run(run_dir, bench, judge=judge, extractor=extractor, out=folder / "results.jsonl")
        judged = [r for r in rows if r["evaluator"] in JUDGED_EVALUATORS]
        scores[name] = {r["id"]: r["score"] for r in judged if r["outcome"] == "scored" and "judge_key" in r["detail"]}
        failed[name] = sum(1 for r in judged if r["outcome"] == "judge_error")
        datasets.update({r["id"]: r["subset"] for r in judged})
        table_rows += [(name, r["subset"], r["score"]) for r in judged]
    if not table_rows:
        raise ValueError(f"{run_dir} has no items scored by a judge ({', '.join(JUDGED_EVALUATORS)})")
    macro = macro_by_dataset(table_rows)
    agreement = judge_agreement(scores, datasets)
    lines = [
        "| Judge | " + " | ".join(macro.datasets) + " | Macro | decided by a call | judge_error |",
        "|---" * (len(macro.datasets) + 4) + "|",
    ]
    for j in macro.judges:
        cells = [_fmt(macro.per_dataset[j].get(d)) for d in macro.datasets]
        lines.append(f"| {j} | " + " | ".join(cells) + f" | {_fmt(macro.macro[j])} | {len(scores[j])} | {failed[j]} |")
    lines += ["", f"Items decided by a call of every judge (agreement is computed on these): {agreement.shared}", ""]
    if agreement.pairs:
        lines += ["| Judge A | Judge B | n | agreement | Cohen's κ |", "|---|---|---|---|---|"]
        for (a, b), p in agreement.pairs.items():
            lines.append(f"| {a} | {b} | {p.n} | {_fmt(p.agreement)} | {_fmt(p.kappa)} |")
        lines += ["", f"Krippendorff's α ({agreement.alpha_level}): {_fmt(agreement.alpha)}"]
    text = "\n".join(lines)
    (out / "judges.md").write_text(text + "\n")
    payload = {
        "judges": [j.info.__dict__ for j in judges],
        "macro": macro.macro,
        "decided_by_call": {j: len(v) for j, v in scores.items()},
        "judge_errors": failed,
        "shared": agreement.shared,
        "per_dataset": macro.per_dataset,
        "kappa": {f"{a} vs {b}": p.kappa for (a, b), p in agreement.pairs.items()},
        "alpha": agreement.alpha,
        "alpha_level": agreement.alpha_level,
    }
    (out / "judges.json").write_text(json.dumps(payload, indent=2, default=str, allow_nan=True) + "\n")
    return text


def complexity_runs(run_dirs: list[Path], tokenizer: str) -> tuple[str, dict[str, list]]:
    """``(tokenizer name, {model: ComplexityRow list})`` for scored run folders; a model met twice
    is named with its folder. `mmctx.reporting.complexity` formats and writes them."""
    from mmctx.analysis.complexity import complexity_rows, load_tokenizer

    name, count = load_tokenizer(tokenizer)
    runs = {}
    for run_dir in run_dirs:
        model = read_manifest(run_dir).model_name
        # Items never sent (invalid) or whose call failed say nothing about how context length
        # affects answers; a context overflow does, and stays.
        results = [r for r in read_jsonl(Path(run_dir) / "results.jsonl") if r["outcome"] not in _NOT_ANSWERED]
        runs[model if model not in runs else f"{model} ({Path(run_dir).name})"] = complexity_rows(
            results, read_jsonl(Path(run_dir) / "requests.jsonl"), count, name
        )
    return name, runs


def failure_report(run_dir: Path, tags: Path | None, template: Path | None, judge: Backend | None) -> str:
    """Failure-type counts per level: from a hand-labelled CSV, or proposed by a judge model."""
    from mmctx.analysis.failures import (
        FailureTagger,
        counts_by_level,
        failed_rows,
        failure_table_markdown,
        read_tags_csv,
        write_tag_template,
    )

    rows = read_jsonl(Path(run_dir) / "results.jsonl")
    if template:
        path = write_tag_template(rows, template)
        if not tags and judge is None:
            return f"wrote {len(failed_rows(rows))} failed items to label → {path}"
    if tags:
        found = read_tags_csv(tags)
        source = f"hand tags from {tags}"
    elif judge is not None:
        found = _proposed_tags(run_dir, rows, judge, FailureTagger.from_results(rows))
        source = f"tags proposed by {judge.info.name} (an inference from the answer; check by hand)"
    else:
        raise ValueError("give --tags CSV, --judge MODEL, or --template OUT.csv")
    return f"{source}\n\n{failure_table_markdown(counts_by_level(rows, found))}"


def _proposed_tags(run_dir: Path, rows: list[dict], judge: Backend, tagger) -> dict[str, str]:
    from mmctx.analysis.failures import failed_rows
    from mmctx.data.clbench.loader import load_clbench
    from mmctx.models.store import ResponseStore, backend_secrets
    from mmctx.run.files import JUDGE_STORE
    from mmctx.scoring.context import probe_all
    from mmctx.scoring.judging import JudgeRunner

    probe_all(judge, None)
    by_id = {q.id: q for q in load_clbench(read_manifest(run_dir).source).queries}
    failed = [r for r in failed_rows(rows) if r["id"] in by_id]
    with ResponseStore(Path(run_dir) / JUDGE_STORE, secrets=backend_secrets(judge)) as store:
        verdicts = JudgeRunner(judge, store).judge(tagger, [(by_id[r["id"]], r.get("prediction", "")) for r in failed])
    return {r["id"]: v.detail["tag"] for r, v in zip(failed, verdicts) if v.outcome == "scored"}
