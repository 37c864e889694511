"""Score a context-learning (CLBench-V) run from its stored responses: rule extraction, the
extractor model for free-form answers the rules miss, evaluators and judges.

Reads what `mmctx.run.context` stored (``requests.jsonl``, ``responses.sqlite``) and writes
``results.jsonl``, one verdict per item (see `mmctx.scoring.levels` for what reads it); judge
and extractor calls are cached in ``judges.sqlite``, keyed by their own model. Also the checks
a run needs before it asks anything (`evaluator_problems`, `check_judges`, `probe_all`) and the
judgement its format repair rests on (`repair_issue`), which the run receives as callables.

An item that failed validation is ``invalid_sample``; a response that failed for a too-long
prompt is ``context_overflow``; any other failure is ``error``. Neither is ever scored as a
wrong answer in disguise: each outcome is counted in the tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from mmctx.extract.prepare import strip_reasoning
from mmctx.jsonl import read_jsonl
from mmctx.models.base import Backend, ModelInfo
from mmctx.models.store import ResponseStore, backend_secrets
from mmctx.run.context import ContextRequest, task_format
from mmctx.run.files import JUDGE_STORE, MANIFEST, REQUESTS, RESULTS, STORE
from mmctx.run.manifest import read_manifest
from mmctx.run.runner import RunError, _failure, _write_atomic, run_lock
from mmctx.schema import Benchmark, Sample
from mmctx.scoring.evaluators import Evaluator, Verdict, get_evaluator
from mmctx.scoring.judging import JudgeRunner, JudgeUnavailable, probe

__all__ = [
    "JUDGE_STORE",
    "check_judges",
    "check_judges_for_run",
    "evaluator_problems",
    "format_issue",
    "probe_all",
    "repair_issue",
    "score_context_run",
]

_OVERFLOW = re.compile(r"context_overflow|context length|context_length_exceeded|maximum context|too many tokens", re.I)


def evaluator_problems(sample: Sample) -> list[str]:
    """Why ``sample`` cannot be scored: its evaluator is not registered (empty when it is)."""
    try:
        get_evaluator(sample.evaluator)
    except KeyError as exc:
        return [f"queries[{sample.id}].evaluator: {exc.args[0]}"]
    return []


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


def repair_issue(sample: Sample, text: str) -> str | None:
    """What a format repair for ``text`` names (`format_issue` with the item's evaluator), or None:
    readable, or the evaluator raised (the scoring pass records that cause, as ``invalid_sample``)."""
    try:
        return format_issue(get_evaluator(sample.evaluator), sample, text)
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
    manifest = read_manifest(run_dir).fields
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
