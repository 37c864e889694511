"""`mmctx curate`: a pool in, a few-shot benchmark out, every intermediate on disk.

Work is done per group — one (task, format) pair, as the paper selects 250 MCQA and 250
caption/foil queries per task separately — and each step writes its output under
``WORK`` so any step can be re-run alone:

    WORK/embeddings/<group>.npz    joint CLIP embeddings of the group's pool (ids in pool order)
    WORK/selection/<group>.json    Graph-Cut picks: ids, gains, λ, convention, ρ
    WORK/retrieval/<group>.json    per query: ranked ids per strategy (similar + cosines, random,
                                   image-similar, text-similar, mmr); exclusions
    WORK/rationales.jsonl          per demo: rationale outcome (status, attempts, injected)
    WORK/responses.sqlite          every model reply the rationales step received (resumable)
    WORK/summary.json              the per-group table printed at the end
    WORK/figures/                  demo-similarity boxplot and projection scatters, drawn by the
                                   reporting layer (`mmctx.reporting.curation`)

The benchmark (queries with ranked ``similar``, ``random``, ``mmr`` and, for an encoder with an
image tower, ``image-similar`` and ``text-similar`` keys; the demo table; images) is written by
`build_benchmark` from the pool and the retrieval files. Each list holds ``demos`` keys (64 by
default, fewer where a group holds fewer but never under `MIN_DEMOS`): the largest k a setting
may ask (`mmctx.run.strategies` picks from them).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from mmctx.curate.embed import Embeddings, embed_samples, load_encoder
from mmctx.curate.retrieve import (
    DUPLICATE_COSINE,
    Neighbours,
    TooFewCandidates,
    mmr_demos,
    near_duplicates,
    random_demos,
    rerank_demos,
    similar_demos,
)
from mmctx.curate.select import DEFAULT_LAMBDA, paper_lambda, select_graph_cut
from mmctx.data.groups import KIND, groups_of
from mmctx.schema import Benchmark, Sample, listed

RETRIEVAL_MODES = ("joint", "image-then-text")
DEMOS_PER_QUERY = 64  # ranked keys per query and list: enough for 16-, 32- and 64-shot settings
# The fewest a group must yield, the paper's largest k: a smaller group stores what it holds, above this.
MIN_DEMOS = 8
MMR_LAMBDA = 0.5  # the λ of the stored ``mmr`` list (`mmctx.run.strategies.DEFAULT_MMR_LAMBDA`)
# Lists stored besides ``similar`` and ``random``: the strategies that need embeddings.
EMBEDDING_LISTS = ("image-similar", "text-similar", "mmr")
LAYOUT_DIR = "fewmmbench-layout"


class CurationError(ValueError):
    """The pool cannot be curated as asked; raised before any long computation."""


# The FewMMBench configs a format belongs to: VSR-style binary statements sit with caption/foil
# pairs, as the paper's Table 2 counts them in one caption/foil pool per task.
SHAPES_ENCODER = "clip:builtin:shapes-clip"  # mmctx's reference CLIP: it knows shapes-world and nothing else


def encoder_for(samples: list[Sample], encoder: str | None = None) -> str:
    """``encoder`` when given; else the reference CLIP, but only for a pool that is all shapes-world."""
    from mmctx.data.shapes.pool import SOURCE

    if encoder:
        return encoder
    if samples and all(s.source == SOURCE for s in samples):
        return SHAPES_ENCODER
    raise CurationError("--encoder is required: the default (clip:builtin:shapes-clip) knows only shapes-world pools")


def needed_per_group(k: int, demos: int) -> int:
    """Samples a group needs: ``k`` queries and the fewest demos a query may store (`MIN_DEMOS`)."""
    return k + min(demos, MIN_DEMOS)


def check_pool(samples: list[Sample], k: int, demos: int) -> None:
    """Every problem that would stop curation halfway, all at once, naming task and record."""
    problems = [] if demos >= 1 else [f"demos: {demos} ranked demos per query asked; at least 1 is needed"]
    seen: dict[str, int] = defaultdict(int)
    for s in samples:
        seen[s.id] += 1
        if not s.images and not (s.question or s.statement or s.choices):
            problems.append(f"{s.id}: no image and no text")
    problems += [f"{sid}: duplicate id ({n} records)" for sid, n in seen.items() if n > 1]
    need = needed_per_group(k, demos)
    for name, group in groups_of(samples).items():
        if len(group) < need:
            problems.append(f"{name}: pool has {len(group)} samples, needs at least k + {need - k} demos = {need}")
    if problems:
        raise CurationError(listed("pool cannot be curated:", problems, shown=len(problems)))


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


# ---- step 1: embed --------------------------------------------------------------------------


def embed_step(
    samples: list[Sample], root: Path, work: Path, encoder_spec: str | None, progress: bool = True
) -> dict[str, Embeddings]:
    """Joint embeddings per group, with ``encoder_spec`` or, when None, `encoder_for` the pool."""
    encoder = load_encoder(encoder_for(samples, encoder_spec))
    out = {}
    for name, group in groups_of(samples).items():
        emb = embed_samples(group, root, encoder, cache_dir=work / "cache", progress=progress)
        emb.save(work / "embeddings" / f"{name}.npz")
        out[name] = emb
    return out


def load_embeddings(work: Path) -> dict[str, Embeddings]:
    files = sorted((work / "embeddings").glob("*.npz"))
    if not files:
        raise CurationError(f"{work}/embeddings holds no embeddings; run `mmctx embed` first")
    return {f.stem: Embeddings.load(f) for f in files}


# ---- step 2: select -------------------------------------------------------------------------


def select_step(
    embeddings: dict[str, Embeddings], work: Path, k: int, lam: float | str | None, convention: str
) -> dict:
    selections = {}
    for name, emb in embeddings.items():
        task, fmt = name.split("__")
        group_lam, source = (lam, "auto" if lam == "auto" else "user") if lam is not None else _paper_lambda(task, fmt)
        sel = select_graph_cut(emb.joint, k=k, lam=group_lam, convention=convention)
        record = {
            "group": name,
            "ids": [emb.ids[i] for i in sel.indices],
            "indices": list(sel.indices),
            "gains": list(sel.gains),
            "lambda": sel.lam,
            "lambda_source": source,
            "convention": sel.convention,
            "rho": sel.rho,
            "kernel": sel.kernel,
            "pool": len(emb.ids),
            "encoder": emb.encoder,
        }
        _write_json(work / "selection" / f"{name}.json", record)
        selections[name] = record
    return selections


def _paper_lambda(task: str, kind: str) -> tuple[float, str]:
    try:
        return paper_lambda(task, kind), "paper"
    except KeyError:
        return DEFAULT_LAMBDA, "default (group not in the paper)"


def load_selections(work: Path) -> dict:
    files = sorted((work / "selection").glob("*.json"))
    if not files:
        raise CurationError(f"{work}/selection holds no selections; run `mmctx select` first")
    return {f.stem: json.loads(f.read_text()) for f in files}


# ---- step 3: retrieve -----------------------------------------------------------------------


def _same_images(queries: list[Sample], candidates: list[Sample], root: Path) -> np.ndarray:
    """``[i, j]``: query i and candidate j show the same image content (a near-duplicate)."""
    from mmctx.prompts.messages import file_sha256

    codes: dict[tuple[str, ...], int] = {}

    def code(s: Sample) -> int:
        key = tuple(sorted(file_sha256(str((root / rel).resolve())) for rel in s.images))
        return codes.setdefault(key, len(codes)) if key else -1  # no image: never a match

    q = np.array([code(s) for s in queries])
    c = np.array([code(s) for s in candidates])
    return (q[:, None] == c[None, :]) & (q[:, None] >= 0)


def retrieve_step(
    samples: list[Sample],
    root: Path,
    embeddings: dict[str, Embeddings],
    selections: dict,
    work: Path,
    demos: int = DEMOS_PER_QUERY,
    seed: int = 0,
    mode: str = "joint",
    duplicate_cosine: float = DUPLICATE_COSINE,
) -> dict:
    if mode not in RETRIEVAL_MODES:
        raise CurationError(f"unknown retrieval mode {mode!r}; choose from {RETRIEVAL_MODES}")
    if demos < 1:
        raise CurationError(f"demos: {demos} ranked demos per query asked; at least 1 is needed")
    by_id = {s.id: s for s in samples}
    out = {}
    for name, sel in selections.items():
        emb = embeddings[name]
        row = {sid: i for i, sid in enumerate(emb.ids)}
        chosen = set(sel["ids"])
        cand_ids = [sid for sid in emb.ids if sid not in chosen]
        q_rows = np.array([row[sid] for sid in sel["ids"]])
        c_rows = np.array([row[sid] for sid in cand_ids])
        queries, cands = [by_id[sid] for sid in sel["ids"]], [by_id[sid] for sid in cand_ids]
        same = _same_images(queries, cands, root)
        # A demo must show the answer form its query asks for: a binary query gets binary demos.
        codes = {f: i for i, f in enumerate(KIND)}
        other_format = np.array([codes[q.format] for q in queries])[:, None] != np.array(
            [codes[c.format] for c in cands]
        )
        excluded = same | other_format
        joint_c = emb.joint[c_rows]
        leaks = near_duplicates(emb.joint[q_rows], joint_c, duplicate_cosine, same)
        usable = ~(leaks | other_format)
        # Each list holds ``demos`` keys, or what the group's most constrained query can take; a
        # setting asking for more is refused at planning, naming the query.
        stored = min(demos, int(usable.sum(axis=1).min()))
        least = min(demos, MIN_DEMOS)
        try:
            if stored < least:
                raise TooFewCandidates(np.flatnonzero(usable.sum(axis=1) < least).tolist(), least)
            if mode == "joint" or emb.image is None:
                nb = similar_demos(emb.joint[q_rows], joint_c, stored, duplicate_cosine, excluded)
            else:
                nb = rerank_demos(
                    emb.image[q_rows], emb.image[c_rows], emb.text[q_rows], emb.text[c_rows], stored,
                    duplicate_cosine=duplicate_cosine, same_content=excluded,
                )  # fmt: skip
        except TooFewCandidates as exc:
            ids = [sel["ids"][r] for r in exc.rows]
            raise CurationError(
                f"{name}: queries {ids[:10]} have fewer than {exc.k} demo candidates once near-duplicates "
                f"(cosine > {duplicate_cosine} or the same image) are excluded; an encoder that cannot tell "
                f"samples apart puts everything above the threshold"
            ) from exc
        task = name.split("__")[0]
        try:
            extra = _embedding_lists(emb, q_rows, c_rows, stored, ~usable)
        except TooFewCandidates as exc:  # cannot happen where the joint lists passed; said clearly if it does
            raise CurationError(f"{name}: queries {[sel['ids'][r] for r in exc.rows][:10]}: {exc}") from exc
        per_query = {}
        for qi, qid in enumerate(sel["ids"]):
            # Random demos come from the same candidates as similar ones: no query, no near-duplicate.
            rnd = random_demos(qid, task, [c for c, ok in zip(cand_ids, usable[qi]) if ok], stored, seed)
            rnd_rows = np.array([row[r] for r in rnd])
            per_query[qid] = {
                "similar": [cand_ids[j] for j in nb.indices[qi]],
                "similar_cosines": [float(x) for x in joint_c[nb.indices[qi]] @ emb.joint[q_rows[qi]]],
                "random": rnd,
                "random_cosines": [float(x) for x in emb.joint[rnd_rows] @ emb.joint[q_rows[qi]]],
                **{key: [cand_ids[j] for j in nb_extra.indices[qi]] for key, nb_extra in extra.items()},
                "excluded_near_duplicates": int(leaks[qi].sum()),
            }
        record = {
            "group": name,
            "mode": mode,
            "demos": stored,
            "demos_asked": demos,
            "seed": seed,
            "duplicate_cosine": duplicate_cosine,
            "excluded_near_duplicates": int(leaks.sum()),
            "queries": per_query,
        }
        _write_json(work / "retrieval" / f"{name}.json", record)
        out[name] = record
    return out


def _embedding_lists(
    emb: Embeddings, q_rows: np.ndarray, c_rows: np.ndarray, demos: int, banned: np.ndarray
) -> dict[str, Neighbours]:
    """The ranked lists of `EMBEDDING_LISTS` this encoder allows (image/text halves need an image tower).

    Every list ranks the same allowed candidates as ``similar`` (``banned`` holds the joint
    near-duplicates and the other answer forms), so no list shows a demo that ``similar`` may not
    and each can hold as many: an image-only cosine above the threshold is a look-alike with its
    own question, not a leak.
    """
    no_threshold = float("inf")
    out = {"mmr": mmr_demos(emb.joint[q_rows], emb.joint[c_rows], demos, MMR_LAMBDA, no_threshold, banned)}
    if emb.image is not None:
        for key, block in (("image-similar", emb.image), ("text-similar", emb.text)):
            out[key] = similar_demos(block[q_rows], block[c_rows], demos, no_threshold, banned)
    return out


def load_retrievals(work: Path) -> dict:
    files = sorted((work / "retrieval").glob("*.json"))
    if not files:
        raise CurationError(f"{work}/retrieval holds no retrievals; run `mmctx retrieve` first")
    return {f.stem: json.loads(f.read_text()) for f in files}


def build_benchmark(samples: list[Sample], root: Path, retrievals: dict, name: str) -> Benchmark:
    """Queries with their demo keys, and every referenced sample once in the demo table."""
    by_id = {s.id: s for s in samples}
    queries, demo_ids = [], []
    for record in retrievals.values():
        for qid, keys in record["queries"].items():
            lists = {key: keys[key] for key in ("similar", "random", *EMBEDDING_LISTS) if key in keys}
            queries.append(by_id[qid].model_copy(update={"demo_keys": lists}))
            demo_ids += [d for ranked in lists.values() for d in ranked]
    demos = [by_id[d].model_copy(update={"demo_keys": {}}) for d in dict.fromkeys(demo_ids)]
    # The samples come from the user's own source folders, where image sets are often links to a
    # shared copy; saving copies the files, so the written benchmark holds no link.
    return Benchmark(
        name=name, queries=queries, demos=demos, root=root, description="curated by mmctx curate", confine_links=False
    )


@dataclass(frozen=True)
class GroupSummary:
    """One group's curation. ``demos`` is every distinct demo; ``similar_demos`` those some query
    takes as similar (the paper's Table 2 counts these), ``random_only_demos`` the rest."""

    group: str
    pool: int
    queries: int
    demos: int
    similar_demos: int
    random_only_demos: int
    lam: float
    rho: float
    excluded_near_duplicates: int
    similar_cosine: float
    random_cosine: float


def summarize(selections: dict, retrievals: dict) -> list[GroupSummary]:
    rows = []
    for name, sel in selections.items():
        ret = retrievals[name]["queries"]
        similar = {d for keys in ret.values() for d in keys["similar"]}
        demo_set = similar | {d for keys in ret.values() for d in keys["random"]}
        rows.append(
            GroupSummary(
                group=name,
                pool=sel["pool"],
                queries=len(sel["ids"]),
                demos=len(demo_set),
                similar_demos=len(similar),
                random_only_demos=len(demo_set - similar),
                lam=sel["lambda"],
                rho=sel["rho"],
                excluded_near_duplicates=retrievals[name]["excluded_near_duplicates"],
                similar_cosine=float(np.mean([c for k in ret.values() for c in k["similar_cosines"]])),
                random_cosine=float(np.mean([c for k in ret.values() for c in k["random_cosines"]])),
            )
        )
    return rows


def write_summary(work: Path, rows: list[GroupSummary], extra: dict | None = None) -> None:
    _write_json(work / "summary.json", {"groups": [asdict(r) for r in rows], **(extra or {})})


# ---- step 4: rationales ---------------------------------------------------------------------


def rationale_targets(bench: Benchmark, depth: int | None = MIN_DEMOS) -> list[Sample]:
    """The demos a CoT setting up to ``depth`` shots shows: the first ``depth`` similar demos of every
    query (all stored when None). A deeper CoT setting is refused at planning, naming the query,
    rather than reaching past the similar demos that have rationales."""
    if depth is not None and depth < 1:
        raise CurationError(f"rationale depth {depth}: at least 1 similar demo per query, or None for all")
    wanted = dict.fromkeys(k for q in bench.queries for k in q.demo_keys.get("similar", [])[:depth])
    return [bench.demo(k) for k in wanted]


def rationales_step(
    bench: Benchmark,
    source: str,
    work: Path,
    seed: int = 0,
    max_attempts: int = 3,
    retry_errors: bool = False,
    depth: int | None = MIN_DEMOS,
    **backend_kw,
) -> dict:
    """Fill the rationales of ``bench``'s CoT demos from ``source`` (``scene-graph`` or a model spec).

    A model's replies are kept in ``work/responses.sqlite`` (`BUILD_RESPONSES`) as they arrive: run
    again after a kill or a failure, the step asks only for what is not stored and writes the
    same rationales; ``retry_errors`` asks again for replies stored as errors. The returned
    counts then include ``model_calls``: replies ``from_store``, ``asked``, ``errors``.
    """
    from mmctx.curate.rationales import RationaleOutcome, apply_rationales, generate_rationales, summarize_outcomes
    from mmctx.models.store import ResponseStore, backend_secrets
    from mmctx.models.stored import BUILD_RESPONSES, StoredStats
    from mmctx.prompts.presets import get_preset

    targets = rationale_targets(bench, depth)
    calls = StoredStats()
    if source == "scene-graph":
        from mmctx.data.shapes import scene_rationale

        outcomes = []
        for s in targets:
            if "frames" not in s.meta:
                raise CurationError(
                    f"{s.id}: scene-graph rationales need a shapes-world sample (no scene graph in meta)"
                )
            outcomes.append(RationaleOutcome(s.id, "kept", 1, scene_rationale(s)))
    else:
        from mmctx.models import load_backend

        backend = load_backend(source, **backend_kw)
        work.mkdir(parents=True, exist_ok=True)
        with ResponseStore(work / BUILD_RESPONSES.name, secrets=backend_secrets(backend)) as store:
            outcomes = generate_rationales(
                targets, bench.root, backend, get_preset("fewmmbench"), seed, max_attempts,
                store=store, retry_errors=retry_errors, stats=calls,
            )  # fmt: skip
    bench.demos = apply_rationales(bench.demos, outcomes)
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "rationales.jsonl", "w", encoding="utf-8") as f:
        for o in outcomes:
            f.write(json.dumps(asdict(o), ensure_ascii=False, default=lambda r: r.model_dump()) + "\n")
    counts = {"source": source, **summarize_outcomes(outcomes)}
    if source != "scene-graph":
        counts["model_calls"] = {"from_store": calls.from_store, "asked": calls.asked, "errors": calls.errors}
    return counts


# ---- all steps ------------------------------------------------------------------------------

# Draws the curation figures from (embeddings, selections, retrievals, folder, projection) and
# returns the files written; the reporting layer brings it (`mmctx.reporting.curation`).
FiguresStep = Callable[[dict[str, Embeddings], dict, dict, Path, str], list[Path]]


@dataclass(frozen=True)
class CurateOptions:
    encoder: str | None  # None: `encoder_for` the pool (the reference CLIP for shapes-world)
    k: int = 250
    lam: float | str | None = None  # None: the paper's λ per task; "auto": n / (2k)
    convention: str = "paper"
    demos: int = DEMOS_PER_QUERY
    seed: int = 0
    retrieval: str = "joint"
    duplicate_cosine: float = DUPLICATE_COSINE
    rationales: str | None = None  # "scene-graph", a model spec, or None
    rationale_attempts: int = 3
    rationale_depth: int | None = MIN_DEMOS  # similar demos per query given rationales (None: every stored one)
    projection: str = "pca"
    figures: bool = True
    fewmmbench_layout: bool = True  # also write OUT/fewmmbench-layout, loadable by `datasets`


@dataclass
class CurateOutcome:
    benchmark: Benchmark
    groups: list[GroupSummary]
    rationales: dict | None
    figures: list[Path]
    duplicates: dict[str, list[str]] = field(default_factory=dict)  # id kept -> content duplicates dropped
    layout_left_out: dict[str, str] = field(default_factory=dict)  # id -> why the FewMMBench layout lacks it


def curate(
    pool: Path, out: Path, opts: CurateOptions, progress: bool = True, figures: FiguresStep | None = None
) -> CurateOutcome:
    """Curate a pool folder (or a benchmark folder's samples) into a benchmark at ``out``."""
    from mmctx.data.disk import load_pool

    samples, root = load_pool(pool)
    return curate_samples(samples, root, out, opts, progress, figures)


def curate_samples(
    samples: list[Sample],
    root: Path,
    out: Path,
    opts: CurateOptions,
    progress: bool = True,
    figures: FiguresStep | None = None,
) -> CurateOutcome:
    """Embed, select, retrieve, write rationales, and save the benchmark (and its FewMMBench layout).

    Figures are drawing, not curation: ``figures`` draws them into ``OUT/curation/figures`` when
    ``opts.figures`` is set (`mmctx.reporting.curation.figures_step`, which
    `mmctx.reporting.curation.curate` passes); without it none are drawn.
    """
    from mmctx.data.disk import save_benchmark
    from mmctx.data.sources.build import drop_content_duplicates

    # A missing --encoder is the first thing to say; the encoder used is what the summary records.
    opts = replace(opts, encoder=encoder_for(samples, opts.encoder))
    # A repeated record is one item: curated twice, it could be two queries, or its own demo.
    samples, duplicates = drop_content_duplicates(samples, root)
    check_pool(samples, opts.k, opts.demos)
    work = Path(out) / "curation"
    embeddings = embed_step(samples, root, work, opts.encoder, progress)
    selections = select_step(embeddings, work, opts.k, opts.lam, opts.convention)
    retrievals = retrieve_step(
        samples, root, embeddings, selections, work, opts.demos, opts.seed, opts.retrieval, opts.duplicate_cosine
    )
    bench = build_benchmark(samples, root, retrievals, name=Path(out).name)
    rationales = (
        rationales_step(bench, opts.rationales, work, opts.seed, opts.rationale_attempts, depth=opts.rationale_depth)
        if opts.rationales
        else None
    )
    bench.check()
    save_benchmark(bench, out)
    left_out: dict[str, str] = {}
    if opts.fewmmbench_layout:
        from mmctx.data.fewmmbench import layout_left_out, layout_lists, save_fewmmbench_layout

        left_out = layout_left_out(bench)
        save_fewmmbench_layout(layout_lists(bench), Path(out) / LAYOUT_DIR, skip_unsupported=True)
    drawn = (
        figures(embeddings, selections, retrievals, work / "figures", opts.projection)
        if opts.figures and figures is not None
        else []
    )
    groups = summarize(selections, retrievals)
    extra = {"options": asdict(opts), "rationales": rationales, "duplicates": duplicates, "layout_left_out": left_out}
    write_summary(work, groups, extra)
    return CurateOutcome(bench, groups, rationales, drawn, duplicates, left_out)
