"""Judge and extractor calls against a real backend, with their own cache and a parse-retry budget.

`JudgeRunner` sends the calls of one round through a `StoredBackend` (the one mechanism every
model call outside an evaluation run shares): what the store holds is replayed, the rest goes
to the backend in batches of a few times its declared concurrency (the backend paces and
retries HTTP failures itself, and sampling — greedy — is its business too), each batch
committed as it returns, so a killed scoring pass resumes without asking a stored call again.
What did not parse is re-asked. The verdicts it returns are never
dropped: a reply that fails to parse ``attempts`` times, or a backend that keeps failing,
gives ``Verdict.failed("judge_error", …)`` with the replies and the cause kept, so tables count
it (score 0, outcome shown) instead of losing it from the denominator as CL-bench's script does.

Cache keys hash the judge model's identity (name, revision, backend, settings), the judge's
name, the rendered prompt (`prompt_fingerprint`), the reply budget and the attempt number —
not the request key of `mmctx.models.keys`, because the judge's name belongs in it and
because judge stores written before keep their meaning (a rescore replays them, unchanged).
The attempt number is in the key so a stored unparseable reply is not replayed as the answer
to the re-ask; a run repeated over the same store replays every round and calls nothing.
Backend errors are not stored (``store_errors=False``): they are transient, verdicts are
re-derived on every scoring pass and scoring has no ``--retry-errors``, so a later pass should
simply ask again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from mmctx.models.base import Backend, Capabilities, GenerateRequest, Generation, ModelInfo
from mmctx.models.store import ResponseStore
from mmctx.models.stored import StoredBackend, StoredCall
from mmctx.prompts.messages import Message, Prompt, TextPart, prompt_fingerprint
from mmctx.schema import Sample
from mmctx.scoring.evaluators.base import Extraction, Judge, JudgeReplyError, Verdict
from mmctx.scoring.evaluators.extractor import (
    EXTRACT_MAX_NEW_TOKENS,
    EXTRACTOR,
    EXTRACTOR_TYPED,
    extraction_prompt,
    parse_extraction,
)

T = TypeVar("T")

KIND = "judge"  # the store's ``kind`` column for judge and extractor replies
PROBE_TEXT = "Reply with OK."


class JudgeUnavailable(RuntimeError):
    """A configured judge or extractor that does not answer; a run stops before it starts."""


def probe(backend: Backend) -> None:
    """One tiny generation; raise `JudgeUnavailable` with the cause if it fails.

    A run with a judge configured but unreachable would otherwise generate for hours and then
    record ``judge_error`` for every judged item.
    """
    request = GenerateRequest((Message("user", (TextPart(PROBE_TEXT),)),), max_new_tokens=4)
    try:
        [generation] = backend.generate([request])
    except Exception as exc:  # noqa: BLE001 - any failure to answer means the judge is unusable
        raise JudgeUnavailable(f"{type(exc).__name__}: {exc}") from exc
    if generation.error is not None:
        raise JudgeUnavailable(generation.error)


class RecordedModel:
    """The judge (or extractor) a run recorded, answering only from the run's judge cache.

    Re-scoring a context run needs no model: its verdicts are cached under this identity (name,
    revision, backend, settings), so the same keys find them. A call the cache cannot answer is
    that item's judge error, naming how to ask it; it is never stored, so a later `score` with
    the judge itself asks it.
    """

    def __init__(self, info: ModelInfo):
        self.info = info
        self.capabilities = Capabilities(
            max_images=0, interleaved=False, loglikelihood=False, chat_template=False, context_window=None
        )

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        why = f"{self.info.name}: this verdict is not in the run's judge cache; score again with the judge given"
        return [Generation(error=why) for _ in requests]

    def score(self, requests: list) -> list:
        raise NotImplementedError(f"{self.info.name} answers only from the judge cache")


@dataclass
class _Call:
    """One item's judge or extractor call across its attempts."""

    index: int
    request_id: str
    name: str  # judge name (or extractor name) in the cache key
    prompt: Prompt
    max_new_tokens: int
    attempt: int = 1
    replies: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cause: str | None = None  # the last backend error, if any
    key: str = ""


@dataclass(frozen=True)
class _Failed:
    """What is left of a call whose attempts are spent."""

    call: _Call

    @property
    def reason(self) -> str:
        last = self.call.problems[-1] if self.call.problems else "no reply"
        return f"no usable reply in {self.call.attempt - 1} attempt(s); last: {last}"


class JudgeRunner:
    """Runs judges and the extractor on ``backend``, caching replies in ``store``.

    ``attempts`` bounds how often one item is asked (parse failures and backend errors share
    the budget); HTTP-level retries inside the backend come on top of it.
    """

    def __init__(self, backend: Backend, store: ResponseStore, attempts: int = 3):
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, not {attempts}")
        self.backend = backend
        self.store = store
        self.attempts = attempts
        # A stored error (none is written here) would be asked again, as before the wrapper.
        self.calls = StoredBackend(backend, store, KIND, retry_errors=True, store_errors=False)
        info = backend.info
        self._identity = {
            "name": info.name,
            "revision": info.revision,
            "backend": info.backend,
            "settings": info.settings,
        }

    # ---- public -------------------------------------------------------------------------------

    def judge(self, judge: Judge, items: list[tuple[Sample, str]]) -> list[Verdict]:
        """A verdict per ``(sample, answer)``, in order: precheck, else the judge's (re-asked) reply."""
        verdicts: list[Verdict | None] = [judge.precheck(sample, answer) for sample, answer in items]
        calls = [
            _Call(i, sample.id, judge.name, judge.prompt(sample, answer), judge.max_new_tokens)
            for i, ((sample, answer), v) in enumerate(zip(items, verdicts))
            if v is None
        ]

        def read(call: _Call, reply: str) -> Verdict:
            sample, answer = items[call.index]
            verdict = judge.verdict(sample, answer, judge.parse(reply))
            extra = {"judge": judge.name, "judge_attempt": call.attempt, "judge_key": call.key}
            return Verdict(verdict.outcome, verdict.score, verdict.prediction, {**verdict.detail, **extra})

        for call, outcome in zip(calls, self._run(calls, read)):
            verdicts[call.index] = outcome if isinstance(outcome, Verdict) else _judge_error(judge, items, outcome)
        return [v for v in verdicts if v is not None]

    def extract(self, items: list[tuple[str, str, bool]]) -> list[Extraction]:
        """An `Extraction` per ``(question, response, typed)``; one that never parses has rule ``extractor_error``."""
        calls = [
            _Call(
                i,
                f"extract-{i}",
                EXTRACTOR_TYPED if typed else EXTRACTOR,
                extraction_prompt(question, response, typed),
                EXTRACT_MAX_NEW_TOKENS,
            )
            for i, (question, response, typed) in enumerate(items)
        ]

        def read(call: _Call, reply: str) -> Extraction:
            return parse_extraction(reply, typed=items[call.index][2])

        out: list[Extraction] = []
        for outcome in self._run(calls, read):
            if isinstance(outcome, _Failed):
                outcome = Extraction(None, rule="extractor_error", issue=f"the extractor failed: {outcome.reason}")
            out.append(outcome)
        return out

    def key(self, name: str, prompt: Prompt, max_new_tokens: int, attempt: int) -> str:
        """The cache key of one call: judge model, judge name, rendered prompt, budget, attempt."""
        material = {
            "model": self._identity,
            "judge": name,
            "prompt": prompt_fingerprint(prompt),
            "max_new_tokens": max_new_tokens,
            "attempt": attempt,
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()

    # ---- the rounds -----------------------------------------------------------------------------

    def _run(self, calls: list[_Call], read: Callable[[_Call, str], T]) -> list[T | _Failed]:
        """Ask every call, round by round, until each has a reading or its attempts are spent."""
        results: dict[int, T | _Failed] = {}
        pending = calls
        model = asdict(self.backend.info)
        while pending:
            for call in pending:
                call.key = self.key(call.name, call.prompt, call.max_new_tokens, call.attempt)
            asks = [
                StoredCall(
                    GenerateRequest(c.prompt, c.max_new_tokens),
                    c.request_id,
                    c.key,
                    {"judge": c.name, "attempt": c.attempt, "model": model},
                )
                for c in pending
            ]
            replies = self.calls.generate_calls(asks)
            pending = [c for c, g in zip(pending, replies) if not self._settle(c, g, read, results)]
        return [results[id(c)] for c in calls]

    def _settle(
        self,
        call: _Call,
        reply: Generation,
        read: Callable[[_Call, str], T],
        results: dict[int, T | _Failed],
    ) -> bool:
        """Read this attempt's reply; True when the call is done (read, or out of attempts)."""
        if reply.error is None:
            try:
                results[id(call)] = read(call, reply.text)
                return True
            except JudgeReplyError as exc:
                call.replies.append(reply.text)
                cut = " (the reply hit the token limit)" if reply.truncated else ""
                call.problems.append(f"attempt {call.attempt}: {exc}{cut}")
        else:
            call.cause = reply.error
            call.problems.append(f"attempt {call.attempt}: backend error: {call.cause}")
        call.attempt += 1
        if call.attempt > self.attempts:
            results[id(call)] = _Failed(call)
            return True
        return False


def _judge_error(judge: Judge, items: list[tuple[Sample, str]], failed: _Failed) -> Verdict:
    call = failed.call
    _, answer = items[call.index]
    return Verdict.failed(
        "judge_error",
        failed.reason,
        answer,
        judge=judge.name,
        attempts=call.attempt - 1,
        replies=list(call.replies),
        cause=call.cause,
        problems=list(call.problems),
    )
