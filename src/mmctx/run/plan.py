"""The plan: one request per query × setting × scorer, ordered query by query.

All requests of one query sit back to back, so the shared parts of their prompts (the
query's images and text) are processed close together. Planning renders every prompt and
checks everything that can be checked without a model — missing demos, demos without
rationales for CoT settings — so a bad record stops the run before any model is loaded.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, replace
from pathlib import Path

from mmctx.models.base import ModelInfo
from mmctx.models.keys import request_fingerprint, request_key
from mmctx.prompts.ablation import Ablation, AblationError
from mmctx.prompts.build import BuiltPrompt, PromptError, build_prompt, derived_seed, shown_options
from mmctx.prompts.messages import to_jsonable
from mmctx.prompts.presets import Preset
from mmctx.run.settings import CONTENT_FREE, Setting
from mmctx.run.strategies import StrategyError
from mmctx.schema import Benchmark, BenchmarkError, Problem, Sample

# A run's grey images (``-blank`` settings), inside its folder: its stored prompts point here.
BLANK_IMAGES = Path("images") / "blank"


@dataclass(frozen=True)
class GenerationLimits:
    """Generation limits per setting kind; part of every generate request's key."""

    max_new_tokens: int = 16
    cot_max_new_tokens: int = 512

    def limit(self, setting: Setting) -> int:
        return self.cot_max_new_tokens if setting.cot else self.max_new_tokens


# `mmctx demo` and the reference model cards: shorter CoT, to stay fast on a CPU, yet room for
# shapes-vlm's scene-graph rationales with their answer (about 100 tokens; 64 cut half of them).
DEMO_LIMITS = GenerationLimits(cot_max_new_tokens=128)


@dataclass(frozen=True)
class Fit:
    """How a request's prompt was fitted to a prompt budget (`mmctx.run.budget`); recorded with it."""

    max_prompt_tokens: int
    prompt_tokens: int  # the prompt as sent, counted by the model (images included)
    demos_dropped: tuple[str, ...] = ()  # the end of the demos' stored order (least similar), in that order


@dataclass(frozen=True)
class PlannedRequest:
    id: str  # "<setting>/<scorer>/<query id>"
    query_id: str
    task: str
    source: str
    format: str
    setting: str
    scorer: str
    prompt: BuiltPrompt
    max_new_tokens: int | None  # None for ppl
    position: int = 0  # place in the whole (unsharded) plan: merged shards keep plan order
    fit: Fit | None = None  # set in a run with a prompt budget
    # ``ppl-calibrated``: the fingerprint of its content-free request (`content_free_query`).
    content_free: str | None = None

    @property
    def call(self) -> str:
        """The model call it makes: ``generate``, or ``ppl`` for every option-ranking scorer."""
        return "generate" if self.scorer == "generate" else "ppl"

    @property
    def fingerprint(self) -> str:
        """Everything about the request that can change its response, except the model
        (`mmctx.models.keys.request_fingerprint`, as every stored model call is keyed). A
        ``ppl-calibrated`` request makes the ppl call of its setting, so the two share one response."""
        options = list(self.prompt.options.texts) if self.call == "ppl" else None
        return request_fingerprint(self.call, self.prompt.messages, self.max_new_tokens, options)

    def key(self, model: ModelInfo) -> str:
        return request_key(model, self.fingerprint)

    def record(self, model: ModelInfo) -> dict:
        """The JSON line written to ``requests.jsonl``: enough to score without the benchmark."""
        o = self.prompt.options
        return {
            "id": self.id,
            "position": self.position,
            "key": self.key(model),
            "query_id": self.query_id,
            "task": self.task,
            "source": self.source,
            "format": self.format,
            "setting": self.setting,
            "scorer": self.scorer,
            "options": list(o.texts),
            "labels": list(o.labels),
            "order": list(o.order),
            "gold": o.gold,
            "demo_ids": list(self.prompt.demo_ids),
            "max_new_tokens": self.max_new_tokens,
            "fingerprint": self.fingerprint,
            "prompt": to_jsonable(self.prompt.messages, with_paths=True),
            **(_fit_record(self.fit) if self.fit else {}),
            **({"content_free_key": request_key(model, self.content_free)} if self.content_free else {}),
        }


def _fit_record(fit: Fit) -> dict:
    return {
        "max_prompt_tokens": fit.max_prompt_tokens,
        "prompt_tokens_counted": fit.prompt_tokens,
        "demos_dropped": list(fit.demos_dropped),
    }


def plan_requests(
    bench: Benchmark,
    settings: list[Setting],
    scorers: list[str],
    preset: Preset,
    seed: int,
    limits: GenerationLimits,
    limit: int | None = None,
    tasks: list[str] | None = None,
    blank_dir: Path | None = None,
) -> list[PlannedRequest]:
    """Every request of the run, in execution order; raises `BenchmarkError` listing all problems.

    ``blank_dir``: where the grey images of ``-blank`` settings and of ``ppl-calibrated``'s
    content-free prompts are written (a run passes its own folder's `BLANK_IMAGES`); required
    only where those are planned.
    """
    if settings and scorers and not any(s.supports(scorer) for s in settings for scorer in scorers):
        raise ValueError(
            f"no setting of {[s.name for s in settings]} takes a scorer of {list(scorers)}, so the run would ask "
            "nothing: CoT settings are generation-only, and ppl-calibrated needs a setting without a vision modifier"
        )
    calibrated = "ppl-calibrated" in scorers and any(s.supports("ppl-calibrated") for s in settings)
    if (any(s.vision == "blank" for s in settings) or calibrated) and blank_dir is None:
        raise AblationError("blank settings and ppl-calibrated need a folder for their grey images: pass blank_dir")
    queries = [q for q in bench.queries if tasks is None or q.task in tasks]
    if limit is not None:
        queries = _first_per_task(queries, limit)
    requests: list[PlannedRequest] = []
    problems: list[Problem] = []
    for q in queries:
        for setting in settings:
            try:
                demos = choose_demos(bench, q, setting, preset, seed)
            except BenchmarkError as exc:
                problems.extend(exc.problems)
                continue
            for scorer in scorers:
                if not setting.supports(scorer):
                    continue
                try:
                    prompt = request_prompt(bench, q, demos, setting, scorer, preset, seed, blank_dir)
                except PromptError as exc:
                    problems.append(Problem("queries", q.id, f"setting {setting.name}", str(exc)))
                    continue
                planned = PlannedRequest(
                    id=f"{setting.name}/{scorer}/{q.id}",
                    query_id=q.id,
                    task=q.task,
                    source=q.source,
                    format=q.format,
                    setting=setting.name,
                    scorer=scorer,
                    prompt=prompt,
                    max_new_tokens=limits.limit(setting) if scorer == "generate" else None,
                )
                if scorer == "ppl-calibrated":
                    free = replace(
                        planned,
                        id=content_free_id(planned.id),
                        scorer=CONTENT_FREE,
                        prompt=request_prompt(bench, q, demos, setting, CONTENT_FREE, preset, seed, blank_dir),
                    )
                    requests.append(free)
                    planned = replace(planned, content_free=free.fingerprint)
                requests.append(planned)
    if problems:
        raise BenchmarkError(problems)
    return [replace(r, position=i) for i, r in enumerate(requests)]


# What stands for a query's text in its content-free prompt ("Calibrate Before Use", Zhao et al. 2021).
CONTENT_FREE_TEXT = "N/A"


def content_free_query(query: Sample) -> Sample:
    """``query`` with its content taken out: the question or statement reads "N/A"; its options
    stay (caption/foil items keep their captions: they are the options). Asked with the same demos
    in the same order and each query image grey (`request_prompt`), a model's option probabilities
    on it are its prior over the options, which ``ppl-calibrated`` divides out."""
    blank = {
        "question": CONTENT_FREE_TEXT if query.question else "",
        "statement": CONTENT_FREE_TEXT if query.statement else "",
        "context": "",
    }
    return query.model_copy(update=blank)


def request_prompt(
    bench: Benchmark, query: Sample, demos: list[Sample], setting: Setting, scorer: str, preset: Preset, seed: int,
    blank_dir: Path | None,
) -> BuiltPrompt:  # fmt: skip
    """The prompt of ``query`` under ``setting`` and ``scorer`` with ``demos`` (stored order: most
    similar first), shown in the order the setting names; `PromptError` if it cannot be built.
    The `CONTENT_FREE` scorer's prompt is that of `content_free_query`, its query images grey."""
    demos = list(demos)
    if setting.last:  # the most similar demo nearest the query
        demos.reverse()
    if setting.order:  # order sensitivity: the same demos, permuted per (seed, order, query)
        random.Random(derived_seed(seed, "demo-order", str(setting.order), query.id)).shuffle(demos)
    vision = setting.vision
    if scorer == CONTENT_FREE:
        query, vision = content_free_query(query), "blank"
    return build_prompt(
        query, demos, preset, setting.style(scorer), seed, bench.root,
        Ablation(vision, blank_dir), setting.option_order,
    )  # fmt: skip


def content_free_id(calibrated: str) -> str:
    """The id of the content-free request of the ``ppl-calibrated`` request ``calibrated``."""
    return calibrated.replace("/ppl-calibrated/", f"/{CONTENT_FREE}/", 1)


def calibrated_id(content_free: str) -> str:
    """The id of the ``ppl-calibrated`` request whose content-free request is ``content_free``."""
    return content_free.replace(f"/{CONTENT_FREE}/", "/ppl-calibrated/", 1)


def choose_demos(bench: Benchmark, query: Sample, setting: Setting, preset: Preset, seed: int) -> list[Sample]:
    """The demos ``setting``'s strategy picks for ``query``, stored order; `BenchmarkError` naming the list."""
    strategy = setting.strategy
    if strategy is None:
        return []

    def label_of(demo: Sample) -> str:  # the gold label the demo's answer reads in the prompt
        options = shown_options(demo, preset, seed)
        return options.labels[options.gold]

    field = f"demo_keys.{strategy.source_key}" + (f" ({strategy.name})" if strategy.name != strategy.source_key else "")
    ranked = bench.ranked_demos(query, strategy.source_key, setting.cot)
    if len(ranked) < setting.shots:  # more demos than the query stores: refused before any model call
        what = "demos with a rationale" if setting.cot else "demos"
        raise BenchmarkError([Problem("queries", query.id, field, f"needs {setting.shots} {what}, has {len(ranked)}")])
    try:
        return list(strategy.pick(query, ranked, setting.shots, label_of))
    except (StrategyError, PromptError) as exc:
        raise BenchmarkError([Problem("queries", query.id, field, str(exc))]) from None


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: the queries whose id hashes to it (stable across machines and orders)."""

    index: int
    count: int

    @classmethod
    def parse(cls, spec: str) -> Shard:
        try:
            i, n = (int(x) for x in spec.split("/"))
        except ValueError:
            raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {spec!r}") from None
        if not 0 <= i < n:
            raise ValueError(f"--shard {spec}: need 0 <= i < n")
        return cls(i, n)

    def holds(self, query_id: str) -> bool:
        digest = hashlib.sha256(query_id.encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def take_shard(plan: list[PlannedRequest], shard: Shard | None) -> list[PlannedRequest]:
    return plan if shard is None else [r for r in plan if shard.holds(r.query_id)]


def _first_per_task(queries, limit: int):
    """The first ``limit`` queries of each task, so a quick run still covers every task."""
    seen: dict[str, int] = {}
    kept = []
    for q in queries:
        if seen.get(q.task, 0) < limit:
            kept.append(q)
            seen[q.task] = seen.get(q.task, 0) + 1
    return kept
