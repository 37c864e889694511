"""Run a context-learning (CLBench-V) suite: one generation per item, format repair, extraction,
evaluation, judges — resumable at every step.

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

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import mmctx
from mmctx.data.clbench.suite import subset_or_none, table_level
from mmctx.extract.prepare import strip_reasoning
from mmctx.jsonl import read_jsonl
from mmctx.models.base import Backend, GenerateRequest, Generation, ModelInfo
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
from mmctx.run.files import MANIFEST, REQUESTS, RESULTS, STORE
from mmctx.run.runner import RunError, _failure, _guarded, _progress, _write_atomic, open_run_manifest, run_lock
from mmctx.schema import Benchmark, Sample, validate_sample
from mmctx.scoring.evaluators import Evaluator, Verdict, get_evaluator

JUDGE_STORE = "judges.sqlite"
# Bump when extraction, repair or evaluation changes what a stored response scores.
CONTEXT_SCORING_VERSION = "1"

_OVERFLOW = re.compile(r"context_overflow|context length|context_length_exceeded|maximum context|too many tokens", re.I)

# Templates for subsets the registry does not know, by answer type.


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
    ident = json.dumps(
        {"model": model.name, "revision": model.revision, "backend": model.backend, "settings": model.settings},
        sort_keys=True,
    )
    body = json.dumps({"prompt": prompt_fingerprint(prompt), "max_new_tokens": max_new_tokens}, sort_keys=True)
    return hashlib.sha256(f"{ident}\n{body}".encode()).hexdigest()


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
) -> list[ContextRequest]:
    """One request per item; invalid items are planned (so they are counted) but carry no prompt."""
    samples = [q for q in bench.queries if not config.subsets or q.task in config.subsets]
    if config.limit is not None:
        samples = samples[: config.limit]
    if not samples:
        raise RunError("no items to run (check --subset names)")
    if config.truncation != "none" and (count_tokens is None or not config.truncation_budget):
        raise RunError(f"truncation {config.truncation!r} needs a token budget and a tokenizer")
    plan = []
    for s in samples:
        fmt = task_format(s)
        problems = [str(p) for p in validate_sample(s, "queries", bench.root)]
        problems += _evaluator_problems(s)
        if problems:
            plan.append(ContextRequest(s, fmt, None, tuple(problems)))
            continue
        blocks, dropped = s.blocks, 0
        if config.truncation != "none":
            blocks, dropped = truncate_blocks(s.blocks, config.truncation_budget, count_tokens, config.truncation)
        prompt = build_context_prompt(s, bench.root, fmt, config.system_prompt or None, blocks)
        plan.append(ContextRequest(s, fmt, prompt, (), dropped))
    return plan


def _evaluator_problems(sample: Sample) -> list[str]:
    try:
        get_evaluator(sample.evaluator)
    except KeyError as exc:
        return [f"queries[{sample.id}].evaluator: {exc.args[0]}"]
    return []


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


def run_context(
    bench: Benchmark,
    backend: Backend,
    run_dir: Path,
    config: ContextConfig,
    judge: Backend | None = None,
    extractor: Backend | None = None,
    count_tokens: Callable[[str], int] | None = None,
    show_progress: bool = True,
    retry_errors: bool = False,
) -> ContextStats:
    """Plan, check, generate (and repair), then score into ``results.jsonl``.

    The run folder is held throughout (`run_lock`): a second process on it is refused at once.
    """
    run_dir = Path(run_dir)
    with run_lock(run_dir):
        return _run_context(
            bench, backend, run_dir, config, judge, extractor, count_tokens, show_progress, retry_errors
        )


def _run_context(
    bench: Benchmark,
    backend: Backend,
    run_dir: Path,
    config: ContextConfig,
    judge: Backend | None,
    extractor: Backend | None,
    count_tokens: Callable[[str], int] | None,
    show_progress: bool,
    retry_errors: bool,
) -> ContextStats:
    started = time.perf_counter()
    plan = plan_context(bench, config, count_tokens)
    check_judges(plan, judge)
    probe_all(judge, extractor)
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
                ask = _repair_request(r, response, backend.info, limit)
                if ask is not None:
                    asks.append(ask)
            stats.repairs_asked = len(asks)
            stats.repairs_cached, done, errors = _generate(asks, "repair", backend, store, config, show_progress)
            stats.done += done
            stats.errors += errors
    rows = score_context_run(run_dir, bench, judge=judge, extractor=extractor)
    for row in rows:
        stats.outcomes[row["outcome"]] = stats.outcomes.get(row["outcome"], 0) + 1
    stats.seconds = time.perf_counter() - started
    return stats


def _generate(
    asks: list[tuple[str, str, Prompt]],
    kind: str,
    backend: Backend,
    store: ResponseStore,
    config: ContextConfig,
    show: bool,
) -> tuple[int, int, int]:
    """Send every ask whose key is not stored, a batch at a time, committing each batch."""
    stored = store.keys()
    pending = [a for a in asks if a[1] not in stored]
    done = errors = 0
    with _progress(show) as progress:
        task = progress.add_task(f"{len(pending)} {kind} requests", total=len(pending))
        for start in range(0, len(pending), config.batch_size):
            batch = pending[start : start + config.batch_size]
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
            store.put_many(rows)
            done += len(rows)
            errors += sum(1 for r in rows if r[4])
            progress.update(task, advance=len(batch))
    return len(asks) - len(pending), done, errors


def _repair_request(r: ContextRequest, response: dict | None, model: ModelInfo, limit: int):
    """The repair ask for an unparsed first response, or None (parsed, failed, or not stored)."""
    if response is None or response.get("error"):
        return None
    issue = _issue_or_error(get_evaluator(r.sample.evaluator), r.sample, response["text"])
    if issue is None:
        return None
    prompt = repair_prompt(r.prompt, response["text"], r.fmt.task, issue, required_format(r.fmt, r.sample.answer_type))
    return (r.id, _key(model, prompt, limit), prompt)


def format_issue(evaluator: Evaluator, sample: Sample, text: str) -> str | None:
    """Why ``text`` cannot be evaluated as given (what the repair prompt names), or None if it can.

    Unparsed means the rules found no answer, or — for a rule evaluator — found a span that is
    not an answer of the required kind (words where a number was asked).
    """
    found = evaluator.extract(sample, text)
    if not found.parsed:
        return found.issue or "no final answer in the required format"
    if evaluator.judge is None:
        verdict = evaluator.score(sample, found.answer)
        if verdict.outcome == "unparsed":
            return str(verdict.detail.get("reason") or "the answer is not in the required form")
    return None


def _issue_or_error(evaluator: Evaluator, sample: Sample, text: str) -> str | None:
    """`format_issue`, with an evaluator that raises read as "cannot be evaluated" (scored later as invalid)."""
    try:
        return format_issue(evaluator, sample, text)
    except Exception:  # noqa: BLE001 - the scoring pass records the cause on the item
        return None


def check_judges(plan: list[ContextRequest], judge: Backend | None) -> None:
    """Refuse a run whose evaluators cannot decide without a judge when none is configured."""
    if judge is not None:
        return
    needing = sorted(
        {
            r.sample.task
            for r in plan
            if getattr(get_evaluator(r.sample.evaluator), "requires_judge", False) and r.prompt is not None
        }
    )
    if needing:
        raise RunError(f"subsets {needing} are scored by an LLM judge: pass --judge MODEL (e.g. openai:<model>@<url>)")


def probe_all(judge: Backend | None, extractor: Backend | None) -> None:
    from mmctx.scoring.judging import JudgeUnavailable, probe

    for role, backend in (("judge", judge), ("extractor", extractor)):
        if backend is not None:
            try:
                probe(backend)
            except JudgeUnavailable as exc:
                raise RunError(f"the {role} {backend.info.name!r} is configured but unreachable: {exc}") from None


def score_context_run(
    run_dir: Path,
    bench: Benchmark,
    judge: Backend | None = None,
    extractor: Backend | None = None,
    out: Path | None = None,
) -> list[dict]:
    """Score the stored responses of a run into ``results.jsonl`` (or ``out``); returns the rows.

    Holds the run folder (`run_lock`): scoring writes the judge store and the manifest.
    """
    run_dir = Path(run_dir)
    with run_lock(run_dir):
        return _score_context_run(run_dir, bench, judge, extractor, out)


def _score_context_run(
    run_dir: Path, bench: Benchmark, judge: Backend | None, extractor: Backend | None, out: Path | None
) -> list[dict]:
    from mmctx.scoring.judging import JudgeRunner

    manifest = json.loads((run_dir / MANIFEST).read_text())
    model = ModelInfo(**manifest["model"])
    by_id = {q.id: q for q in bench.queries}
    records = read_jsonl(run_dir / REQUESTS)
    with ResponseStore(run_dir / STORE) as store:
        stored = store.get_all()
        repair_by_id = _repair_responses(store) if manifest["config"].get("repair") else {}
    with ResponseStore(run_dir / JUDGE_STORE, secrets=backend_secrets(judge, extractor)) as jstore:
        extractor_runner = JudgeRunner(extractor, jstore) if extractor else None
        judge_runner = JudgeRunner(judge, jstore) if judge else None
        staged = [_first_pass(rec, by_id.get(rec["id"]), stored, repair_by_id) for rec in records]
        _extract_with_model(staged, extractor_runner)
        _judge(staged, judge_runner)
    rows = [_row(st, model, judge) for st in staged]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    _write_atomic(Path(out) if out else run_dir / RESULTS, text)
    if out is None:
        # The manifest names the judge and extractor the run's results.jsonl was scored with.
        scored_with = {
            "judge": asdict(judge.info) if judge else None,
            "extractor": asdict(extractor.info) if extractor else None,
        }
        if any(manifest.get(k) != v for k, v in scored_with.items()):
            _write_atomic(run_dir / MANIFEST, json.dumps({**manifest, **scored_with}, indent=2) + "\n")
    return rows


def _repair_responses(store: ResponseStore) -> dict[str, dict]:
    """Stored repair responses by item id.

    Read by request id rather than rebuilt from the prompt: a truncated prompt could only be
    rebuilt with its tokenizer. One run folder holds one model and one configuration (the
    manifest check), and a first response is stored once, so an item has one repair at most.
    """
    return {rid.removesuffix("/repair"): r for rid, r in store.by_kind("repair").items()}


@dataclass
class _Staged:
    record: dict
    sample: Sample | None
    evaluator: Evaluator | None
    response: dict | None
    verdict: Verdict | None = None
    answer: str | None = None
    extracted_by: str = ""
    repaired: bool = False
    issue: str = ""
    final_text: str = ""


def _first_pass(rec: dict, sample: Sample | None, stored: dict, repairs: dict) -> _Staged:
    if sample is None:
        raise RunError(f"item {rec['id']!r} of the run is not in the suite given; score with the suite it ran on")
    if rec["problems"]:
        return _Staged(rec, sample, None, None, Verdict.failed("invalid_sample", "; ".join(rec["problems"])))
    evaluator = get_evaluator(sample.evaluator)
    response = stored.get(rec["key"])
    st = _Staged(rec, sample, evaluator, response)
    if response is None:
        st.verdict = Verdict.failed("error", "no stored response (the run did not finish); resume it")
        return st
    if response.get("error"):
        outcome = "context_overflow" if _OVERFLOW.search(response["error"]) else "error"
        st.verdict = Verdict.failed(outcome, response["error"])
        return st
    st.final_text = strip_reasoning(response["text"])
    try:
        found = evaluator.extract(sample, response["text"])
        repair = repairs.get(rec["id"])
        if repair is not None and not repair.get("error") and format_issue(evaluator, sample, repair["text"]) is None:
            # A repair was asked only because the first answer could not be evaluated; use it if it can.
            found, st.repaired = evaluator.extract(sample, repair["text"]), True
            st.final_text = strip_reasoning(repair["text"])
    except Exception as exc:  # noqa: BLE001 - see _evaluator_failed
        st.verdict = _evaluator_failed(sample, exc)
        return st
    st.answer, st.extracted_by, st.issue = found.answer, found.rule, found.issue
    return st


def _extract_with_model(staged: list[_Staged], runner) -> None:
    """Free-form answers the rules could not find go to the extractor model, if one is configured."""
    asks = [st for st in staged if st.verdict is None and st.answer is None and st.evaluator.free_form]
    if runner is None or not asks:
        return
    typed = [bool(getattr(st.evaluator, "typed_extraction", False)) for st in asks]
    found = runner.extract([(st.sample.question, st.final_text, t) for st, t in zip(asks, typed)])
    for st, ex in zip(asks, found):
        if ex.parsed:
            st.answer, st.extracted_by = ex.answer, f"{ex.rule}@{runner.backend.info.name}"
        else:
            st.issue = ex.issue or st.issue


def _judge(staged: list[_Staged], runner) -> None:
    for st in staged:
        if st.verdict is None and st.answer is None:
            st.verdict = Verdict.failed("unparsed", st.issue or "no answer found")
    by_judge: dict[str, list[_Staged]] = {}
    for st in staged:
        if st.verdict is not None:
            continue
        judge = st.evaluator.judge
        if judge is None or runner is None:
            st.verdict = _guarded_verdict(lambda st=st: st.evaluator.score(st.sample, st.answer), st.sample)
        else:
            by_judge.setdefault(judge.name, []).append(st)
    for group in by_judge.values():
        verdicts = runner.judge(group[0].evaluator.judge, [(st.sample, st.answer) for st in group])
        for st, v in zip(group, verdicts):
            st.verdict = v


def _guarded_verdict(decide: Callable[[], Verdict], sample: Sample) -> Verdict:
    """An evaluator that raises on an item is the item's fault (gold of an unexpected shape):
    the item is ``invalid_sample`` with the cause, and the rest of the run is still scored."""
    try:
        return decide()
    except Exception as exc:  # noqa: BLE001 - recorded on the item, never swallowed
        return _evaluator_failed(sample, exc)


def _evaluator_failed(sample: Sample, exc: Exception) -> Verdict:
    return Verdict.failed("invalid_sample", f"evaluator {sample.evaluator!r} failed on this item: {_failure(exc)}")


def _row(st: _Staged, model: ModelInfo, judge: Backend | None) -> dict:
    rec, v = st.record, st.verdict
    response = st.response or {}
    judged = judge is not None and st.evaluator is not None and st.evaluator.judge is not None
    return {
        "id": rec["id"],
        "subset": rec["subset"],
        "level": rec["level"],
        "table_level": rec["table_level"],
        "evaluator": rec["evaluator"],
        "answer_type": rec["answer_type"],
        "outcome": v.outcome,
        "score": v.score,
        "prediction": v.prediction or (st.answer or ""),
        "extracted_by": st.extracted_by,
        "repaired": st.repaired,
        "detail": v.detail,
        "judge": judge.info.name if judged else None,
        "prompt_tokens": response.get("prompt_tokens") or None,
        "images": rec["images"],
        "truncated_tokens": rec.get("truncated_tokens", 0),
        "model": model.name,
        "response": response.get("text", ""),
        "gold": st.sample.answer if st.sample else "",
    }


def check_judges_for_run(run_dir: Path, bench: Benchmark, judge: Backend | None) -> None:
    """`check_judges` for a stored run: its planned items, re-read from ``requests.jsonl``."""
    by_id = {q.id: q for q in bench.queries}
    records = read_jsonl(Path(run_dir) / REQUESTS)
    plan = [
        ContextRequest(by_id[r["id"]], task_format(by_id[r["id"]]), () if not r["problems"] else None)
        for r in records
        if r["id"] in by_id
    ]
    check_judges(plan, judge)
