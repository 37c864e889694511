"""CoT rationales for demonstrations, with gold-answer injection and a quality filter.

For each demo a CoT setting will show, a model (any mmctx backend) is asked for a step-by-step
explanation ending in ``Answer: <letter>``. If the answer it reaches is wrong, or the
explanation is missing, cut by the token limit, too short or its final answers contradict each
other, the gold answer is injected and the model asked again, up to ``max_attempts`` in all.
A rationale is kept only if its final answer line names the gold option and its reasoning is
well formed; every other demo is marked and left without a rationale, so CoT settings skip it
(and the count is reported). Reasoning traces (``<think>``, ``<thinking>``, ``<reasoning>``,
... as :mod:`mmctx.reasoning` defines them) are dropped before judging and never become part
of a rationale.

Every call goes through a `StoredBackend`: with a `ResponseStore` (the curation folder's
``responses.sqlite``, see `mmctx.curate.pipeline.rationales_step`) each reply is committed as
its batch returns, so a killed run started again asks only for what is not stored and writes
the same rationales. A backend that fails on one demo makes that demo's outcome ``error``; the
others are kept. A later attempt renders the same prompt as the one before it (the gold answer
is injected from attempt 2 on), so the attempt number is part of its key: a re-ask is a new
call, as it would be without the store.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mmctx.extract import extract_choice
from mmctx.models.base import Backend, GenerateRequest
from mmctx.models.keys import generate_key
from mmctx.models.store import ResponseStore
from mmctx.models.stored import StoredBackend, StoredCall, StoredStats
from mmctx.prompts.build import ShownOptions
from mmctx.prompts.presets import Preset
from mmctx.prompts.rationale import rationale_prompt
from mmctx.reasoning import strip_traces
from mmctx.schema import Rationale, Sample

_ANSWER_LINE = re.compile(r"\n?[^\n]*\banswer\s*[:：][^\n]*\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class RationaleOutcome:
    sample_id: str
    status: str  # kept | wrong_answer | no_answer_line | contradictory | truncated | too_short | error
    attempts: int
    rationale: Rationale | None = None
    last_response: str = ""


def judge_response(text: str, truncated: bool, shown: ShownOptions, min_words: int) -> tuple[str, str]:
    """``(status, reasoning)`` of one response: ``kept`` only when it is complete and right."""
    if truncated:
        return "truncated", ""
    # A reasoning trace (any tag form, closed or not) is the model's scratch work, never part
    # of the rationale a demonstration shows.
    text = strip_traces(text).strip()
    found = extract_choice(text, list(shown.texts), list(shown.labels))
    if found.rule == "contradictory":
        return "contradictory", ""  # "Answer: A ... Answer: B": no final answer to demonstrate
    if found.rule != "answer_marker" or not _ANSWER_LINE.search(text):
        return "no_answer_line", ""
    if found.index != shown.gold:
        return "wrong_answer", ""
    reasoning = _ANSWER_LINE.sub("", text).strip()
    if len(reasoning.split()) < min_words:
        return "too_short", ""
    return "kept", reasoning


def generate_rationales(
    samples: list[Sample],
    root: Path,
    backend: Backend,
    preset: Preset,
    seed: int = 0,
    max_attempts: int = 3,
    max_new_tokens: int = 256,
    min_words: int = 5,
    store: ResponseStore | None = None,
    retry_errors: bool = False,
    stats: StoredStats | None = None,
) -> list[RationaleOutcome]:
    """One outcome per sample, in order; attempt 1 asks plainly, later attempts inject the gold answer.

    ``store`` keeps every reply (None: kept in memory for this call only); ``retry_errors``
    asks again for replies stored as errors. ``stats``, if given, is filled with how many
    replies came from the store and how many were asked.
    """
    own = store is None
    store = ResponseStore(Path(":memory:")) if own else store
    try:
        stored = StoredBackend(backend, store, KIND, retry_errors=retry_errors)
        outcomes = _rationale_rounds(samples, root, stored, preset, seed, max_attempts, max_new_tokens, min_words)
    finally:
        if own:
            store.close()
    if stats is not None:
        stats.add(stored.stats)
    return outcomes


KIND = "rationale"  # the store's ``kind`` column for rationale replies


def _rationale_rounds(
    samples: list[Sample],
    root: Path,
    backend: StoredBackend,
    preset: Preset,
    seed: int,
    max_attempts: int,
    max_new_tokens: int,
    min_words: int,
) -> list[RationaleOutcome]:
    outcomes: dict[str, RationaleOutcome] = {}
    pending = list(samples)
    for attempt in range(1, max_attempts + 1):
        if not pending:
            break
        prompts = [rationale_prompt(s, preset, seed, root, inject=attempt > 1) for s in pending]
        calls = []
        for sample, (messages, _) in zip(pending, prompts):
            request = GenerateRequest(messages, max_new_tokens)
            key = generate_key(backend.info, request, attempt)
            calls.append(StoredCall(request, f"{sample.id}/attempt-{attempt}", key))
        responses = backend.generate_calls(calls)
        still = []
        for sample, (_, shown), response in zip(pending, prompts, responses):
            if response.error:
                status, reasoning = "error", ""
            else:
                status, reasoning = judge_response(response.text, response.truncated, shown, min_words)
            rationale = None
            if status == "kept":
                rationale = Rationale(
                    reasoning=reasoning,
                    answer=sample.answer,
                    generator=backend.info.name,
                    attempts=attempt,
                    injected=attempt > 1,
                )
            outcomes[sample.id] = RationaleOutcome(
                sample.id, status, attempt, rationale, response.error or response.text
            )
            if status != "kept":
                still.append(sample)
        pending = still
    return [outcomes[s.id] for s in samples]


def apply_rationales(demos: list[Sample], outcomes: list[RationaleOutcome]) -> list[Sample]:
    """Demos with their kept rationale set, or cleared and marked with why none was kept."""
    by_id = {o.sample_id: o for o in outcomes}
    updated = []
    for demo in demos:
        o = by_id.get(demo.id)
        if o is None:
            updated.append(demo)
            continue
        meta = {**demo.meta, "rationale_status": o.status, "rationale_attempts": o.attempts}
        updated.append(demo.model_copy(update={"rationale": o.rationale, "meta": meta}))
    return updated


def summarize_outcomes(outcomes: list[RationaleOutcome]) -> dict[str, int]:
    counts = Counter(o.status for o in outcomes)
    counts["injected"] = sum(1 for o in outcomes if o.rationale is not None and o.rationale.injected)
    return dict(counts)
