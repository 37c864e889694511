"""Ask a context-learning (CLBench-V) suite: plan one generation per item, store each response,
ask once more in the required format where an answer cannot be read (format repair) — resumable
at every step. Scoring the stored responses (extraction, evaluators, judges) is
`mmctx.scoring.context`; the whole run, asking then scoring, is `mmctx.tasks.context.run_context`.

    RUN/
      manifest.json      model, suite, system prompt, limits, repair, truncation, judge, extractor
      requests.jsonl     one line per item: subset, level, evaluator, store key, rendered prompt text
      responses.sqlite   model responses: first attempts and repair attempts (both kept)
      judges.sqlite      extractor and judge calls, keyed by their own model (their own cache)
      results.jsonl      one verdict per item (see `mmctx.scoring.levels` for what reads it)

An item that fails validation (an empty rubric list, a missing context image) is never sent;
it is scored ``invalid_sample``. A response that failed for a too-long prompt is
``context_overflow``; any other failure is ``error``. Neither is ever scored as a wrong answer
in disguise: each outcome is counted in the tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import mmctx
from mmctx.data.clbench.suite import subset_or_none, table_level
from mmctx.models.base import Backend, GenerateRequest, Generation, ModelInfo, declared_concurrency
from mmctx.models.keys import request_key
from mmctx.models.store import ResponseStore, backend_secrets
from mmctx.prompts.context import (
    DEFAULT_SYSTEM,
    TaskFormat,
    build_context_prompt,
    repair_prompt,
    required_format,
    truncate_blocks,
)
from mmctx.prompts.messages import Prompt, prompt_fingerprint, render_text
from mmctx.run.files import REQUESTS, STORE
from mmctx.run.runner import RunError, _failure, _guarded, _progress, _write_atomic, open_run_manifest, pipelined
from mmctx.schema import Benchmark, Sample, validate_sample

# Bump when extraction, repair or evaluation changes what a stored response scores.
CONTEXT_SCORING_VERSION = "1"

# What the scoring layer says about an item or a response; the run asks, it does not judge.
ItemProblems = Callable[[Sample], list[str]]  # why an item cannot be scored at all (never sent)
FormatIssue = Callable[[Sample, str], "str | None"]  # why a response cannot be read (asks a repair)


@dataclass(frozen=True)
class ContextConfig:
    """The choices of a context run that can change its scores; written to the manifest."""

    suite: str
    suite_name: str
    suite_sha256: str
    system_prompt: str = DEFAULT_SYSTEM
    max_new_tokens: int = 1024
    repair: bool = False
    truncation: str = "none"
    truncation_budget: int | None = None
    tokenizer: str | None = None  # names the tokenizer truncation counted with
    subsets: list[str] | None = None
    limit: int | None = None
    batch_size: int = 8


@dataclass(frozen=True)
class ContextRequest:
    sample: Sample
    fmt: TaskFormat
    prompt: Prompt | None  # None: the item is invalid and is not sent
    problems: tuple[str, ...] = ()
    truncated_tokens: int = 0

    @property
    def id(self) -> str:
        return self.sample.id

    def key(self, model: ModelInfo, max_new_tokens: int) -> str:
        return _key(model, self.prompt, max_new_tokens) if self.prompt is not None else ""

    def record(self, model: ModelInfo, max_new_tokens: int) -> dict:
        s = self.sample
        return {
            "id": s.id,
            "subset": s.task,
            "level": s.level,
            "table_level": table_level(s.level, s.task),
            "evaluator": s.evaluator,
            "answer_type": s.answer_type,
            "key": self.key(model, max_new_tokens),
            "template": self.fmt.template,
            "suffix": self.fmt.suffix,
            "problems": list(self.problems),
            "truncated_tokens": self.truncated_tokens,
            "images": sum(len(m.images) for m in self.prompt) if self.prompt else len(s.context_images),
            "prompt_text": render_text(self.prompt) if self.prompt else "",
        }


def _key(model: ModelInfo, prompt: Prompt, max_new_tokens: int) -> str:
    """The store key of one context-run generation: the model's identity as every stored call
    keys it (`request_key`), with this run's own request body, unhashed, in place of the
    fingerprint (the form context runs were first stored under, kept so their stores replay)."""
    body = json.dumps({"prompt": prompt_fingerprint(prompt), "max_new_tokens": max_new_tokens}, sort_keys=True)
    return request_key(model, body)


def task_format(sample: Sample) -> TaskFormat:
    """The subset's template and suffix; a subset the registry lacks gets a plain template."""
    known = subset_or_none(sample.task)
    if known is not None:
        return TaskFormat(known.template, known.suffix, known.task_form)
    return TaskFormat("plain", "", sample.task)  # `suffix_key` gives it its answer type's instruction


def plan_context(
    bench: Benchmark,
    config: ContextConfig,
    count_tokens: Callable[[str], int] | None = None,
    item_problems: ItemProblems | None = None,
) -> list[ContextRequest]:
    """One request per item; invalid items are planned (so they are counted) but carry no prompt.

    An item is invalid when its record fails validation or ``item_problems`` names a problem
    (the context task passes `mmctx.scoring.context.evaluator_problems`: an evaluator that is
    not registered); without it only the record is checked.
    """
    unknown = [t for t in config.subsets or [] if t not in bench.tasks]
    if unknown:
        raise RunError(f"unknown subset(s) {unknown}; the suite has {bench.tasks}")
    samples = [q for q in bench.queries if not config.subsets or q.task in config.subsets]
    if config.limit is not None:
        samples = samples[: config.limit]
    if not samples:
        raise RunError("no items to run")
    if config.truncation != "none" and (count_tokens is None or not config.truncation_budget):
        raise RunError(f"truncation {config.truncation!r} needs a token budget and a tokenizer")
    plan = []
    for s in samples:
        fmt = task_format(s)
        problems = [str(p) for p in validate_sample(s, "queries", bench.root)]
        problems += item_problems(s) if item_problems is not None else []
        if problems:
            plan.append(ContextRequest(s, fmt, None, tuple(problems)))
            continue
        blocks, dropped = s.blocks, 0
        if config.truncation != "none":
            blocks, dropped = truncate_blocks(s.blocks, config.truncation_budget, count_tokens, config.truncation)
        prompt = build_context_prompt(s, bench.root, fmt, config.system_prompt or None, blocks)
        plan.append(ContextRequest(s, fmt, prompt, (), dropped))
    return plan


@dataclass
class ContextStats:
    planned: int = 0
    invalid: int = 0
    cached: int = 0
    done: int = 0
    errors: int = 0
    repairs_asked: int = 0
    repairs_cached: int = 0
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)


def manifest_for(config: ContextConfig, backend: Backend, judge: Backend | None, extractor: Backend | None) -> dict:
    return {
        "kind": "context",
        "mmctx_version": mmctx.__version__,
        "model": asdict(backend.info),
        "capabilities": asdict(backend.capabilities),
        "config": asdict(config),
        "judge": asdict(judge.info) if judge else None,
        "extractor": asdict(extractor.info) if extractor else None,
        "scoring_version": CONTEXT_SCORING_VERSION,
    }


def ask_context(
    plan: list[ContextRequest],
    backend: Backend,
    run_dir: Path,
    config: ContextConfig,
    *,
    format_issue: FormatIssue,
    judge: Backend | None = None,
    extractor: Backend | None = None,
    show_progress: bool = True,
    retry_errors: bool = False,
) -> ContextStats:
    """Write the manifest and ``requests.jsonl``, then send every planned prompt not yet stored
    and, with ``config.repair``, one repair for each stored answer ``format_issue`` cannot read.

    The judge and the extractor are recorded in the manifest (and their secrets kept out of the
    store); they are not called here. The caller holds the run folder (`run_lock`).
    """
    limit = config.max_new_tokens
    open_run_manifest(run_dir, manifest_for(config, backend, judge, extractor), ("judge", "extractor"))
    lines = [json.dumps(r.record(backend.info, limit), ensure_ascii=False) for r in plan]
    _write_atomic(run_dir / REQUESTS, "\n".join(lines) + "\n")
    stats = ContextStats(planned=len(plan), invalid=sum(1 for r in plan if r.prompt is None))
    with ResponseStore(run_dir / STORE, secrets=backend_secrets(backend, judge, extractor)) as store:
        if retry_errors:
            store.delete_errors()
        valid = [r for r in plan if r.prompt is not None]
        first = [(r.id, r.key(backend.info, limit), r.prompt) for r in valid]
        stats.cached, stats.done, stats.errors = _generate(first, "generate", backend, store, config, show_progress)
        if config.repair:
            stored = store.get_all()
            asks = []
            for r in valid:
                response = stored.get(r.key(backend.info, limit))
                ask = _repair_request(r, response, backend.info, limit, format_issue)
                if ask is not None:
                    asks.append(ask)
            stats.repairs_asked = len(asks)
            stats.repairs_cached, done, errors = _generate(asks, "repair", backend, store, config, show_progress)
            stats.done += done
            stats.errors += errors
    return stats


def _generate(
    asks: list[tuple[str, str, Prompt]],
    kind: str,
    backend: Backend,
    store: ResponseStore,
    config: ContextConfig,
    show: bool,
) -> tuple[int, int, int]:
    """Send every ask whose key is not stored, a batch per call, committing each batch as it
    finishes; batches overlap up to the backend's declared concurrency (`pipelined`)."""
    stored = store.keys()
    pending = [a for a in asks if a[1] not in stored]
    batches = [pending[start : start + config.batch_size] for start in range(0, len(pending), config.batch_size)]

    def run(batch: list[tuple[str, str, Prompt]]) -> list[tuple]:
        requests = [GenerateRequest(p, config.max_new_tokens) for _, _, p in batch]
        outs = _guarded(backend.generate, requests, lambda exc: Generation(error=_failure(exc)))
        rows = []
        for (rid, key, _), g in zip(batch, outs):
            payload = {
                "text": g.text,
                "prompt_tokens": g.prompt_tokens,
                "output_tokens": g.output_tokens,
                "truncated": g.truncated,
            }
            rows.append((key, rid if kind == "generate" else f"{rid}/repair", kind, payload, g.error))
        return rows

    done = errors = 0
    with _progress(show) as progress:
        task = progress.add_task(f"{len(pending)} {kind} requests", total=len(pending))
        for batch, rows in pipelined(batches, run, declared_concurrency(backend)):
            store.put_many(rows)
            done += len(rows)
            errors += sum(1 for r in rows if r[4])
            progress.update(task, advance=len(batch))
    return len(asks) - len(pending), done, errors


def _repair_request(r: ContextRequest, response: dict | None, model: ModelInfo, limit: int, format_issue: FormatIssue):
    """The repair ask for an unparsed first response, or None (parsed, failed, or not stored)."""
    if response is None or response.get("error"):
        return None
    issue = format_issue(r.sample, response["text"])
    if issue is None:
        return None
    prompt = repair_prompt(r.prompt, response["text"], r.fmt.task, issue, required_format(r.fmt, r.sample.answer_type))
    return (r.id, _key(model, prompt, limit), prompt)
