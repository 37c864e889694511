"""The public Python API: `evaluate`, `score`, `report`, `view`, `judge_cot`. The CLI is a layer over these.

    import mmctx

    result = mmctx.evaluate("shapes-world", model="builtin:shapes-vlm", out="runs/shapes")
    print(result.table())

``task`` is a `Task`, a registered task name (``mmctx.tasks.task_names()``), a task file
(``my_task.py`` or ``my_task.py@name``) or a path: a benchmark folder (few-shot), a ``.jsonl`` of
CLBench-V items or a folder of them (context learning; an item is recognised by its
``evaluator``/``blocks``/``answer_type`` fields), or a ``.jsonl`` of plain multiple-choice items
(`mmctx.tasks.jsonl`). ``model`` is a model spec (`mmctx.models.load_backend`) or a `Backend`
already loaded. Every run folder resumes: called again on the same folder, `evaluate` sends only
what is not stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmctx.models import DEFAULT_MODEL
from mmctx.models.base import Backend
from mmctx.prompts.presets import Preset
from mmctx.run.manifest import RunManifest, read_manifest
from mmctx.run.plan import GenerationLimits
from mmctx.tasks import Task, TaskKind, get_task, task_names

if TYPE_CHECKING:
    from mmctx.curate.drop_queries import QueryDropOutcome
    from mmctx.scoring.cot_judging import CotJudgement

# Options of the HF backend that `mmctx.tasks.fewshot.evaluate` takes by name; any other backend
# option (base_url, max_concurrency, score_mode, …) goes to the backend as it is.
_NAMED_OPTIONS = ("device", "dtype", "batch_size", "revision", "trust_remote_code", "adapter", "quantization")


@dataclass(frozen=True)
class ContextOptions:
    """How a context-learning (CLBench-V) task is asked; recorded in the run's manifest."""

    system_prompt: str | None = None  # None: CLBench-V's default system prompt
    max_new_tokens: int = 1024
    repair: bool = False  # ask once more, in the required format, when an answer cannot be parsed
    truncation: str = "none"  # none | head | middle (needs ``tokenizer``)
    truncation_budget: int | None = None
    tokenizer: str | None = None


@dataclass
class EvalResult:
    """One scored run: where it lies, what it ran, and its scores.

    ``results`` are per sample (`SampleResult` for few-shot, result rows for context learning);
    ``scores`` are the cells of the few-shot tables (`CellMetrics`) or CLBench-V's aggregate.
    """

    task: str
    kind: TaskKind
    run_dir: Path
    model: str
    results: list[Any]
    scores: Any
    stats: Any = None
    manifest: RunManifest | None = None

    def table(self) -> str:
        """The papers' tables for this run, in Markdown (Tables 4/5, or CLBench-V's 2 and 3)."""
        if self.kind == "context":
            from mmctx.reporting.clbench_tables import table2_markdown, table3_markdown

            scores = {self.model: self.scores}
            return table2_markdown(scores) + "\n\n" + table3_markdown(scores)
        from mmctx.reporting.tables import markdown_tables

        return markdown_tables([(self.model, self.scores)])


def resolve_task(task: Task | str | Path, **options) -> Task:
    """The `Task` that ``task`` names (see the module docstring)."""
    if isinstance(task, Task):
        if options:
            raise TypeError(f"task options {sorted(options)} apply to a task name, not a Task")
        return task
    text = str(task)
    if text in task_names() or text.partition("@")[0].endswith(".py"):
        return get_task(text, **options)
    path = Path(text)
    if "path" in options:
        raise TypeError(f"{text!r} is the task's path already; path is not a task option here")
    if path.is_dir():
        kind = "fewmmbench" if (path / "benchmark.json").exists() else "clbench-v"
        return get_task(kind, path=path, **options)
    if path.is_file() and path.suffix == ".jsonl":
        return get_task("clbench-v" if _looks_like_context_items(path) else "jsonl", path=path, **options)
    raise FileNotFoundError(f"{text!r} is neither a task ({task_names()}) nor a benchmark folder, .jsonl or .py file")


def _looks_like_context_items(path: Path) -> bool:
    from mmctx.jsonl import iter_jsonl

    for _, record in iter_jsonl(path):
        return bool({"evaluator", "blocks", "answer_type", "gold"} & set(record))
    return False


def evaluate(
    task: Task | str | Path,
    model: str | Backend = DEFAULT_MODEL,
    out: str | Path | None = None,
    *,
    grid: Sequence[str] | None = None,
    scorers: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    limits: GenerationLimits | None = None,
    preset: str | Path | Preset | None = None,
    demo_orders: int = 1,
    blind_orders: int = 3,
    context: ContextOptions = ContextOptions(),
    options: dict[str, Any] | None = None,
    judge: str | Backend | None = None,
    extractor: str | Backend | None = None,
    retry_errors: bool = False,
    shard: str | None = None,
    ray: Any = None,
    progress: bool = False,
    task_options: dict[str, Any] | None = None,
    max_prompt_tokens: int | str | None = None,
) -> EvalResult:
    """Run ``model`` on ``task`` into the run folder ``out`` (resumed if it holds the same run) and score it.

    Few-shot tasks: ``grid`` (setting names, default the task's grid), ``scorers`` (``generate``,
    ``ppl``), ``preset`` (a built-in name, a preset file or a `Preset`, instead of the task's), ``demo_orders``,
    ``blind_orders`` (option orders per ``-blind``/``-blind-all``/``-blank`` setting), ``limits``, ``shard`` and ``ray`` (`mmctx.run.distributed.RayOptions`),
    ``max_prompt_tokens`` (a prompt budget the model counts, images included: demos dropped from
    the least similar end until a prompt fits, recorded per request; a number of tokens or
    ``"window"``, the model's window less the longest generation limit; `mmctx.run.budget`).
    Context tasks: ``context``, ``judge`` and ``extractor`` (model specs or backends). Both:
    ``tasks`` (sub-tasks or subsets to keep), ``limit`` (few-shot: the first N queries of each
    sub-task; context: the first N items of the suite), ``options`` (the
    backend's: device, dtype, batch_size, revision, trust_remote_code, adapter, quantization,
    base_url, …), ``retry_errors``. ``out`` defaults to ``runs/<task>/<model>``.
    """
    from mmctx.run.budget import check_max_prompt_tokens
    from mmctx.run.runner import run_lock

    for name, value in (("grid", grid), ("scorers", scorers), ("tasks", tasks)):
        if isinstance(value, str):  # a string is a sequence of characters: "0-shot,8-similar" would be 14 settings
            raise TypeError(f"{name} is a list of names, e.g. {name}={value.split(',')!r}, not the string {value!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit is a whole number of items, at least 1, or None for all (got {limit!r})")
    check_max_prompt_tokens(max_prompt_tokens)
    chosen = resolve_task(task, **(task_options or {}))
    _refuse_other_kinds_arguments(chosen, grid=grid, scorers=scorers, preset=preset, shard=shard, ray=ray,
                                  limits=limits, seed=seed, demo_orders=demo_orders, blind_orders=blind_orders, judge=judge,
                                  extractor=extractor, context=context, max_prompt_tokens=max_prompt_tokens)  # fmt: skip
    if preset is not None:
        chosen = replace(chosen, preset=str(preset) if isinstance(preset, Path) else preset)
    spec = model.info.name if isinstance(model, Backend) else str(model)
    run_dir = Path(out) if out is not None else Path("runs") / _safe(chosen.name) / _safe(spec)
    fresh = not run_dir.exists()
    try:
        with run_lock(run_dir):  # held while the task writes its samples into the run folder, too
            return _evaluate_in(chosen, run_dir, model, grid, scorers, tasks, limit, seed, limits, preset,
                                (demo_orders, blind_orders), context, options, judge, extractor, retry_errors, shard, ray, progress,
                                max_prompt_tokens)  # fmt: skip
    except Exception:
        if fresh and not (run_dir / "manifest.json").exists():
            _remove_unused(run_dir)
        raise


_FEWSHOT_ONLY = {"grid": None, "scorers": None, "preset": None, "shard": None, "ray": None, "limits": None,
                 "seed": 0, "demo_orders": 1, "blind_orders": 3, "max_prompt_tokens": None}  # fmt: skip
_CONTEXT_ONLY = {"judge": None, "extractor": None, "context": ContextOptions()}


def _refuse_other_kinds_arguments(chosen: Task, **given: Any) -> None:
    """An argument of the other kind of task is refused, never silently ignored."""
    foreign = _FEWSHOT_ONLY if chosen.kind == "context" else _CONTEXT_ONLY
    named = [name for name, default in foreign.items() if given[name] is not None and given[name] != default]
    if named:
        kind = "a context-learning task" if chosen.kind == "context" else "a few-shot task"
        other = "few-shot" if chosen.kind == "context" else "context-learning"
        raise ValueError(f"{chosen.name} is {kind}; these are for {other} tasks only: {', '.join(named)}")


def _prepare(chosen: Task, run_dir: Path) -> Path:
    """The task's data, written under ``RUN/dataset``.

    A folder that already holds a run keeps its data: the task writes its data again beside it
    and the two must be the same, byte for byte, or the run is refused before anything in the
    folder changes (edited items, other task options). Data a task reads in place (a benchmark
    folder, a suite) is the run's to check by its fingerprint.
    """
    import shutil

    from mmctx.run.files import MANIFEST
    from mmctx.run.runner import RunError

    target = run_dir / "dataset"
    if not (run_dir / MANIFEST).exists() or not target.exists():
        return chosen.prepare(target)
    staged = run_dir / "dataset.check"
    shutil.rmtree(staged, ignore_errors=True)
    try:
        source = chosen.prepare(staged)
        inside = source.is_relative_to(staged)
        if inside and _tree_digest(source) != _tree_digest(target / source.relative_to(staged)):
            raise RunError(
                f"{run_dir} holds a run on other data: {chosen.name} writes different items now (its files or "
                "its task options changed since); use another out folder"
            )
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return target / source.relative_to(staged) if inside else source


def _tree_digest(folder: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _remove_unused(run_dir: Path) -> None:
    """Remove a run folder this call created and that holds no run (bad input refused before any
    request): a refused run leaves nothing behind. (A second process starting on the same new
    folder in the same instant could lose its lock file; it would hold the lock all the same.)"""
    import shutil

    shutil.rmtree(run_dir, ignore_errors=True)


def _evaluate_in(
    chosen: Task, run_dir: Path, model, grid, scorers, tasks, limit, seed, limits, preset, orders, context,
    options, judge, extractor, retry_errors, shard, ray, progress, max_prompt_tokens=None,
) -> EvalResult:  # fmt: skip
    source = _prepare(chosen, run_dir)
    if chosen.kind == "context":
        return _evaluate_context(chosen, source, model, run_dir, tasks, limit, context, options, judge,
                                 extractor, retry_errors, progress)  # fmt: skip
    return _evaluate_fewshot(chosen, source, model, run_dir, grid, scorers, tasks, limit, seed, limits,
                             orders, options, retry_errors, shard, ray, progress, max_prompt_tokens)  # fmt: skip


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("._") or "run"


def _evaluate_fewshot(
    chosen: Task, source: Path, model, run_dir: Path, grid, scorers, tasks, limit, seed, limits, orders,
    options, retry_errors, shard, ray, progress, max_prompt_tokens=None,
) -> EvalResult:  # fmt: skip
    from mmctx.tasks.fewshot import evaluate as run_evaluate

    opts = dict(options or {})
    named = {k: opts.pop(k) for k in _NAMED_OPTIONS if k in opts}
    extra = {}
    if isinstance(model, Backend):
        extra["backend_factory"] = lambda *a, **k: model
    outcome = run_evaluate(
        source,
        model.info.name if isinstance(model, Backend) else model,
        run_dir,
        settings=",".join(grid if grid is not None else chosen.grid),
        scorers=",".join(scorers if scorers is not None else chosen.scorers),
        preset=chosen.preset,
        seed=seed,
        limits=limits or chosen.limits,
        limit=limit,
        tasks=list(tasks) if tasks else None,
        backend_options=opts,
        retry_errors=retry_errors,
        demo_orders=orders[0],  # orders: (demo orders, option orders of blind settings)
        blind_orders=orders[1],
        shard=shard,
        show_progress=progress,
        ray=ray,
        max_prompt_tokens=max_prompt_tokens,
        **named,
        **extra,
    )
    manifest = read_manifest(run_dir)
    return EvalResult(chosen.name, "fewshot", run_dir, manifest.model_name, outcome.results, outcome.cells,
                      outcome.stats, manifest)  # fmt: skip


def role_backend(spec: str | Backend | None) -> Backend | None:
    """A judge or extractor, deterministic (temperature 0 where the API takes one)."""
    if spec is None or isinstance(spec, Backend):
        return spec
    from mmctx.models import load_backend

    return load_backend(spec, **({"temperature": 0.0} if spec.startswith("openai:") else {}))


def _evaluate_context(
    chosen: Task, source: Path, model, run_dir: Path, tasks, limit, context: ContextOptions, options, judge, extractor,
    retry_errors, progress,
) -> EvalResult:  # fmt: skip
    from mmctx.data.clbench.loader import load_clbench
    from mmctx.models import load_backend, sized_by_plan
    from mmctx.prompts.context import DEFAULT_SYSTEM
    from mmctx.tasks.context import ContextConfig, run_context

    bench = load_clbench(source)
    count, tok_name = None, None
    if context.truncation != "none":
        from mmctx.analysis.complexity import load_tokenizer

        if not context.tokenizer:
            raise ValueError("truncation needs a tokenizer (a tokenizer path or id, or 'whitespace')")
        tok_name, count = load_tokenizer(context.tokenizer)
    opts = dict(options or {})
    config = ContextConfig(
        suite=str(source),
        suite_name=bench.name,
        suite_sha256=bench.fingerprint(),
        system_prompt=DEFAULT_SYSTEM if context.system_prompt is None else context.system_prompt,
        max_new_tokens=context.max_new_tokens,
        repair=context.repair,
        truncation=context.truncation,
        truncation_budget=context.truncation_budget,
        tokenizer=tok_name,
        subsets=list(tasks) if tasks else None,
        limit=limit,
        batch_size=opts.get("batch_size", 8),
    )
    if isinstance(model, Backend):
        backend = model
    else:
        if sized_by_plan(model):
            opts.setdefault("max_images", max((len(q.context_images) for q in bench.queries), default=0))
        backend = load_backend(model, **opts)
    judge_backend = (
        backend if judge is not None and judge == model else role_backend(judge)
    )  # a model judging itself loads once
    stats = run_context(bench, backend, run_dir, config, judge=judge_backend, extractor=role_backend(extractor),
                        count_tokens=count, show_progress=progress, retry_errors=retry_errors)  # fmt: skip
    return _context_result(chosen.name, run_dir, stats)


def _context_result(task: str, run_dir: Path, stats: Any = None) -> EvalResult:
    from mmctx.jsonl import read_jsonl
    from mmctx.scoring.levels import aggregate

    rows = read_jsonl(run_dir / "results.jsonl")
    manifest = read_manifest(run_dir)
    return EvalResult(task, "context", run_dir, manifest.model_name, rows, aggregate(rows), stats, manifest)


def score(
    run_dir: str | Path,
    *,
    judge: str | Backend | None = None,
    extractor: str | Backend | None = None,
    suite: str | Path | None = None,
) -> EvalResult:
    """Score a run folder afresh from its stored responses and write its results (no model needed).

    Context runs read their items from ``suite`` (default: the suite the manifest names) and
    their verdicts from the run's judge cache: without ``judge``/``extractor`` the ones the run
    recorded answer from that cache only (a verdict it lacks is that item's judge error); with
    them (model specs or backends, as in `evaluate`) what the cache lacks is asked.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    name = manifest.source_name
    if manifest.kind == "context":
        from mmctx.data.clbench.loader import load_clbench
        from mmctx.scoring.context import check_judges_for_run, probe_all, score_context_run
        from mmctx.scoring.judging import RecordedModel

        bench = load_clbench(Path(suite) if suite is not None else manifest.source)
        # Without a judge given, the one the run recorded answers from its cache: no model loads.
        judge_b = role_backend(judge) if judge is not None else _recorded(manifest, "judge")
        extractor_b = role_backend(extractor) if extractor is not None else _recorded(manifest, "extractor")
        check_judges_for_run(run_dir, bench, judge_b)
        probe_all(*(None if isinstance(b, RecordedModel) else b for b in (judge_b, extractor_b)))
        score_context_run(run_dir, bench, judge=judge_b, extractor=extractor_b)
        return _context_result(name, run_dir)
    from mmctx.scoring.results import rescore

    results, cells = rescore(run_dir)
    return EvalResult(name, "fewshot", run_dir, manifest.model_name, results, cells, None, manifest)


def _recorded(manifest: RunManifest, role: str) -> Backend | None:
    """The judge or extractor ``manifest`` records, answering from the run's cache only."""
    from mmctx.models.base import ModelInfo
    from mmctx.scoring.judging import RecordedModel

    info = manifest.fields.get(role)
    return RecordedModel(ModelInfo(**info)) if isinstance(info, dict) else None


def _named_runs(run_dirs: Sequence[str | Path]) -> list[tuple[str, Path, RunManifest]]:
    """(display name, folder, manifest) per run; two runs of one model get their folder's name."""
    out, seen = [], set()
    for run_dir in map(Path, run_dirs):
        manifest = read_manifest(run_dir)
        name = manifest.model_name
        if name in seen:
            name = f"{name} ({run_dir.name})"
        if name in seen:
            raise ValueError(f"two runs named {name!r}; give the run folders distinct names")
        seen.add(name)
        out.append((name, run_dir, manifest))
    return out


def report(
    run_dirs: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    latex: bool = True,
    figures: bool = True,
    seed: int = 0,
    csv: str | Path | None = None,
    annotation: str | Path | None = None,
) -> str:
    """The papers' tables for one or more runs (one per model), as Markdown; with ``out``, the full report.

    Run folders are only read: few-shot results are scored afresh in memory (re-scoring into the
    folder is `score`). Few-shot and context runs are reported apart. ``csv``: also every few-shot
    metric as one CSV file (a context report writes its CSVs into ``out``). ``annotation``: an
    `mmctx annotate export` folder, whose sample (and, once imported, rater agreement) the
    few-shot report shows as "Human validation of demonstrations".
    """
    runs = _named_runs(run_dirs)
    kinds = {m.kind for _, _, m in runs}
    if len(kinds) > 1:
        raise ValueError("these runs mix few-shot and context-learning (CLBench-V) runs; report them separately")
    if kinds == {"context"}:
        from mmctx.jsonl import read_jsonl
        from mmctx.reporting.clbench_tables import table2_markdown, table3_markdown, write_clbench_report
        from mmctx.scoring.levels import aggregate

        scores = {}
        for name, run_dir, _ in runs:
            if not (run_dir / "results.jsonl").exists():
                raise FileNotFoundError(f"{run_dir} has no results.jsonl; score it first (mmctx score)")
            scores[name] = aggregate(read_jsonl(run_dir / "results.jsonl"))
        if out is not None:
            write_clbench_report(scores, Path(out))
        return table2_markdown(scores) + "\n\n" + table3_markdown(scores)
    from mmctx.reporting.tables import markdown_tables
    from mmctx.scoring.results import score_run, summarize

    scored = [(name, score_run(run_dir)) for name, run_dir, _ in runs]
    cells = [(name, summarize(results)) for name, results in scored]
    text = markdown_tables(cells)
    from mmctx.analysis.blind import accuracy_without_blind, blind_shares
    from mmctx.reporting.blind_tables import blind_markdown

    shortcut = blind_markdown(
        [(name, blind_shares(results)) for name, results in scored],
        [(name, accuracy_without_blind(results)) for name, results in scored],
    )
    text += "\n" + shortcut if shortcut else ""
    validation = ""
    if annotation is not None:
        from mmctx.reporting.annotation_section import annotation_markdown

        validation = annotation_markdown(Path(annotation))
        text += "\n" + validation
    if csv is not None:
        from mmctx.reporting.tables import write_csv

        write_csv(cells, Path(csv))
    if out is not None:
        from mmctx.reporting.budget_table import budget_markdown, budget_rows
        from mmctx.reporting.folder import write_report_results
        from mmctx.scoring.cot_judging import read_cot_judgements

        judged = [(name, read_cot_judgements(run_dir)) for name, run_dir, _ in runs]
        budget = budget_markdown(budget_rows([(name, run_dir) for name, run_dir, _ in runs]))
        write_report_results(
            scored, Path(out), latex=latex, figures=figures, seed=seed, cot_judgements=judged,
            extra_sections=[budget, validation],
        )  # fmt: skip
    return text


def judge_cot(run_dir: str | Path, judge: str | Backend, *, sample: int = 50, seed: int = 0) -> list[CotJudgement]:
    """Have ``judge`` (a model spec or a `Backend`) read the reasoning of ``sample`` CoT responses
    of a few-shot run, drawn with ``seed``; returns the `CotJudgement`s.

    The judge's replies are cached in the run folder (a repeated or resumed pass asks nothing it
    has), the judgements written to ``cot_judgements.jsonl`` and the judge pinned in the manifest
    (`mmctx.scoring.cot_judging`); `report` then adds their table.
    """
    run_dir = Path(run_dir)
    if read_manifest(run_dir).kind == "context":
        raise ValueError(f"{run_dir} is a context-learning run; CoT reasoning is judged on few-shot runs")
    from mmctx.scoring.cot_judging import judge_cot_reasoning
    from mmctx.scoring.judging import JudgeUnavailable, probe

    backend = role_backend(judge)
    try:
        probe(backend)
    except JudgeUnavailable as exc:
        raise ValueError(f"the judge {backend.info.name!r} does not answer: {exc}") from None
    return judge_cot_reasoning(run_dir, backend, sample=sample, seed=seed)


def merge(shards: Sequence[str | Path], out: str | Path) -> int:
    """Combine the run folders of a sharded run (``shard="i/n"``) into ``out``; refuses shards of
    different runs. Returns the number of responses merged; `score` the merged folder next."""
    from mmctx.run.runner import merge_runs

    return merge_runs([Path(s) for s in shards], Path(out))


def view(run_dirs: Sequence[str | Path], out: str | Path, *, figures: str | Path | None = None) -> Path:
    """Write the static HTML viewer of the runs (few-shot or context) into ``out``; returns its index.html."""
    from mmctx.reporting.viewer import build_site

    return build_site([Path(r) for r in run_dirs], Path(out), figures_dir=Path(figures) if figures else None)


def drop_blind_answerable(benchmark: str | Path, run_dirs: Sequence[str | Path]) -> QueryDropOutcome:
    """Remove from ``benchmark`` the queries that some run of ``run_dirs`` answers without vision.

    Each run must be a few-shot run with ``-blind``, ``-blind-all`` or ``-blank`` settings, made on
    this benchmark or an earlier state of it (its curation log); an item counts when some blind
    check of some run answers it in every option order (`mmctx.analysis.blind`). What was dropped,
    and which runs and checks answered it, goes into the benchmark's curation log; the benchmark's
    fingerprint changes, so runs made on it before do not resume on it. Run folders are only read.
    """
    from mmctx.analysis.blind import blind_checks
    from mmctx.curate.drop_queries import drop_queries
    from mmctx.curate.log import read_log
    from mmctx.data.disk import load_benchmark
    from mmctx.run.settings import Setting
    from mmctx.scoring.results import score_run

    if not run_dirs:
        raise ValueError("name at least one blind run folder")
    root = Path(benchmark)
    known = {load_benchmark(root).fingerprint()}
    for entry in read_log(root):
        known |= {entry.get("benchmark_sha256_before"), entry.get("benchmark_sha256_after")}
    reasons: dict[str, list[dict[str, Any]]] = {}
    runs = []
    for run_dir in map(Path, run_dirs):
        manifest = read_manifest(run_dir)
        if manifest.kind != "fewshot":
            raise ValueError(f"{run_dir}: a {manifest.kind} run; only few-shot runs have blind settings")
        settings = manifest.config.get("settings") or []
        if not any(Setting.parse(s).vision != "full" for s in settings):
            raise ValueError(
                f"{run_dir} is not a blind run: none of its settings ({', '.join(settings)}) is a "
                "-blind, -blind-all or -blank setting (e.g. 0-shot-blind)"
            )
        if manifest.config.get("benchmark_sha256") not in known:
            raise ValueError(
                f"{run_dir} was run on another benchmark (benchmark_sha256 {manifest.config.get('benchmark_sha256')}),"
                f" not on {root} or an earlier state in its curation log"
            )
        runs.append(str(run_dir.resolve()))
        for check in blind_checks(score_run(run_dir)):
            for _task, query_id in sorted(check.answerable):
                reasons.setdefault(query_id, []).append(
                    {"run": str(run_dir.resolve()), "model": manifest.model_name, "setting": check.setting,
                     "scorer": check.scorer, "option_orders": check.orders}
                )  # fmt: skip
    return drop_queries(
        root,
        reasons,
        "drop_blind_answerable",
        "answered without vision in every option order by a blind run (CLBench-V rejection sampling)",
        runs=runs,
    )


__all__ = [
    "ContextOptions",
    "EvalResult",
    "drop_blind_answerable",
    "evaluate",
    "merge",
    "report",
    "resolve_task",
    "role_backend",
    "score",
    "view",
]
