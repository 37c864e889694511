"""`write_report`, the one call behind ``mmctx report --out``: every table, CSV, LaTeX and figure.

The tables come from `report.summary` and `report.tables`, the LaTeX from `report.latex`, the
figures from `report.paper_figures`; this module is the only one that imports all of them, so
none of them imports another's writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mmctx.analysis.blind import accuracy_without_blind, blind_shares
from mmctx.analysis.cot_failures import cot_judgement_counts, cot_tag_counts
from mmctx.reporting.blind_tables import accuracy_without_rows, blind_markdown, blind_share_rows
from mmctx.reporting.cot_tables import (
    cot_judgements_markdown,
    cot_judgements_rows,
    cot_tags_markdown,
    cot_tags_rows,
)
from mmctx.reporting.escaping import markdown_text as md
from mmctx.reporting.summary import (
    ModelResults,
    _write_csv,
    comparison_csv_rows,
    comparison_markdown,
    comparison_rows,
    difficulty_counts,
    difficulty_markdown,
    difficulty_rows,
    reliability_rows,
    table1_markdown,
    table1_rows,
    uncertainty,
    uncertainty_markdown,
    uncertainty_rows,
)
from mmctx.run.settings import SCORERS
from mmctx.scoring import stats
from mmctx.scoring.cot_judging import CotJudgement, read_cot_judgements
from mmctx.scoring.results import AVERAGE, score_run, summarize


def write_report(
    runs: Sequence[tuple[str, Path]],
    out: Path,
    latex: bool = True,
    figures: bool = True,
    *,
    seed: int = 0,
) -> list[Path]:
    """Score each ``(model name, run folder)`` from its stored responses and write the report.

    Run folders are only read (nothing is re-written into them). Returns the written paths.
    """
    judged = [(model, read_cot_judgements(Path(path))) for model, path in runs]
    return write_report_results(
        [(model, score_run(Path(path))) for model, path in runs], out, latex, figures, seed=seed, cot_judgements=judged
    )


def write_report_results(
    runs: Sequence[ModelResults],
    out: Path,
    latex: bool = True,
    figures: bool = True,
    *,
    seed: int = 0,
    cot_judgements: Sequence[tuple[str, Sequence[CotJudgement]]] = (),
    extra_sections: Sequence[str] = (),
) -> list[Path]:
    """`write_report` from already scored results, one ``(model name, results)`` per model, and
    any judge's readings of their CoT reasoning (``(model name, judgements)``, `mmctx.scoring.cot_judging`).
    ``extra_sections``: Markdown sections appended to ``report.md`` as they are (empty ones skipped).

    Files (in ``out``):

    - ``report.md``: Table 1 columns, the comparison table, Table 4/5 layout, CoT failure tags,
      uncertainty, difficulty;
    - ``metrics.csv`` (every cell), ``table1.csv``, ``comparisons.csv`` (one row per model ×
      scorer × comparison), ``comparisons_by_task.csv``, ``uncertainty.csv``, ``reliability.csv``,
      ``difficulty.csv``; ``cot_tags.csv`` (one row per model × task × CoT setting) where a run
      has CoT responses; ``cot_judgements.csv`` (one row per model × setting) where a run's CoT
      reasoning was judged; ``blind_answerable.csv`` and ``accuracy_without_blind.csv`` where a
      run has blind or blank settings (`mmctx.analysis.blind`);
    - with ``latex``: ``table1.tex``, ``table4.tex`` (generation), ``table5.tex`` (ppl);
    - with ``figures`` (PNG + PDF each): ``accuracy_generate``, ``accuracy_ppl``, ``uncertainty``,
      ``reliability``, ``difficulty_generate``, ``difficulty_ppl``, ``shots_similar`` (accuracy
      against the number of similar demos, with 3 or more) — each only where its data exists.
    """
    from mmctx.reporting.tables import markdown_tables, write_csv

    names = [model for model, _ in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"model names must be unique, got {names}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cells = [(model, summarize(list(results))) for model, results in runs]
    scorers = {c.scorer for _, cs in cells for c in cs}
    by_task = comparison_rows(runs, per_task=True, seed=seed)  # Avg. rows and per-task rows
    comparisons = [row for row in by_task if row.task == AVERAGE]
    unc = uncertainty(runs)
    diff = difficulty_counts(runs)
    cot = [(model, cot_tag_counts(results)) for model, results in runs]

    paths: list[Path] = []
    write_csv([(m, list(cs)) for m, cs in cells], out / "metrics.csv")
    paths.append(out / "metrics.csv")
    paths.append(_write_csv(out / "table1.csv", [row for s in sorted(scorers) for row in table1_rows(cells, s)]))
    paths.append(_write_csv(out / "comparisons.csv", comparison_csv_rows(comparisons)))
    paths.append(_write_csv(out / "comparisons_by_task.csv", comparison_csv_rows(by_task)))
    paths.append(_write_csv(out / "uncertainty.csv", uncertainty_rows(unc)))
    paths.append(_write_csv(out / "reliability.csv", reliability_rows(unc)))
    paths.append(_write_csv(out / "difficulty.csv", difficulty_rows(diff)))
    cot_rows = cot_tags_rows(cot)
    if cot_rows:
        paths.append(_write_csv(out / "cot_tags.csv", cot_rows))
    judged = [(model, cot_judgement_counts(js)) for model, js in cot_judgements]
    judged_rows = cot_judgements_rows(judged)
    if judged_rows:
        paths.append(_write_csv(out / "cot_judgements.csv", judged_rows))

    sections = ["# mmctx report\n", f"Models: {', '.join(md(n) for n in names)}\n"]
    for scorer in SCORERS:
        if scorer in scorers:
            sections.append(f"## Table 1 columns ({scorer}: Avg. accuracy, %)\n\n" + table1_markdown(cells, scorer))
    sections.append("## Paired comparisons\n\n" + comparison_markdown(comparisons))
    sections.append(markdown_tables([(m, list(cs)) for m, cs in cells]))
    if cot_rows:
        sections.append("## CoT failure tags\n\n" + cot_tags_markdown(cot))
    if judged_rows:
        sections.append("## CoT reasoning, as a judge reads it\n\n" + cot_judgements_markdown(judged))
    if unc:
        sections.append(
            "## Uncertainty (ppl: probability of the chosen option)\n\n" + uncertainty_markdown(uncertainty_rows(unc))
        )
    if diff:
        sections.append("## Difficulty (Figure 10)\n\n" + difficulty_markdown(diff))
    orders = [(model, o) for model, results in runs for o in stats.order_sensitivity(results)]
    if orders:
        rows = [
            {"model": m, "setting": o.setting, "scorer": o.scorer, "orders": " / ".join(o.orders) or len(o.accuracies), "n": o.n,
             "accuracies": " / ".join(f"{100 * a:.1f}" for a in o.accuracies), "spread": round(100 * o.spread, 1),
             "std": round(100 * o.std, 2), "agreement": round(100 * o.agreement, 1)}
            for m, o in orders
        ]  # fmt: skip
        paths.append(_write_csv(out / "order_sensitivity.csv", rows))
        head = "| model | setting | scorer | orders | n | accuracy per order (%) | spread | std | agreement (%) |"
        lines = [head, "|" + "---|" * 9] + [
            f"| {md(r['model'])} | {md(r['setting'])} | {md(r['scorer'])} | {r['orders']} | {r['n']} | "
            f"{r['accuracies']} | "
            f"{r['spread']} | {r['std']} | {r['agreement']} |"
            for r in rows
        ]
        sections.append("## Demo-order sensitivity\n\n" + "\n".join(lines) + "\n")
    shares = [(model, blind_shares(results)) for model, results in runs]
    if any(rows for _, rows in shares):
        accuracies = [(model, accuracy_without_blind(results)) for model, results in runs]
        paths.append(_write_csv(out / "blind_answerable.csv", blind_share_rows(shares)))
        paths.append(_write_csv(out / "accuracy_without_blind.csv", accuracy_without_rows(accuracies)))
        sections.append(blind_markdown(shares, accuracies))
    sections += [section for section in extra_sections if section]
    (out / "report.md").write_text("\n".join(sections), encoding="utf-8")
    paths.append(out / "report.md")

    if latex:
        from mmctx.reporting import latex as tex

        (out / "table1.tex").write_text(tex.table1_latex(cells), encoding="utf-8")
        paths.append(out / "table1.tex")
        for scorer, name in (("generate", "table4.tex"), ("ppl", "table5.tex")):
            if scorer in scorers:
                (out / name).write_text(tex.accuracy_table_latex(cells, scorer), encoding="utf-8")
                paths.append(out / name)

    if figures:
        from mmctx.reporting import paper_figures as fig

        for scorer in SCORERS:
            if scorer in scorers:
                paths += fig.accuracy_bars(cells, scorer, out / f"accuracy_{scorer}")
            mine = [d for d in diff if d.scorer == scorer]
            if mine:
                paths += fig.difficulty_bars(mine, out / f"difficulty_{scorer}")
        paths += fig.shots_curve([(m, list(cs)) for m, cs in cells], out / "shots_similar")
        if unc:
            paths += fig.uncertainty_violins([(m, splits) for m, splits, _ in unc], out / "uncertainty")
            paths += fig.reliability_diagrams([(m, diagrams) for m, _, diagrams in unc], out / "reliability")
    return paths
