"""`mmctx curate` and its steps (`embed`, `select`, `retrieve`, `rationales`): a benchmark from a pool."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from mmctx.cli.common import app, console, fail


def _lam(value: str | None):
    if value is None or value == "paper":
        return None
    return value if value == "auto" else float(value)


_LAMBDA_HELP = "λ: 'paper' (the paper's per-task values), 'auto' (n / 2k, mean matching) or a number."
DEPTH_HELP = (
    "Similar demos per query that get a rationale: the largest k of a CoT setting (a deeper one is refused, "
    "naming the query). 8 is the paper's; 64 asks a model source for up to 8x as many rationales."
)
ENCODER_HELP = (
    "clip:<hub id or folder>, open_clip:<arch>/<pretrained>, st:<sentence-transformers id or folder>; "
    "required, except for a shapes-world pool, which gets clip:builtin:shapes-clip (mmctx's reference CLIP)."
)


@app.command()
def curate(
    pool: Path = typer.Argument(..., help="Pool folder (pool.jsonl|parquet + images) or a benchmark folder."),
    out: Path = typer.Option(..., help="Benchmark folder to write; intermediates go to OUT/curation."),
    encoder: str | None = typer.Option(None, help=ENCODER_HELP),
    k: int = typer.Option(250, help="Queries selected per task and format."),
    lam: str = typer.Option("paper", "--lambda", help=_LAMBDA_HELP),
    convention: str = typer.Option("paper", help="Graph Cut form: paper (Σ over V\\X) or submodlib (λ+1 equivalent)."),
    demos: int = typer.Option(
        64, min=1, help="Ranked demo keys per query and strategy: the largest k a setting may ask."
    ),
    seed: int = typer.Option(0),
    retrieval: str = typer.Option("joint", help="joint (cosine of the joint embedding) or image-then-text."),
    duplicate_cosine: float = typer.Option(0.98, help="Candidates closer than this to a query are not its demos."),
    rationales: str | None = typer.Option(None, help="scene-graph (shapes-world) or a model spec for CoT rationales."),
    rationale_depth: int = typer.Option(8, min=1, help=DEPTH_HELP),
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
        duplicate_cosine=duplicate_cosine, rationales=rationales, rationale_depth=rationale_depth,
        projection=projection, figures=figures,
    )  # fmt: skip
    try:
        outcome = run_curate(pool, out, opts)
    except (CurationError, EncoderError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
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
    encoder: str | None = typer.Option(None, help=ENCODER_HELP),
) -> None:
    """Step 1: joint CLIP embeddings per task and format (cached; re-runs embed only new samples)."""
    from mmctx.curate.embed import EncoderError
    from mmctx.curate.pipeline import CurationError, embed_step
    from mmctx.data.disk import load_pool

    samples, root = load_pool(pool)
    try:
        embeddings = embed_step(samples, root, work, encoder)
    except (CurationError, EncoderError) as exc:
        fail(str(exc))
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
    demos: int = typer.Option(
        64, min=1, help="Ranked demo keys per query and strategy: the largest k a setting may ask."
    ),
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
    depth: int = typer.Option(8, "--rationale-depth", min=1, help=DEPTH_HELP),
) -> None:
    """Step 4: CoT rationales for each query's first similar demos, with answer injection and filtering.

    Every reply is kept in BENCHMARK/curation/responses.sqlite as it arrives: run the command
    again after an interruption and it asks only for what is not stored yet.
    """
    from mmctx.curate.pipeline import rationales_step
    from mmctx.data.disk import load_benchmark, save_benchmark

    bench = load_benchmark(benchmark)
    kw = {} if source == "scene-graph" else {"device": device, "dtype": dtype}
    counts = rationales_step(bench, source, benchmark / "curation", seed, attempts, retry_errors, depth, **kw)
    save_benchmark(bench, benchmark)
    calls = counts.pop("model_calls", None)
    console.print(f"rationales: {counts}")
    if calls is not None:
        console.print(
            f"model calls: {calls['from_store']} from the store, {calls['asked']} asked ({calls['errors']} errors)"
        )


@app.command("drop-blind-answerable")
def drop_blind_answerable(
    benchmark: Path = typer.Argument(..., help="Benchmark folder to drop queries from (rewritten in place)."),
    runs: list[Path] = typer.Argument(..., help="Run folders with -blind, -blind-all or -blank settings."),
) -> None:
    """Drop the queries some blind run answers in every option order (CLBench-V rejection sampling)."""
    from mmctx import api

    try:
        outcome = api.drop_blind_answerable(benchmark, runs)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    if outcome.log_entry is None:
        console.print(
            f"nothing to drop from {benchmark}"
            + (f" ({len(outcome.already)} dropped before)" if outcome.already else "")
        )
        return
    console.print(f"dropped {len(outcome.dropped)} queries answerable without vision from {benchmark}")
    console.print(f"benchmark_sha256: {outcome.benchmark_sha256_before[:12]} → {outcome.benchmark_sha256_after[:12]}")
    from mmctx.curate.log import log_path

    console.print(f"logged in {log_path(benchmark)}")
