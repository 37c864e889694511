"""The `mmctx` command line: thin commands over the packages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from mmctx.models import DEFAULT_MODEL
from mmctx.run.plan import DEMO_LIMITS

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Multimodal in-context benchmarks.")
console = Console(stderr=True)


def _fail(message: str) -> None:
    # Messages quote records like queries[id].field: escape them, or rich reads them as markup.
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def validate(
    path: Path = typer.Argument(..., help="Benchmark folder."),
    preset: str = typer.Option(
        "fewmmbench", help="Prompt preset the run will use (its option labels): a built-in name or a preset .yaml file."
    ),
) -> None:
    """Check a benchmark and print every problem found (exit 1 if any): what a run refuses, this refuses.

    Surface cues (the correct option told apart by its text alone: case, final punctuation, length)
    are printed as warnings and do not change the exit code.
    """
    from mmctx.curate.cues import find_surface_cues
    from mmctx.data.disk import load_benchmark
    from mmctx.prompts.build import preset_problems
    from mmctx.prompts.presets import get_preset

    try:
        bench = load_benchmark(path)
        chosen = get_preset(preset)
    except (OSError, ValueError, KeyError) as exc:
        _fail(str(exc))
    problems = bench.validate() + preset_problems(bench, chosen)
    for p in problems:
        print(p)
    # A cue is a warning, not a problem: the benchmark runs, but its scores may not need the image.
    cues = find_surface_cues(bench.queries) + find_surface_cues(bench.demos, key=lambda s: f"{s.task} (demos)")
    for cue in cues:
        console.print(f"[yellow]surface cue[/yellow] {escape(cue.describe())}", soft_wrap=True)
    n_demo = len(bench.demos)
    if problems:
        console.print(f"[red]{len(problems)} problem(s)[/red] in {len(bench.queries)} queries, {n_demo} demos")
        raise typer.Exit(1)
    console.print(f"[green]ok[/green]: {len(bench.queries)} queries, {n_demo} demos, tasks: {', '.join(bench.tasks)}")


@app.command()
def shapes(
    out: Path = typer.Option(..., help="Output folder."),
    per_task: int | None = typer.Option(
        None, help="Pool samples per task and format (40; with --benchmark, queries per task + 32)."
    ),
    seed: int = typer.Option(0),
    benchmark: bool = typer.Option(False, "--benchmark", help="Write a ready benchmark (queries + demos + keys)."),
    queries_per_task: int = typer.Option(10, help="With --benchmark: queries per task and format."),
) -> None:
    """Write a shapes-world pool, or a ready benchmark with --benchmark."""
    from mmctx.data import shapes as sw

    if benchmark:
        bench = sw.build_benchmark(out, queries_per_task=queries_per_task, seed=seed, pool_per_task=per_task)
        console.print(f"benchmark: {len(bench.queries)} queries, {len(bench.demos)} demos → {out}")
    else:
        from mmctx.data.disk import write_samples

        pool = sw.generate_pool(out, per_task=40 if per_task is None else per_task, seed=seed)
        write_samples(pool, Path(out) / "pool.jsonl")
        console.print(f"pool: {len(pool)} samples → {out}/pool.jsonl")


@app.command("import-fewmmbench")
def import_fewmmbench(
    source: str = typer.Argument(..., help="HF dataset id (e.g. mustafaa/FewMMBench) or local folder in that layout."),
    out: Path = typer.Option(..., help="Benchmark folder to write."),
) -> None:
    """Convert the released FewMMBench data into an mmctx benchmark folder."""
    from mmctx.data.disk import save_benchmark
    from mmctx.data.fewmmbench import load_fewmmbench

    bench = load_fewmmbench(source, cache_dir=out)
    save_benchmark(bench, out)
    console.print(f"FewMMBench: {len(bench.queries)} queries, {len(bench.demos)} demos → {out}")


@app.command()
def run(
    benchmark: Path = typer.Argument(..., help="Benchmark folder."),
    model: str = typer.Option(
        DEFAULT_MODEL, help="HF model id, local folder, or builtin:shapes-vlm|tiny-idefics3|tiny-llava."
    ),
    out: Path = typer.Option(..., help="Run folder (created, or resumed if it holds the same run)."),
    settings: str = typer.Option(
        "all", help="Comma list: 0-shot,4-random,4-similar,4-similar-cot,8-random,8-similar,8-similar-cot."
    ),
    scorers: str = typer.Option("all", help="Comma list: generate,ppl."),
    preset: str = typer.Option(
        "fewmmbench", help="Prompt preset: fewmmbench | fewmmbench-single-turn | PATH.yaml (docs/extending.md)."
    ),
    seed: int = typer.Option(0, help="Seeds option shuffling."),
    max_new_tokens: int = typer.Option(16, help="Generation limit for settings without CoT."),
    cot_max_new_tokens: int = typer.Option(512, help="Generation limit for CoT settings."),
    limit: int | None = typer.Option(None, help="Only the first N queries of each task."),
    tasks: str | None = typer.Option(None, help="Comma list of tasks to run."),
    batch_size: int = typer.Option(8, help="Prompts per generate call; options per scoring forward."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:1, …"),
    dtype: str = typer.Option("auto", help="auto (bf16/fp16 on GPU, fp32 on CPU), float32, bfloat16, float16."),
    revision: str | None = typer.Option(None, help="Model revision (branch, tag or commit) to pin."),
    trust_remote_code: bool = typer.Option(False, help="Allow the model repository's own code to run."),
    adapter: str | None = typer.Option(
        None, help="Model family adapter (default: picked by model id; see mmctx models)."
    ),
    quantization: str | None = typer.Option(None, help="8bit or 4bit (bitsandbytes, CUDA), where the family allows."),
    base_url: str | None = typer.Option(None, help="openai: models: the server's base URL (else OPENAI_BASE_URL)."),
    max_concurrency: int | None = typer.Option(None, help="openai: models: requests in flight at once (16)."),
    score_mode: str | None = typer.Option(None, help="openai: models: none or vllm_prompt_logprobs (for ppl)."),
    retry_errors: bool = typer.Option(False, help="Ask again for requests stored as errors."),
    shard: str | None = typer.Option(None, help="i/n: run only shard i of n (queries split by a hash of their id)."),
    demo_orders: int = typer.Option(1, help="Evaluate each few-shot setting in N demo orders (order sensitivity)."),
    ray: bool = typer.Option(
        False, "--ray", help="Run on Ray: one model replica per GPU, one run folder (mmctx[ray])."
    ),
    ray_address: str | None = typer.Option(
        None, help="--ray: cluster to join (default: RAY_ADDRESS, else a local one)."
    ),
    ray_workers: int | None = typer.Option(None, help="--ray: model replicas (default: one per GPU, 2 without GPUs)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Evaluate a model on a benchmark over a settings grid; resumable; scores and prints the tables."""
    from mmctx.models.hf import ModelError
    from mmctx.reporting.tables import markdown_tables
    from mmctx.run.distributed import RayOptions
    from mmctx.run.plan import GenerationLimits
    from mmctx.run.runner import RunError
    from mmctx.schema import BenchmarkError
    from mmctx.tasks.fewshot import evaluate

    try:
        outcome = evaluate(
            benchmark,
            model,
            out,
            settings=settings,
            scorers=scorers,
            preset=preset,
            seed=seed,
            limits=GenerationLimits(max_new_tokens, cot_max_new_tokens),
            limit=limit,
            tasks=tasks.split(",") if tasks else None,
            batch_size=batch_size,
            device=device,
            dtype=dtype,
            revision=revision,
            trust_remote_code=trust_remote_code,
            adapter=adapter,
            quantization=quantization,
            backend_options={
                k: v
                for k, v in (("base_url", base_url), ("max_concurrency", max_concurrency), ("score_mode", score_mode))
                if v is not None
            },
            retry_errors=retry_errors,
            shard=shard,
            demo_orders=demo_orders,
            show_progress=progress,
            ray=RayOptions(address=ray_address, workers=ray_workers) if ray else None,
        )
    except (BenchmarkError, RunError, ModelError, ValueError, FileNotFoundError, RuntimeError) as exc:
        _fail(str(exc))  # RuntimeError covers backend set-up failures (e.g. an API server refusing the key)
    s = outcome.stats
    retried = f", {s.errors_retried} earlier errors asked again" if retry_errors else ""
    console.print(
        f"{s.planned} requests: {s.cached} already stored, {s.done} new ({s.errors} errors{retried}) "
        f"in {s.seconds:.1f}s → {out}"
    )
    if s.usage:
        console.print(f"backend usage: {s.usage}")
    print(markdown_tables([(_model_name(out), outcome.cells)]))


def _model_name(run_dir: Path) -> str:
    return json.loads((Path(run_dir) / "manifest.json").read_text())["model"]["name"]


@app.command()
def merge(
    shards: list[Path] = typer.Argument(..., help="Run folders of the shards (mmctx run --shard i/n)."),
    out: Path = typer.Option(..., help="Run folder for the merged run."),
) -> None:
    """Combine shard runs into one run (refuses shards of different runs) and score it."""
    from mmctx.reporting.tables import markdown_tables
    from mmctx.run.runner import RunError, merge_runs
    from mmctx.scoring.results import rescore

    try:
        n = merge_runs(shards, out)
    except (RunError, OSError, KeyError) as exc:
        _fail(str(exc))
    _, cells = rescore(out)
    console.print(f"merged {len(shards)} shards: {n} responses → {out}")
    print(markdown_tables([(_model_name(out), cells)]))


@app.command()
def score(run_dirs: list[Path] = typer.Argument(..., help="Run folder(s).")) -> None:
    """Re-score runs from their stored responses (no model needed)."""
    from mmctx.reporting.tables import markdown_tables
    from mmctx.scoring.results import rescore

    for run_dir in run_dirs:
        results, cells = rescore(run_dir)
        console.print(f"{run_dir}: {len(results)} results scored")
        print(markdown_tables([(_model_name(run_dir), cells)]))


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="Scored run folder(s), one per model."),
    csv: Path | None = typer.Option(None, help="Also write every metric as CSV here."),
    markdown: Path | None = typer.Option(None, help="Also write the Markdown tables here."),
    out: Path | None = typer.Option(
        None, help="Write the full report into this folder: report.md, CSVs, paired comparisons, LaTeX, figures."
    ),
    latex: bool = typer.Option(True, help="With --out: also write table1/table4/table5.tex."),
    figures: bool = typer.Option(True, help="With --out: also write the figures (PNG + PDF)."),
    seed: int = typer.Option(0, help="With --out: seed of the paired bootstrap."),
) -> None:
    """Print the papers' Table 4/5 layout for one or more runs; with --out, write the full report.

    The run folders are only read: results are scored afresh in memory from the stored responses.
    Context-learning runs (`mmctx clbench run`) get CLBench-V's Tables 2 and 3 instead.
    """
    from mmctx.reporting.tables import markdown_tables, write_csv
    from mmctx.scoring.results import score_run, summarize

    runs, scored = [], []
    names: dict[str, int] = {}
    kinds = {json.loads((Path(r) / "manifest.json").read_text()).get("kind", "fewshot") for r in run_dirs}
    if kinds == {"context"}:
        from mmctx.cli_clbench import report as clbench_report

        return clbench_report(run_dirs, out)
    if len(kinds) > 1:
        _fail("these runs mix few-shot and context-learning (CLBench-V) runs; report them separately")
    for run_dir in run_dirs:
        # Scored afresh in memory (cheap, and never numbers from an older extractor); a report
        # only reads: `mmctx score` is what rewrites a run's results.jsonl and summary.json.
        results = score_run(run_dir)
        cells = summarize(results)
        name = _model_name(run_dir)
        names[name] = names.get(name, 0) + 1
        name = name if names[name] == 1 else f"{name} ({run_dir.name})"
        runs.append((name, cells))
        scored.append((name, results))
    text = markdown_tables(runs)
    print(text)
    if markdown:
        markdown.write_text(text)
    if csv:
        write_csv(runs, csv)
        console.print(f"CSV → {csv}")
    if out:
        from mmctx.reporting.folder import write_report_results

        try:
            paths = write_report_results(scored, out, latex=latex, figures=figures, seed=seed)
        except ValueError as exc:
            _fail(str(exc))
        console.print(f"report: {len(paths)} files → {out} (start with {out / 'report.md'})")


def _lam(value: str | None):
    if value is None or value == "paper":
        return None
    return value if value == "auto" else float(value)


_ENCODER_HELP = (
    "clip:<hub id or folder>, open_clip:<arch>/<pretrained>, st:<sentence-transformers id or folder>; "
    "required, except for a shapes-world pool, which gets clip:builtin:shapes-clip (mmctx's reference CLIP)."
)
_LAMBDA_HELP = "λ: 'paper' (the paper's per-task values), 'auto' (n / 2k, mean matching) or a number."


@app.command()
def curate(
    pool: Path = typer.Argument(..., help="Pool folder (pool.jsonl|parquet + images) or a benchmark folder."),
    out: Path = typer.Option(..., help="Benchmark folder to write; intermediates go to OUT/curation."),
    encoder: str | None = typer.Option(None, help=_ENCODER_HELP),
    k: int = typer.Option(250, help="Queries selected per task and format."),
    lam: str = typer.Option("paper", "--lambda", help=_LAMBDA_HELP),
    convention: str = typer.Option("paper", help="Graph Cut form: paper (Σ over V\\X) or submodlib (λ+1 equivalent)."),
    demos: int = typer.Option(8, help="Similar and random demos per query."),
    seed: int = typer.Option(0),
    retrieval: str = typer.Option("joint", help="joint (cosine of the joint embedding) or image-then-text."),
    duplicate_cosine: float = typer.Option(0.98, help="Candidates closer than this to a query are not its demos."),
    rationales: str | None = typer.Option(None, help="scene-graph (shapes-world) or a model spec for CoT rationales."),
    projection: str = typer.Option("pca", help="Figure projection: pca, tsne or umap."),
    figures: bool = typer.Option(True, help="Write the similarity and projection figures."),
    push_to_hub: str | None = typer.Option(
        None, help="Also upload OUT/fewmmbench-layout to this HF dataset repo (token from HF_TOKEN or your login)."
    ),
) -> None:
    """Embed → select queries (Graph Cut) → retrieve demos → rationales → benchmark + figures."""
    from mmctx.curate.embed import EncoderError
    from mmctx.curate.pipeline import CurateOptions, CurationError
    from mmctx.reporting.curation import curate as run_curate

    opts = CurateOptions(
        encoder=encoder, k=k, lam=_lam(lam), convention=convention, demos=demos, seed=seed, retrieval=retrieval,
        duplicate_cosine=duplicate_cosine, rationales=rationales, projection=projection, figures=figures,
    )  # fmt: skip
    try:
        outcome = run_curate(pool, out, opts)
    except (CurationError, EncoderError, ValueError, FileNotFoundError) as exc:
        _fail(str(exc))
    _print_groups(outcome.groups)
    if outcome.rationales:
        console.print(f"rationales: {outcome.rationales}")
    console.print(f"benchmark: {len(outcome.benchmark.queries)} queries, {len(outcome.benchmark.demos)} demos → {out}")
    if push_to_hub:
        from huggingface_hub import HfApi

        from mmctx.curate.pipeline import LAYOUT_DIR

        api = HfApi()
        api.create_repo(push_to_hub, repo_type="dataset", exist_ok=True)
        api.upload_folder(folder_path=str(out / LAYOUT_DIR), repo_id=push_to_hub, repo_type="dataset")
        console.print(f"pushed {out / LAYOUT_DIR} → hf.co/datasets/{push_to_hub}")


def _print_groups(groups) -> None:
    from rich.table import Table

    table = Table(
        "group", "pool", "queries", "similar demos", "random-only demos", "λ", "ρ = n/2λk", "near-dups excluded",
        "cos similar", "cos random",
        caption="similar demos: as the paper's Table 2 counts; random-only: drawn only at random",
    )  # fmt: skip
    for g in groups:
        table.add_row(
            g.group, str(g.pool), str(g.queries), str(g.similar_demos), str(g.random_only_demos), f"{g.lam:g}",
            f"{g.rho:.3f}",
            str(g.excluded_near_duplicates), f"{g.similar_cosine:.3f}", f"{g.random_cosine:.3f}",
        )  # fmt: skip
    Console(width=max(160, console.width)).print(table)


@app.command()
def embed(
    pool: Path = typer.Argument(..., help="Pool folder or benchmark folder."),
    work: Path = typer.Option(..., "--out", help="Curation work folder (embeddings/ is written there)."),
    encoder: str | None = typer.Option(None, help=_ENCODER_HELP),
) -> None:
    """Step 1: joint CLIP embeddings per task and format (cached; re-runs embed only new samples)."""
    from mmctx.curate.embed import EncoderError
    from mmctx.curate.pipeline import CurationError, embed_step
    from mmctx.data.disk import load_pool

    samples, root = load_pool(pool)
    try:
        embeddings = embed_step(samples, root, work, encoder)
    except (CurationError, EncoderError) as exc:
        _fail(str(exc))
    for name, emb in embeddings.items():
        console.print(f"{name}: {len(emb.ids)} samples, joint dim {emb.joint.shape[1]}")


@app.command("select")
def select_cmd(
    work: Path = typer.Argument(..., help="Curation work folder holding embeddings/."),
    k: int = typer.Option(250),
    lam: str = typer.Option("paper", "--lambda", help=_LAMBDA_HELP),
    convention: str = typer.Option("paper"),
) -> None:
    """Step 2: Graph-Cut query selection per task and format."""
    from mmctx.curate.pipeline import load_embeddings, select_step

    for name, sel in select_step(load_embeddings(work), work, k, _lam(lam), convention).items():
        console.print(f"{name}: {len(sel['ids'])} of {sel['pool']} (λ={sel['lambda']:g}, ρ={sel['rho']:.3f})")


@app.command()
def retrieve(
    pool: Path = typer.Argument(..., help="The pool the embeddings were made from."),
    work: Path = typer.Option(..., help="Curation work folder holding embeddings/ and selection/."),
    out: Path = typer.Option(..., help="Benchmark folder to write."),
    demos: int = typer.Option(8),
    seed: int = typer.Option(0),
    retrieval: str = typer.Option("joint", help="joint or image-then-text."),
    duplicate_cosine: float = typer.Option(0.98),
) -> None:
    """Step 3: similar and random demos per selected query; writes the benchmark."""
    from mmctx.curate.pipeline import build_benchmark, load_embeddings, load_selections, retrieve_step, summarize
    from mmctx.data.disk import load_pool, save_benchmark

    samples, root = load_pool(pool)
    selections = load_selections(work)
    retrievals = retrieve_step(
        samples, root, load_embeddings(work), selections, work, demos, seed, retrieval, duplicate_cosine
    )
    bench = build_benchmark(samples, root, retrievals, name=out.name)
    bench.check()
    save_benchmark(bench, out)
    _print_groups(summarize(selections, retrievals))


@app.command()
def rationales(
    benchmark: Path = typer.Argument(..., help="Benchmark folder; its CoT demos get rationales, in place."),
    source: str = typer.Option(..., "--model", help="scene-graph (shapes-world) or a model spec."),
    attempts: int = typer.Option(3, help="Attempts per demo, the later ones with the gold answer injected."),
    seed: int = typer.Option(0),
    device: str = typer.Option("auto"),
    dtype: str = typer.Option("auto"),
    retry_errors: bool = typer.Option(False, help="Ask again for replies stored as errors."),
) -> None:
    """Step 4: CoT rationales for every similar demo, with answer injection and filtering.

    Every reply is kept in BENCHMARK/curation/responses.sqlite as it arrives: run the command
    again after an interruption and it asks only for what is not stored yet.
    """
    from mmctx.curate.pipeline import rationales_step
    from mmctx.data.disk import load_benchmark, save_benchmark

    bench = load_benchmark(benchmark)
    kw = {} if source == "scene-graph" else {"device": device, "dtype": dtype}
    counts = rationales_step(bench, source, benchmark / "curation", seed, attempts, retry_errors, **kw)
    save_benchmark(bench, benchmark)
    calls = counts.pop("model_calls", None)
    console.print(f"rationales: {counts}")
    if calls is not None:
        console.print(
            f"model calls: {calls['from_store']} from the store, {calls['asked']} asked ({calls['errors']} errors)"
        )


build_app = typer.Typer(no_args_is_help=True, help="Build benchmarks from downloaded source datasets.")
app.add_typer(build_app, name="build")

from mmctx.cli_clbench import app as clbench_app  # noqa: E402  (a sub-app, registered after the main commands)

app.add_typer(clbench_app, name="clbench")


@app.command("sources")
def sources_cmd() -> None:
    """The source datasets mmctx converts: license, where to get them, the folder layout it expects."""
    from rich.table import Table

    from mmctx.data.sources import sources

    table = Table(
        "name", "dataset", "license", "published at", "expected layout under SOURCES/<name>/", "subsets → task/format"
    )
    for name, (info, _) in sources().items():
        subsets = "\n".join(f"{s} → {t}/{f}" for s, (t, f) in info.subsets.items())
        table.add_row(name, info.title, info.license, info.published, info.layout, subsets)
    Console(width=max(200, console.width)).print(table)


@build_app.command("fewmmbench")
def build_fewmmbench(
    sources_dir: Path = typer.Option(..., "--sources", help="Folder with one sub-folder per downloaded dataset."),
    out: Path = typer.Option(..., help="Benchmark folder to write."),
    encoder: str = typer.Option(..., help=_ENCODER_HELP),
    recipe: Path | None = typer.Option(None, help="Recipe YAML (default: the shipped FewMMBench one)."),
    k: int = typer.Option(250, help="Queries per task and kind."),
    demos: int = typer.Option(8),
    seed: int = typer.Option(0),
    rationales: str | None = typer.Option(None, help="Model spec for CoT rationales (none without it)."),
    duplicate_cosine: float = typer.Option(0.98, help="Candidates closer than this to a query are not its demos."),
    figures: bool = typer.Option(True),
) -> None:
    """Convert the sources, pool them by the recipe (the paper's Table 2) and curate each task."""
    from collections import Counter

    from rich.table import Table

    from mmctx.curate.cues import find_surface_cues
    from mmctx.curate.pipeline import LAYOUT_DIR, CurateOptions, CurationError
    from mmctx.data.sources.build import (
        COMPOSITION_COUNTS,
        composition,
        convert_sources,
        drop_content_duplicates,
        drop_small_groups,
        load_recipe,
        pool_from_recipe,
        write_build_report,
    )
    from mmctx.reporting.curation import curate_samples

    try:
        plan = load_recipe(recipe)
    except (ValueError, OSError) as exc:
        _fail(str(exc))
    conversions, reports = convert_sources(sources_dir, plan.sources)
    report_path = out / "curation" / "build.json"
    for r in reports:
        if not r.present:
            console.print(f"[yellow]missing[/yellow] {r.name}: no folder {sources_dir / r.name}; skipped")
        else:
            console.print(f"{r.name}: {r.samples} samples, skipped by rule {r.skipped or '{}'}, {len(r.errors)} errors")
            for e in r.errors[:5]:
                console.print(f"  [red]error[/red] {escape(e)}", soft_wrap=True)
            if len(r.errors) > 5:
                console.print(f"  ... and {len(r.errors) - 5} more error(s), all in {escape(str(report_path))}")
    recipe_pool = pool_from_recipe(plan, conversions)
    pool, duplicates = drop_content_duplicates(recipe_pool, sources_dir)
    if duplicates:
        source_of = {s.id: s.source for s in recipe_pool}
        counts = Counter(source_of[d] for ds in duplicates.values() for d in ds)
        by_source = escape(", ".join(f"{name} {n}" for name, n in sorted(counts.items())))
        console.print(
            f"[yellow]dropped {sum(counts.values())} content duplicate(s)[/yellow] ({by_source}), keeping the first "
            "of each; listed in curation/build.json"
        )
    pool, small = drop_small_groups(pool, k, demos)
    for name, size in small.items():
        console.print(f"[yellow]skipped group[/yellow] {name}: {size} samples, fewer than k + demos = {k + demos}")
    cues = find_surface_cues(pool)
    for cue in cues:
        console.print(f"[yellow]surface cue[/yellow] {escape(cue.describe())}", soft_wrap=True)
    if not pool:
        write_build_report(
            out, reports, [], duplicates=duplicates, pool=recipe_pool, small_groups=small, needed=k + demos, cues=cues
        )
        _fail(f"no samples left to curate: the recipe's sources are missing or too small (details: {report_path})")
    opts = CurateOptions(
        encoder=encoder, k=k, demos=demos, seed=seed, rationales=rationales, figures=figures,
        duplicate_cosine=duplicate_cosine,
    )  # fmt: skip
    from mmctx.curate.embed import EncoderError

    try:
        outcome = curate_samples(pool, sources_dir, out, opts)
    except (CurationError, EncoderError, ValueError) as exc:
        _fail(str(exc))
    left_out = outcome.layout_left_out
    if left_out:
        reasons = Counter(left_out.values())
        console.print(
            f"[yellow]left out of {escape(str(out / LAYOUT_DIR))}[/yellow]: {len(left_out)} sample(s) the FewMMBench "
            "layout cannot hold (demo keys to them removed there; listed in curation/build.json)"
        )
        for reason, n in reasons.most_common(5):
            console.print(f"  {n} × {escape(reason)}", soft_wrap=True)
    rows = composition(outcome.benchmark.queries, outcome.benchmark.demos, pool)
    left_out_report = {"count": len(left_out), "by_reason": dict(Counter(left_out.values())), "samples": left_out}
    write_build_report(
        out, reports, rows, duplicates=duplicates, pool=recipe_pool, small_groups=small, needed=k + demos,
        left_out=left_out_report, cues=cues,
    )  # fmt: skip
    columns = ("task", "kind", "source", *COMPOSITION_COUNTS)
    table = Table(*columns, caption="similar_demos: as in the paper's Table 2; random_only_demos: drawn only at random")
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    Console(width=max(120, console.width)).print(table)
    console.print(f"benchmark → {out}")


@app.command()
def view(
    run_dirs: list[Path] = typer.Argument(..., help="Run folder(s), one per model."),
    out: Path = typer.Option(..., help="Folder to write the site into (index.html, samples.html, …)."),
    figures: Path | None = typer.Option(None, help="Folder of figures (PNG/SVG) to show on the summary page."),
) -> None:
    """Write a static HTML viewer of the runs' per-sample results; open OUT/index.html from disk."""
    from mmctx.reporting.viewer import ViewerError, build_site

    try:
        index = build_site(run_dirs, out, figures_dir=figures)
    except (ViewerError, OSError, ValueError) as exc:
        _fail(str(exc))
    console.print(f"viewer → {index}")


@app.command("models")
def models_cmd(
    check: bool = typer.Option(False, "--check", help="Build every tiny family and run the conformance checks."),
    family: list[str] | None = typer.Option(None, help="With --check: only these families."),
    out: Path | None = typer.Option(None, help="With --check: also write the Markdown table here."),
) -> None:
    """The model family adapters of the HF backend, the ids they match and what they support."""
    from rich.table import Table

    from mmctx.models.adapters import all_adapters

    if check:
        _check_families(family, out)
        return

    table = Table("adapter", "matches", "loads with", "remote code", "max images", "dtypes", "quantization", "notes")
    for a in all_adapters():
        matches = "\n".join(list(a.aliases) + [f"model_type={t}" for t in a.model_types]) or "anything else"
        table.add_row(
            a.family, matches, a.auto_class, "yes" if a.needs_remote_code else "no", str(a.max_images or "—"),
            ", ".join(a.dtypes), ", ".join(a.quantization) or "—", a.notes,
        )  # fmt: skip
    table.add_row("builtin", "builtin:shapes-vlm", "(shipped)", "no", "—", "auto", "—",
                  "reference Idefics3 trained on shapes-world (the default); rebuild with mmctx train-reference")  # fmt: skip
    table.add_row("builtin", "builtin:tiny-idefics3, builtin:tiny-llava", "(built offline)", "no", "—", "auto", "—",
                  "untrained, chance level")  # fmt: skip
    Console(width=max(200, console.width)).print(table)


TABLE_BEGIN, TABLE_END = "<!-- conformance-table:begin -->", "<!-- conformance-table:end -->"


def _with_table(path: Path, table: str) -> str:
    """``path``'s text with the table between its markers replaced (docs/families.md); the table alone otherwise."""
    old = path.read_text() if path.exists() else ""
    if TABLE_BEGIN not in old or TABLE_END not in old:
        return table
    head, rest = old.split(TABLE_BEGIN, 1)
    return f"{head}{TABLE_BEGIN}\n{table}{TABLE_END}{rest.split(TABLE_END, 1)[1]}"


def _check_families(families: list[str] | None, out: Path | None) -> None:
    """Build each tiny family in a scratch folder and print (and write) the conformance table."""
    import tempfile

    from mmctx.models.adapters import all_adapters
    from mmctx.models.tiny import tiny_families
    from mmctx.tasks.conformance import check_family, conformance_markdown

    known = tiny_families()
    unknown = [f for f in families or [] if f not in known]
    if unknown:
        _fail(f"unknown tiny family {unknown[0]!r}; choose from {', '.join(known)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mmctx-check-") as scratch:
        for name in families or list(known):
            console.print(f"checking {name} …")
            rows.append(check_family(name, Path(scratch) / name))
    remote = [(a.family, "runs its own code (stub-processor rendering tests only)") for a in all_adapters()
              if a.needs_remote_code]  # fmt: skip
    table = conformance_markdown(rows, remote)
    print(table)
    for r in rows:
        for problem in r.problems:
            console.print(f"[red]{r.family}[/red]: {escape(problem)}", soft_wrap=True)
    if out:
        out.write_text(_with_table(out, table))
        console.print(f"table → {out}")
    if not all(r.passed for r in rows):
        raise typer.Exit(1)


@app.command("tiny-model")
def tiny_model(
    out: Path | None = typer.Option(None, help="Folder for the checkpoint (required unless --list)."),
    family: str = typer.Option("idefics3", help="Model family (`mmctx tiny-model --list` names them)."),
    list_families: bool = typer.Option(False, "--list", help="List the families and the releases they mirror."),
    seed: int = typer.Option(0),
) -> None:
    """Build a tiny random-weight checkpoint offline (chance-level; for pipelines and tests)."""
    from mmctx.models.tiny import build_tiny_vlm, tiny_families

    if list_families:
        for name, fam in tiny_families().items():
            console.print(f"{name}: mirrors {escape(fam.mirrors)}", soft_wrap=True)
        return
    if out is None:
        _fail("--out is required")
    try:
        build_tiny_vlm(out, family=family, seed=seed)  # type: ignore[arg-type]
    except ValueError as exc:
        _fail(str(exc))
    console.print(f"tiny {family} checkpoint → {out}")


@app.command("train-reference")
def train_reference(
    out: Path = typer.Option(..., help="Folder for shapes-clip/ and shapes-vlm/ (each a checkpoint + model card)."),
    seed: int = typer.Option(0, min=0, help="One seed for data, initialisation and batch draws."),
    only: str | None = typer.Option(None, help="clip or vlm: train just one of the two."),
    grid: bool = typer.Option(True, help="Also measure the full settings grid on the demo benchmark for the card."),
    quick: bool = typer.Option(
        False, help="Check the pipeline in about two minutes (a few steps; meaningless scores)."
    ),
) -> None:
    """Train the reference models (shapes-clip, shapes-vlm) from a seed on the CPU, score them, write cards.

    Needs the mmctx-reference package (`pip install -e ./reference` in mmctx's repository).
    """
    try:
        from mmctx_reference.train import train_reference as run_training
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mmctx_reference":
            raise  # a dependency of an installed mmctx_reference: its own error says which
        _fail("training needs the mmctx-reference package: run `pip install -e ./reference` in mmctx's repository")

    try:
        result = run_training(out, seed=seed, grid=grid, quick=quick, only=only)
    except ValueError as exc:
        _fail(str(exc))
    sizes = ", ".join(f"{name} {mb:.1f} MB" for name, mb in result["megabytes"].items())
    cards = ", ".join(f"{out}/{name}/README.md" for name in result["megabytes"])
    console.print(
        f"trained in {result['training_seconds']:.0f} s, all in {result['seconds']:.0f} s ({sizes}); model cards → {cards}"
    )


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), help="Folder for the benchmark, run and report."),
    model: str = typer.Option(DEFAULT_MODEL, help="Model to evaluate."),
    queries_per_task: int = typer.Option(4, help="shapes-world queries per task and format."),
    cot_max_new_tokens: int = typer.Option(DEMO_LIMITS.cot_max_new_tokens, help="Generation limit for CoT settings."),
    clbench: bool = typer.Option(True, help="Also run the CLBench-V toy suite (the model judges itself)."),
) -> None:
    """The embedded default: shapes-world benchmark → full settings grid, both scorers → report + viewer;
    then the CLBench-V toy suite → Tables 2–3."""
    from dataclasses import replace

    from mmctx.data import shapes as sw
    from mmctx.reporting.tables import markdown_tables, write_csv
    from mmctx.tasks.fewshot import evaluate

    bench_dir, run_dir = out / "benchmark", out / "run"
    if not (bench_dir / "benchmark.json").exists():
        sw.build_benchmark(bench_dir, queries_per_task=queries_per_task, seed=0)
    limits = replace(DEMO_LIMITS, cot_max_new_tokens=cot_max_new_tokens)
    outcome = evaluate(bench_dir, model, run_dir, limits=limits)
    runs = [(_model_name(run_dir), outcome.cells)]
    text = markdown_tables(runs)
    write_csv(runs, out / "report.csv")
    print(text)
    from mmctx.reporting.folder import write_report_results
    from mmctx.reporting.viewer import build_site

    write_report_results([(_model_name(run_dir), outcome.results)], out / "report", latex=True, figures=True)
    index = build_site([run_dir], out / "viewer", figures_dir=out / "report")
    s = outcome.stats
    console.print(
        f"{s.planned} requests ({s.cached} cached) in {s.seconds:.1f}s; report → {out}/report/report.md; "
        f"viewer → {index}"
    )
    if clbench:
        _demo_clbench(out / "clbench", model)


def _demo_clbench(out: Path, model: str) -> None:
    """Every CLBench-V subset once through the pipeline, offline: toy items, repair on, the model as judge."""
    from mmctx.data.clbench.toy import write_toy_suite
    from mmctx.jsonl import read_jsonl
    from mmctx.models import load_backend
    from mmctx.reporting.clbench_tables import table2_markdown, write_clbench_report
    from mmctx.scoring.levels import aggregate
    from mmctx.tasks.context import ContextConfig, run_context

    bench = write_toy_suite(out / "suite")
    backend = load_backend(model)
    config = ContextConfig(
        suite=str(out / "suite"),
        suite_name=bench.name,
        suite_sha256=bench.fingerprint(),
        max_new_tokens=32,
        repair=True,
    )
    stats = run_context(bench, backend, out / "run", config, judge=backend)
    scores = {backend.info.name: aggregate(read_jsonl(out / "run" / "results.jsonl"))}
    write_clbench_report(scores, out / "report")
    print(table2_markdown(scores))
    console.print(f"CLBench-V toy suite: {stats.planned} items, outcomes {stats.outcomes}; Tables 2–3 → {out}/report")


def main() -> None:  # pragma: no cover
    sys.exit(app())
