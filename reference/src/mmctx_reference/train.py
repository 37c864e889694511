"""Train both reference models from one seed, measure them, and write their model cards.

    metrics = train_reference(Path("src/mmctx/reference_models"), seed=0)

writes ``shapes-clip/`` and ``shapes-vlm/`` under the folder: ordinary ``save_pretrained``
checkpoints (safetensors, processor, chat template) with a ``README.md`` model card and a
``metrics.json`` each. The VLM is scored the way `mmctx run` scores any model, on the demo
benchmark (shapes-world, seed 0, `DEMO_QUERIES_PER_TASK` queries per task and format) and on
a larger held-out benchmark (seed `HELDOUT_BENCH_SEED`) for tighter intervals; next to it, the
untrained model of the same architecture (same tokenizer, same seed, no training), which must
stay at chance. Then the trained model is ranked by perplexity on a much larger benchmark
(seed `RANKING_BENCH_SEED`, `RANKING_QUERIES_PER_TASK` per task and format), and the card names
each task whose interval does not clear chance there. No benchmark seed is ever trained on (see
`mmctx_reference.vlm`).
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mmctx.models.shipped import CLIP_NAME, REFERENCE_MODELS, VLM_NAME, shipped

DEMO_QUERIES_PER_TASK = 4  # `mmctx demo`'s benchmark: build_benchmark(queries_per_task=4, seed=0)
DEMO_BENCH_SEED = 0
HELDOUT_QUERIES_PER_TASK = 200  # the card's held-out benchmark: per-task intervals of about ± 0.07 (± 0.14 at 50,
# too wide to tell a task near chance from chance)
HELDOUT_BENCH_SEED = 1
RANKING_QUERIES_PER_TASK = 1000  # the card's ranking check: intervals of about ± 0.03, fine enough to tell a task a
# few points above chance from chance (the held-out benchmark's ± 0.07 cannot)
RANKING_BENCH_SEED = 13  # never used while the recipe was developed, so the check is not tuned to it


def chance_by_task(bench) -> dict[str, float]:
    """Expected accuracy of a uniform guess, per task (the mean of 1/#options over its queries)."""
    out: dict[str, list[float]] = {}
    for q in bench.queries:
        out.setdefault(q.task, []).append(1 / len(q.choices))
    everything = [v for values in out.values() for v in values]
    return {**{t: sum(v) / len(v) for t, v in out.items()}, "Avg.": sum(everything) / len(everything)}


def score_settings(
    bench_dir: Path, model: str, run_dir: Path, settings: str = "0-shot", scorers: str = "generate,ppl"
) -> list[dict]:
    """Per (task, setting, scorer) accuracy with its 95% CI, as `mmctx run` computes it, on the CPU
    (zero-shot unless ``settings`` names others), with `mmctx demo`'s generation limits."""
    from mmctx.run.plan import DEMO_LIMITS
    from mmctx.tasks.fewshot import evaluate

    outcome = evaluate(
        bench_dir, model, run_dir, settings=settings, scorers=scorers, device="cpu", dtype="float32",
        show_progress=False, limits=DEMO_LIMITS,
    )  # fmt: skip
    return [
        {k: getattr(c, k) for k in ("task", "setting", "scorer", "n", "accuracy", "ci_low", "ci_high", "unparsed_rate")}
        for c in outcome.cells
    ]


def _cell(cells: list[dict], task: str, scorer: str, setting: str = "0-shot") -> dict | None:
    return next((c for c in cells if c["task"] == task and c["scorer"] == scorer and c["setting"] == setting), None)


def _fmt(cell: dict | None, digits: int = 2) -> str:
    if cell is None:
        return "—"
    a, lo, hi = (f"{cell[k]:.{digits}f}" for k in ("accuracy", "ci_low", "ci_high"))
    return f"{a} [{lo}, {hi}] (n={cell['n']})"


def _tasks(cells: list[dict]) -> list[str]:
    """The tasks in the order `mmctx run` reports them, "Avg." last (lists keep it in metrics.json; dicts do not)."""
    return [t for t in dict.fromkeys(c["task"] for c in cells) if t != "Avg."] + ["Avg."]


def score_table(trained: list[dict], untrained: list[dict], chance: dict[str, float]) -> str:
    """Markdown: per task, zero-shot generate and ppl accuracy of trained vs untrained, with CIs."""
    lines = [
        "| task | chance | generate, trained | generate, untrained | ppl, trained | ppl, untrained |",
        "|---|---|---|---|---|---|",
    ]
    for task in _tasks(trained):
        row = [task, f"{chance[task]:.2f}"]
        row += [_fmt(_cell(cells, task, scorer)) for scorer in ("generate", "ppl") for cells in (trained, untrained)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def grid_table(cells: list[dict]) -> str:
    """Markdown: average accuracy per setting and scorer over the whole grid."""
    settings = list(dict.fromkeys(c["setting"] for c in cells))
    lines = ["| setting | generate | ppl |", "|---|---|---|"]
    for s in settings:
        lines.append(f"| {s} | {_fmt(_cell(cells, 'Avg.', 'generate', s))} | {_fmt(_cell(cells, 'Avg.', 'ppl', s))} |")
    return "\n".join(lines)


def _margin(cells: list[dict], task: str, chance: dict[str, float], scorer: str = "ppl") -> float | None:
    """How far the zero-shot ``scorer`` interval's lower bound lies above chance (None: not scored)."""
    cell = _cell(cells, task, scorer)
    return None if cell is None else cell["ci_low"] - chance[task]


def tasks_not_above_chance(cells: list[dict], chance: dict[str, float], scorer: str = "ppl") -> list[str]:
    """The tasks whose zero-shot ``scorer`` interval does not lie wholly above chance."""
    tasks = [t for t in dict.fromkeys([*(c["task"] for c in cells), *chance]) if t != "Avg." and t in chance]
    return [t for t in tasks if not (_margin(cells, t, chance, scorer) or 0) > 0]


def ranking_section(m: dict, scores: dict, chance: dict) -> list[str]:
    """The card's ranking check: zero-shot perplexity ranking of the trained model on a large benchmark."""
    cells, chance = scores["ranking"]["trained"], chance["ranking"]
    lines = [
        "| task | chance | ppl, trained | lower bound − chance | interval above chance |",
        "|---|---|---|---|---|",
    ]
    margins = {task: _margin(cells, task, chance) for task in _tasks(cells)}
    for task, margin in margins.items():
        shown = "—" if margin is None else f"{margin:+.3f}"
        above = "yes" if (margin or 0) > 0 else "**no**"
        lines.append(f"| {task} | {chance[task]:.3f} | {_fmt(_cell(cells, task, 'ppl'), 3)} | {shown} | {above} |")
    short = tasks_not_above_chance(cells, chance)
    verdict = f"Not clear of chance: {', '.join(short)}." if short else "Every task's interval lies above chance."
    barely = [t for t, margin in margins.items() if t != "Avg." and t not in short and margin < 0.01]
    if barely:
        verdict += f" Clear of it by less than 0.01: {', '.join(barely)}."
    return [
        "",
        f"### Perplexity ranking at scale (shapes-world, seed {RANKING_BENCH_SEED}, "
        f"{m['ranking_queries_per_task']} queries per task and format; trained model)",
        "",
        "Whether perplexity ranking beats chance on every task, with intervals narrow enough to tell a few "
        "points from none. Reproduce with `mmctx shapes --out B --seed "
        f"{RANKING_BENCH_SEED} --benchmark --queries-per-task {m['ranking_queries_per_task']}` and "
        "`mmctx run B --model M --settings 0-shot --scorers ppl --out R`.",
        "",
        *lines,
        "",
        verdict,
    ]


def machine() -> str:
    import torch

    return f"{platform.machine()} CPU, {os.cpu_count()} cores visible, torch {torch.__version__} with {torch.get_num_threads()} threads"


def folder_megabytes(path: Path) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 1e6


def _curriculum(m: dict, part: str = "curriculum") -> str:
    """Stage 2's phases (``part``: ``"curriculum"``, or ``"restart"`` after it) in words: where its
    queries come from, and for which steps (`mixture_at`'s boundaries; past the last phase, the
    base mixture's sources)."""
    from mmctx_reference.vlm import phase_ends

    steps, offset = (m["steps"], 0) if part == "curriculum" else (m["restart_steps"], m["steps"])
    phases = [*(_phase(phase) for phase in m[part]), _phase({"until": 1.0, **m["mixture"]})]
    parts, start = [], 0
    for phase, end in zip(phases, phase_ends(steps, phases)):
        if end <= start:
            continue  # empty (a short run, or nothing past the last phase)
        if phase.drill >= 1:
            sources = f"only {', '.join(phase.drill_tasks)}"
        else:
            sources = f"{phase.focus:.0%} {', '.join(m['focus_tasks'])}"
            if phase.drill:
                sources += f", {phase.drill:.0%} {', '.join(phase.drill_tasks)}"
        parts.append(f"steps {offset + start + 1}–{offset + end}: {sources}")
        start = end
    return "; ".join(parts)


def _phase(fields: dict):
    """A `Phase` from its (or a mixture's) fields as metrics.json holds them."""
    from mmctx_reference.vlm import Phase

    return Phase(fields["until"], fields["focus"], fields["drill"], fields["drill_tasks"])


def _arrow_text(m: dict) -> str:
    """Stage 1's arrow ends, for the card: how it was taught them (where it was) and how often the
    image token says which shape an arrow starts and ends at."""
    text = ""
    if m.get("arrow_roles"):
        text += (
            " Two more patch classes name the shape of the object covering a patch if an arrow starts "
            "at it, and if one ends there."
        )
    if m.get("neighbour_layers"):
        shares = ", ".join(f"{a:.2f}" for a in m["neighbour_attention"])
        text += (
            f" Head 0 of the tower's {' and '.join(_ordinal(i) for i in m['neighbour_layers'])} layer"
            f"{'s' if len(m['neighbour_layers']) > 1 else ''} starts and is kept on each patch's 3 × 3 "
            f"neighbourhood (`look_at_neighbours`; after stage 1 it gives it {shares} of its attention), "
            "since where an arrow touches its object the patch hardly shows which end it is."
        )
    if m.get("arrow_share"):
        text += (
            f" The {m['arrow_scenes']} scenes with an arrow ({_share(m['arrow_scenes'] / m['vision_scenes'])} of "
            f"stage 1's) get {_share(m['arrow_share'])} of its draws (`arrow_scene_weights`)."
        )
    if m.get("arrow_sources_read") is not None:
        text += (
            f" Read back from the image tokens of held-out arrow scenes, the arrow's source is the joined shape "
            f"with more `arrow tail` in {_share(m['arrow_sources_read'])} of them and its target the one with "
            f"more `arrow head` in {_share(m['arrow_targets_read'])} (chance 50%)."
        )
    return text


def _ordinal(i: int) -> str:
    return ("first", "second", "third", "fourth")[i] if i < 4 else f"{i + 1}th"


def vlm_card(m: dict, scores: dict, chance: dict, grid: list[dict] | None) -> str:
    arch = m["architecture"]
    text = [
        "# shapes-vlm",
        "",
        "A tiny interleaved image-text-to-text model (`Idefics3ForConditionalGeneration`) trained by mmctx, on a CPU,",
        "on synthetic shapes-world conversations. It exists so that mmctx's offline demo measures something real;",
        "it knows nothing outside shapes-world. Load it like any hub model:",
        "`AutoModelForImageTextToText.from_pretrained(path)`, `AutoProcessor.from_pretrained(path)`,",
        "or `mmctx.models.load_backend(path)`.",
        "",
        "## Architecture",
        "",
        f"- Vision: SigLIP-style Idefics3 tower, {arch['vision_layers']} layers, width {arch['vision_hidden']}, "
        f"{arch['image_size']} px images in {arch['patch_size']} px patches; pixel shuffle ×{arch['scale_factor']} → "
        f"{arch['image_tokens']} token{'s' if arch['image_tokens'] != 1 else ''} an image (images are not split).",
        f"- Language: Llama, {arch['layers']} layers, width {arch['hidden']}, {arch['heads']} heads "
        f"({arch['kv_heads']} key/value), MLP {arch['intermediate']}; byte-level BPE of {m['vocab_size']} tokens "
        "trained on the prompt texts of the `fewmmbench` preset over shapes-world.",
        "- Chat template: Idefics3's (`User:<image>…<end_of_utterance>\\nAssistant: …`).",
        f"- Parameters: {m['parameters']:,}.",
        "",
        "## Training",
        "",
        f"- Data: a shapes-world benchmark built with seed {m['train_seed']} (= 3000 + seed {m['seed']}): "
        f"{m['train_queries']} queries with their random and similar demonstrations, {m['train_samples']} scenes in all. "
        "Evaluation benchmarks use seeds 0, 1, …: no evaluation scene is trained on.",
        f"- Stage 1, {m['vision_steps']} steps of {m['vision_batch']} images ({m['vision_scenes']} scenes: the "
        f"training benchmark's and {m['vision_pool_per_task']} more per task and format, pool seed {m['vision_seed']}, "
        f"less {m['vision_heldout_scenes']} of those held out): "
        f"the vision tower learns to classify each {m['architecture']['patch_size']}-px patch (the colour–shape "
        "pair, shape and size covering "
        f"most of it; cross-entropy), then for {m['linear_steps']} more steps also to make the scene features a "
        "linear function of its output (a linear head regressing them beside the cross-entropy), and a "
        "least-squares read-out of its patch states becomes the connector"
        + (
            " (except for positions: where a shape is comes from which of the connector's patch slots its share "
            "is in), "
            if m["architecture"]["image_tokens"] == 1
            else ", "
        )
        + f"so the image tokens carry the image's {m['scene_features']} scene features (how many objects of each "
        "colour–shape and size–shape pair, how many of each shape and where, the shapes arrows start and "
        "end at; each object counted once whatever its size) along "
        f"fixed directions, beside a constant of {m['image_constant']:g} that keeps counts from being "
        f"rescaled by the language model's norm. On {m['vision_heldout_scenes']} held-out scenes the tower names "
        "the colour–shape pair "
        f"of {_share(m['patch_accuracy'])} of covered patches ({_share(m['background_accuracy'])} of the others "
        "as uncovered); read back from the image tokens, the set of colour–shape pairs in an image is exactly "
        f"right for {_share(m['pair_sets_exact'])} of them." + _arrow_text(m) + " Both are frozen afterwards.",
        f"- Stage 2, {m['steps']} + {m['restart_steps']} steps of about {m['tokens_per_batch']} tokens, language model only: conversations "
        "rendered exactly as `mmctx run` renders them (preset `fewmmbench`, the processor's chat template), "
        f"{m['mixture']['zero_shot']:.0%} zero-shot (asking the training benchmark's queries and demonstrations and "
        f"the {m['zero_shot_extra']} scenes of stage 1's pool alike, so that scenes are not memorised), the "
        "rest with 1–8 random or similar demonstrations, prompts "
        "asking for a letter, the option's text or a rationale. The loss is on the query's reply, which is always "
        "the correct option's **text** (after the scene-graph rationale when CoT is asked for), never a letter: "
        "the extractor maps it to its option (rule `option_text`, or `answer_marker` after a rationale). "
        f"Where the queries come from ({_curriculum(m)}; the rest from every task): spatial relations stay on "
        "their plateau while they are a few percent of the queries, and were learnt after a stretch of them alone. "
        f"Then a restart, {m['restart_steps']} steps with a fresh optimiser at a constant learning rate and the "
        f"reply's loss alone ({_curriculum(m, 'restart')}; the rest from every task), whose zero-shot drilled "
        f"queries also ask {m['drill_scenes']} scenes of {', '.join(m['drill_scene_tasks'])} that stage 1 never saw "
        f"(pool seed {m['drill_seed']}): temporal stayed near chance without them, and commonsense stayed at chance "
        "even with them. "
        "Heads 0, 1 and 2 "
        "of the first layer start out attending to image tokens, shape words and colour words "
        f"(`look_at_images`, strength {m['image_prior']:g}; `look_at_words`, {m['word_prior']:g}), so the model "
        "does not idle on its no-information plateau; from there they are learnt like everything else. In "
        "zero-shot conversations an auxiliary loss (`WordGrounding`, weight "
        f"{m['grounding_weight']:g}, read-outs discarded after training) makes each shape or colour word's "
        f"hidden state after {_layers(m['grounded_layer'])} give what the image shows about it (a shape's colours, "
        "sizes, count, position and arrows; a colour's shapes), so the reply has something to fetch from "
        "the question's words." + _exact_ends_text(m),
        f"- AdamW, lr {m['lr']}, warm-up then cosine; the restart's a fresh AdamW at a constant {m['restart_lr']}; "
        f"`torch.manual_seed({m['seed']})` and seeded draws.",
        f"- Measured training time: {m['train_seconds']:.0f} s for both stages ({m['vision_seconds']:.0f} s stage 1); "
        f"{m['total_seconds']:.0f} s with data generation, on {m['machine']}.",
        "",
        "## Scores (zero-shot, measured with `mmctx run`)",
        "",
        "Accuracy with 95% confidence intervals; the untrained model has the same architecture, tokenizer and seed.",
        "",
        f"### Demo benchmark (shapes-world, seed {DEMO_BENCH_SEED}, {DEMO_QUERIES_PER_TASK} queries per task and format)",
        "",
        score_table(scores["demo"]["trained"], scores["demo"]["untrained"], chance["demo"]),
        "",
        f"### Held-out benchmark (shapes-world, seed {HELDOUT_BENCH_SEED}, {m['heldout_queries_per_task']} queries per task and format)",
        "",
        score_table(scores["heldout"]["trained"], scores["heldout"]["untrained"], chance["heldout"]),
    ]
    if "ranking" in scores:
        text += ranking_section(m, scores, chance)
    if grid:
        text += [
            "",
            "### Full settings grid on the demo benchmark (average over tasks)",
            "",
            "Whether demonstrations help this model is measured here, not assumed.",
            "",
            grid_table(grid),
        ]
    return "\n".join(text) + "\n"


def _layers(n: int) -> str:
    return "the first layer" if n == 1 else f"the first {n} layers"


def _exact_ends_text(m: dict) -> str:
    """Stage 2's training tokens, for the card, where their arrow ends were made exact."""
    if not m.get("exact_arrow_ends"):
        return ""
    return (
        " Stage 2's training tokens carry the scenes' exact arrow ends (`with_exact_arrow_ends`; the rest "
        "of each token is the tower's): on the tower's own, about half their size and noisy, it never learnt "
        "to use them. Evaluation, here and everywhere, sees the tower's own tokens only."
    )


def _share(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def clip_card(m: dict) -> str:
    r = m["retrieval"]
    return "\n".join(
        [
            "# shapes-clip",
            "",
            "A tiny `CLIPModel` trained by mmctx, on a CPU, contrastively on shapes-world image–text pairs; the",
            "default encoder for curating shapes-world. Load with `CLIPModel.from_pretrained(path)` or",
            "`mmctx.curate.embed.CLIPEncoder(path)`.",
            "",
            "## Architecture",
            "",
            f"- Vision and text towers of width {m['vision_hidden']} / {m['text_hidden']}, "
            f"{m['vision_layers']} / {m['text_layers']} layers, {m['image_size']} px images, projection {m['projection_dim']}; "
            "lower-casing byte-level BPE tokenizer.",
            f"- Parameters: {m['parameters']:,}.",
            "",
            "## Training",
            "",
            f"- Pairs: {m['train_pairs']} (image, correct statement) pairs of a shapes-world pool, seed {m['train_seed']}.",
            f"- {m['steps']} steps of {m['batch_size']} pairs, CLIP's symmetric contrastive loss, AdamW; seed {m['seed']}.",
            f"- Measured training time: {m['train_seconds']:.0f} s on {m['machine']}.",
            "",
            "## Scores",
            "",
            f"Image→text recall@1 among groups of {m['recall_candidates']} held-out pairs (seed {m['heldout_seed']}, "
            f"{m['heldout_pairs']} pairs): **{m['recall_at_1']:.3f}** trained, {m['recall_at_1_untrained']:.3f} untrained "
            f"(a uniform guess: {m['recall_chance']:.3f}; repeated captions count as hits).",
            "",
            "### Similar vs random demonstrations (FewMMBench Figure 7)",
            "",
            f"`mmctx curate` with this encoder on a held-out pool (seed {r['pool_seed']}, {r['pool']} samples) selected "
            f"{r['k']} queries per task and format and retrieved {r['demos']} similar and {r['demos']} random demos each. "
            "The encoder's own cosine always favours its similar demos; the scene-graph similarity (cosine of the "
            "scenes' shape/colour/size facts, defined without any encoder) says whether the retrieved scenes are "
            "really more alike.",
            "",
            "| encoder | cosine, similar | cosine, random | scene similarity, similar | scene similarity, random |",
            "|---|---|---|---|---|",
            *[
                f"| {name} | {r[name]['similar_cosine']:.3f} | {r[name]['random_cosine']:.3f} | "
                f"{r[name]['similar_scene']:.3f} | {r[name]['random_scene']:.3f} |"
                for name in ("trained", "untrained")
            ],
            "",
            "![Figure 7: query–demo cosine, similar vs random, per task](demo_similarity.png)",
            "",
        ]
    )


RETRIEVAL_POOL_PER_TASK = 40  # held-out pool the Figure 7 check curates (seed HELDOUT_SEED_BASE + seed)
RETRIEVAL_K, RETRIEVAL_DEMOS = 8, 4


def retrieval_check(encoders: dict[str, Path], work: Path, seed: int, figure: Path | None = None) -> dict:
    """Figure 7 with each encoder: curate one held-out shapes-world pool, compare similar with random demos.

    For each encoder (``{"trained": folder, "untrained": folder}``) the curation pipeline selects
    `RETRIEVAL_K` queries per task and format and retrieves `RETRIEVAL_DEMOS` similar and random
    demos. Reported per encoder: the mean encoder cosine of similar and random demos (what the
    paper's Figure 7 plots; similar wins by construction for any encoder) and the mean
    scene-graph similarity (`scene_similarity`), which no encoder defines: only an encoder that
    sees the scenes retrieves demos whose scenes are more alike. The trained encoder's Figure 7
    is copied to ``figure`` (PNG).
    """
    import shutil

    from mmctx.curate.pipeline import CurateOptions, load_retrievals
    from mmctx.data.shapes import generate_pool
    from mmctx.data.shapes.selection import scene_similarity
    from mmctx.reporting.curation import curate_samples
    from mmctx_reference.clip import HELDOUT_SEED_BASE

    root = Path(work) / "pool"
    samples = generate_pool(root, per_task=RETRIEVAL_POOL_PER_TASK, seed=HELDOUT_SEED_BASE + seed)
    by_id = {s.id: s for s in samples}
    out: dict = {
        "pool": len(samples),
        "pool_seed": HELDOUT_SEED_BASE + seed,
        "k": RETRIEVAL_K,
        "demos": RETRIEVAL_DEMOS,
    }
    for name, folder in encoders.items():
        # No near-duplicate cut-off (only the same image is excluded): an untrained encoder maps
        # every sample to almost the same point, and the comparison needs its demos too.
        opts = CurateOptions(
            encoder=f"clip:{folder}", k=RETRIEVAL_K, lam="auto", demos=RETRIEVAL_DEMOS, seed=seed, duplicate_cosine=1.01
        )
        outcome = curate_samples(samples, root, Path(work) / name, opts, progress=False)
        row: dict[str, list[float]] = {
            "similar_cosine": [],
            "random_cosine": [],
            "similar_scene": [],
            "random_scene": [],
        }
        for record in load_retrievals(Path(work) / name / "curation").values():
            for qid, q in record["queries"].items():
                for kind in ("similar", "random"):
                    row[f"{kind}_cosine"] += q[f"{kind}_cosines"]
                    row[f"{kind}_scene"] += [scene_similarity(by_id[qid], by_id[d]) for d in q[kind]]
        out[name] = {k: sum(v) / len(v) for k, v in row.items()}
        if figure is not None and name == "trained":
            found = [p for p in outcome.figures if p.name == "demo_similarity.png"]
            if found:
                shutil.copyfile(found[0], figure)
    return out


def _write(folder: Path, card: str, metrics: dict) -> None:
    (folder / "README.md").write_text(card, encoding="utf-8")
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _curve(losses: Sequence[float], points: int = 20) -> list[float]:
    """The loss curve as ``points`` window means (the full per-step list is not worth shipping)."""
    if not losses:
        return []
    size = max(1, len(losses) // points)
    return [round(sum(losses[i : i + size]) / len(losses[i : i + size]), 4) for i in range(0, len(losses), size)]


QUICK_CLIP = {"steps": 4, "pool_per_task": 12, "heldout_per_task": 6}
QUICK_VLM = {
    "steps": 4,
    "vision_steps": 4,
    "linear_steps": 2,
    "vision_batch": 8,
    "queries_per_task": 2,
    "pool_per_task": 10,
    "vision_pool_per_task": 1,
    "restart_steps": 2,
    "drill_scenes_per_task": 1,
}


QUICK_BANNER = "**Quick run (`--quick`): a few steps on tiny data; these scores mean nothing.**\n\n"


def train_clip_reference(out: Path, seed: int, progress: bool, quick: bool, options: dict) -> dict:
    """shapes-clip into ``out/shapes-clip``: trained, checked on retrieval (Figure 7), carded."""
    from transformers import CLIPConfig

    from mmctx.models.tiny import build_tiny_clip
    from mmctx_reference.clip import train_shapes_clip

    folder = Path(out) / CLIP_NAME
    clip = train_shapes_clip(folder, seed=seed, progress=progress, **options)
    config = CLIPConfig.from_pretrained(folder)
    clip.update(
        seed=seed,
        quick=quick,
        machine=machine(),
        path=CLIP_NAME,
        losses=_curve(clip["losses"]),
        vision_hidden=config.vision_config.hidden_size,
        text_hidden=config.text_config.hidden_size,
        vision_layers=config.vision_config.num_hidden_layers,
        text_layers=config.text_config.num_hidden_layers,
        image_size=config.vision_config.image_size,
        projection_dim=config.projection_dim,
    )
    with tempfile.TemporaryDirectory(prefix="mmctx-reference-retrieval-") as tmp:
        untrained = build_tiny_clip(Path(tmp) / "untrained-clip", seed=seed, image_size=clip["image_size"])
        encoders = {"trained": folder, "untrained": untrained}
        clip["retrieval"] = retrieval_check(encoders, Path(tmp), seed, figure=folder / "demo_similarity.png")
    _write(folder, (QUICK_BANNER if quick else "") + clip_card(clip), clip)
    return clip


def train_vlm_reference(
    out: Path,
    seed: int,
    progress: bool,
    quick: bool,
    grid: bool,
    heldout_queries: int,
    options: dict,
    ranking_queries: int = 0,
) -> dict:
    """shapes-vlm into ``out/shapes-vlm``: trained, scored against its untrained twin, carded."""
    from mmctx_reference.vlm import train_shapes_vlm

    folder = Path(out) / VLM_NAME
    vlm = train_shapes_vlm(folder, seed=seed, progress=progress, **options)
    for key in ("losses", "vision_losses", "grounding_losses"):
        vlm[key] = _curve(vlm[key])
    vlm.update(
        machine=machine(),
        path=VLM_NAME,
        quick=quick,
        heldout_queries_per_task=heldout_queries,
        ranking_queries_per_task=ranking_queries,
    )
    return score_vlm_reference(folder, vlm, grid)


def score_vlm_reference(folder: Path, vlm: dict, grid: bool) -> dict:
    """Score the trained shapes-vlm in ``folder`` against its untrained twin (same architecture,
    tokenizer and seed) on the demo and held-out benchmarks, and write its card and metrics.
    Where ``vlm["ranking_queries_per_task"]`` is set, also rank by perplexity on a benchmark that
    large (seed `RANKING_BENCH_SEED`; the trained model only).
    ``vlm`` is what training measured (as in its ``metrics.json``). Scoring is deterministic, so
    a checkpoint can be re-scored (after a change of scorer or limits) without retraining."""
    from transformers import AutoProcessor

    from mmctx.data.shapes import build_benchmark
    from mmctx_reference.vlm import Architecture, build_shapes_vlm

    folder, seed, quick = Path(folder), vlm["seed"], vlm["quick"]
    arch = Architecture(**{k: v for k, v in vlm["architecture"].items() if k != "image_tokens"})
    scores: dict = {}
    chance: dict = {}
    grid_cells = None
    with tempfile.TemporaryDirectory(prefix="mmctx-reference-eval-") as tmp:
        tmp = Path(tmp)
        untrained = build_shapes_vlm(tmp / "untrained", AutoProcessor.from_pretrained(folder).tokenizer, arch, seed)
        for name, bench_seed, per_task in (
            ("demo", DEMO_BENCH_SEED, DEMO_QUERIES_PER_TASK),
            ("heldout", HELDOUT_BENCH_SEED, vlm["heldout_queries_per_task"]),
        ):
            bench = build_benchmark(tmp / f"bench-{name}", queries_per_task=per_task, seed=bench_seed)
            chance[name] = chance_by_task(bench)
            scores[name] = {
                "trained": score_settings(bench.root, str(folder), tmp / f"run-{name}-trained"),
                "untrained": score_settings(bench.root, str(untrained), tmp / f"run-{name}-untrained"),
            }
        if vlm.get("ranking_queries_per_task"):
            n = vlm["ranking_queries_per_task"]
            bench = build_benchmark(tmp / "bench-ranking", queries_per_task=n, seed=RANKING_BENCH_SEED)
            chance["ranking"] = chance_by_task(bench)
            ranked = score_settings(bench.root, str(folder), tmp / "run-ranking", scorers="ppl")
            scores["ranking"] = {"trained": ranked}
        if grid:
            grid_cells = score_settings(tmp / "bench-demo", str(folder), tmp / "run-demo-grid", settings="all")
    vlm.update(scores=scores, chance=chance, grid=grid_cells)
    _write(folder, (QUICK_BANNER if quick else "") + vlm_card(vlm, scores, chance, grid_cells), vlm)
    return vlm


def train_reference(
    out: Path,
    seed: int = 0,
    progress: bool = True,
    grid: bool = True,
    quick: bool = False,
    only: str | None = None,
    clip_options: dict | None = None,
    vlm_options: dict | None = None,
) -> dict:
    """Train shapes-clip and shapes-vlm (or ``only`` one: ``"clip"`` / ``"vlm"``) from ``seed`` into
    ``out``, score them, and write their cards.

    ``grid`` also runs the full settings grid (few-shot, CoT) on the demo benchmark for the VLM card.
    ``quick`` checks the whole pipeline in about two minutes (a few steps on tiny data, a held-out
    benchmark of one query per task, no grid): its scores mean nothing, its cards say so, and it
    refuses to write over the shipped models. ``clip_options`` and ``vlm_options`` go to
    `train_shapes_clip` and `train_shapes_vlm`. Returns each model's metrics, ``training_seconds``
    (training alone), ``seconds`` in all and each folder's ``megabytes``.
    """
    if only not in (None, "clip", "vlm"):
        raise ValueError(f"--only takes clip or vlm, not {only!r}")
    out = Path(out)
    if quick and out.resolve() == REFERENCE_MODELS.resolve():
        raise ValueError("--quick writes meaningless models; it will not replace the shipped ones")
    if seed < 0:
        raise ValueError("the seed must be ≥ 0 (negative seeds would reach the benchmarks' seed range)")
    started = time.perf_counter()
    result: dict = {"training_seconds": 0.0, "megabytes": {}}
    if only in (None, "clip"):
        options = {**(QUICK_CLIP if quick else {}), **(clip_options or {})}
        result["clip"] = train_clip_reference(out, seed, progress, quick, options)
        result["training_seconds"] += result["clip"]["train_seconds"]
        result["megabytes"][CLIP_NAME] = folder_megabytes(out / CLIP_NAME)
    if only in (None, "vlm"):
        options = {**(QUICK_VLM if quick else {}), **(vlm_options or {})}
        heldout, ranking = (1, 1) if quick else (HELDOUT_QUERIES_PER_TASK, RANKING_QUERIES_PER_TASK)
        result["vlm"] = train_vlm_reference(
            out, seed, progress, quick, grid and not quick, heldout, options, ranking_queries=ranking
        )
        result["training_seconds"] += result["vlm"]["train_seconds"]
        result["megabytes"][VLM_NAME] = folder_megabytes(out / VLM_NAME)
    result["seconds"] = time.perf_counter() - started
    return result


__all__ = [
    "CLIP_NAME",
    "REFERENCE_MODELS",
    "VLM_NAME",
    "retrieval_check",
    "score_vlm_reference",
    "shipped",
    "train_clip_reference",
    "train_reference",
    "train_vlm_reference",
]
