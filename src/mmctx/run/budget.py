"""A prompt budget per model: many-shot prompts cut to fit, the least similar demos dropped first.

A run with ``max_prompt_tokens`` counts every request's prompt as its model reads it: the chat
template rendered and each image expanded into its tokens, by the backend's ``prompt_tokens``
(`mmctx.models.base.prompt_counter`; the HF backend has it, an API server or vLLM does not, and
such a run is refused before it starts). A prompt over the budget keeps the first n demos of the
query's stored list (most similar first) for the largest n whose prompt fits: the dropped demos are
the list's tail whatever order the setting shows them in, since ``-last`` and ``#o<n>`` arrange
the demos kept. n is found by binary search, so a k-shot prompt over the budget costs about
log2(k) + 1 counts; it relies on a prompt growing with its demos, as each demo adds its turns.

A ``ppl-calibrated`` request's content-free prompt keeps the demos its partner kept, so the prior
is measured in the same context as the prediction it calibrates.

What was dropped, and the count of the prompt sent, are recorded on the request (`Fit`, written to
``requests.jsonl``); the prompt, so the request's key, is the cut one. A prompt that does not fit
with one demo (a budget below one demo), or a zero-shot prompt over the budget, is an error naming
query, setting, scorer, budget and count: every such request is listed before any is sent.

``max_prompt_tokens="window"`` is the model's context window less the run's longest generation
limit, resolved once the model is loaded (`window_budget`); the manifest records ``"window"``,
each request the number.

Counting needs the model, so a run plans without it first (every record checked, nothing loaded),
then loads the backend and fits the planned requests (its shard's only) with `fit_plan`, before
capabilities are checked and the run folder is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mmctx.models.base import prompt_counter
from mmctx.prompts.build import BuiltPrompt
from mmctx.prompts.messages import Prompt
from mmctx.prompts.presets import Preset
from mmctx.run.plan import Fit, PlannedRequest, calibrated_id, choose_demos, content_free_id, request_prompt
from mmctx.run.settings import CONTENT_FREE, Setting
from mmctx.schema import Benchmark, Problem, Sample, listed

Count = Callable[[Prompt], int]  # a prompt's tokens as the model reads it


class BudgetError(ValueError):
    """Prompts that do not fit the budget even with one demo (or none, zero-shot); lists each."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(listed(f"{len(problems)} prompt(s) over the prompt budget (max_prompt_tokens):", problems))


class PromptCountError(RuntimeError):
    """A prompt budget was asked of a backend that cannot count prompt tokens."""


# A budget named by the model: its context window less the longest generation the run allows.
WINDOW = "window"


def check_max_prompt_tokens(value: object) -> int | str | None:
    """``value`` as a prompt budget: None (no budget), `WINDOW` or a whole number of tokens, at least 1."""
    if value is None or value == WINDOW:
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_prompt_tokens is a whole number of tokens, at least 1, {WINDOW!r} or None for no "
                         f"budget (got {value!r})")  # fmt: skip
    return value


def window_budget(backend: object, name: str, longest_generation: int) -> int:
    """The `WINDOW` budget of a loaded ``backend``: its context window less ``longest_generation``
    tokens; a `PromptCountError` naming ``name`` when it knows no window or leaves no room."""
    window = backend.capabilities.context_window  # type: ignore[attr-defined]
    if window is None:
        raise PromptCountError(f"model {name!r} reports no context window; give max_prompt_tokens a number of tokens")
    if window - longest_generation < 1:
        raise PromptCountError(
            f"model {name!r}: a window of {window} tokens leaves no room for a prompt beside {longest_generation} "
            "generated ones"
        )
    return window - longest_generation


def counts_before_loading(spec: str) -> bool:
    """Whether the backend ``spec`` names can count prompts, as its class says before it loads (a
    backend built by a factory function is asked once loaded)."""
    from mmctx.models.registry import backend_entry

    target = backend_entry(spec).target
    return not isinstance(target, type) or prompt_counter(target) is not None


def refuse_uncounted(backend: object, name: str) -> Count:
    """``backend``'s counter (`prompt_counter`); a `PromptCountError` naming ``name`` if it has none.
    ``backend`` may be a backend class, checked before the model loads."""
    count = prompt_counter(backend)
    if count is None:
        raise PromptCountError(
            f"model {name!r} cannot count prompt tokens as it reads them (images included), which "
            "max_prompt_tokens needs: run the budget with a backend that can (the HF backend), or drop it"
        )
    return count


@dataclass(frozen=True)
class Fitted:
    prompt: BuiltPrompt
    kept: int  # demos kept: the first of the stored list
    tokens: int  # the kept prompt's count


class OverBudget(Exception):
    """No prompt fits: even with ``demos`` demos (1, or 0 zero-shot) it has ``tokens`` tokens."""

    def __init__(self, demos: int, tokens: int):
        super().__init__(f"{tokens} tokens with {demos} demo(s)")
        self.demos, self.tokens = demos, tokens


def fit_demos(
    demos: Sequence[Sample], build: Callable[[list[Sample]], BuiltPrompt], count: Count, max_tokens: int
) -> Fitted:
    """The prompt ``build`` makes of the longest prefix of ``demos`` (stored order) whose ``count``
    is at most ``max_tokens``; `OverBudget` when none with a demo does (or, without demos, the one prompt).

    All demos first (one count when they fit), then a binary search over how many are kept.
    """
    counted: dict[int, Fitted] = {}

    def fits(n: int) -> bool:
        prompt = build(list(demos[:n]))
        counted[n] = Fitted(prompt, n, count(prompt.messages))
        return counted[n].tokens <= max_tokens

    if fits(len(demos)):
        return counted[len(demos)]
    low, high = 0, len(demos)  # high's prompt is over the budget; low's fits, or low is 0 (not counted)
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    if low == 0:
        raise OverBudget(high, counted[high].tokens)
    return counted[low]


def fit_plan(
    plan: list[PlannedRequest],
    count: Count,
    max_tokens: int,
    *,
    bench: Benchmark,
    preset: Preset,
    seed: int,
    blank_dir: Path | None,
) -> list[PlannedRequest]:
    """Each request of ``plan`` with its prompt fitted to ``max_tokens`` (the plan's order and
    positions kept); a `BudgetError` listing every request that cannot fit.

    ``bench``, ``preset``, ``seed`` and ``blank_dir`` are those the plan was made with
    (`mmctx.run.plan.plan_requests`): a request is planned again with fewer demos.
    """
    check_max_prompt_tokens(max_tokens)
    queries = {q.id: q for q in bench.queries}
    fitted: dict[str, tuple[PlannedRequest, list[Sample]]] = {}  # request id -> (fitted request, demos kept)
    problems: list[Problem] = []
    for r in plan:
        if r.scorer == CONTENT_FREE:  # shown the demos its ppl-calibrated request keeps (below)
            continue
        query, setting = queries[r.query_id], Setting.parse(r.setting)
        demos = choose_demos(bench, query, setting, preset, seed)

        def build(kept: list[Sample], query=query, setting=setting, scorer=r.scorer) -> BuiltPrompt:
            return request_prompt(bench, query, kept, setting, scorer, preset, seed, blank_dir)

        try:
            fit = fit_demos(demos, build, count, max_tokens)
        except OverBudget as over:
            what = "the zero-shot prompt" if over.demos == 0 else "the prompt with one demo"
            problems.append(Problem("queries", r.query_id, "max_prompt_tokens", (
                f"setting {r.setting}, scorer {r.scorer}: {what} takes {over.tokens} tokens, over the budget "
                f"of {max_tokens}"
            )))  # fmt: skip
            continue
        dropped = tuple(d.id for d in demos[fit.kept :])
        fitted[r.id] = (replace(r, prompt=fit.prompt, fit=Fit(max_tokens, fit.tokens, dropped)), demos[: fit.kept])
    if problems:
        raise BudgetError(problems)
    out, free = [], {}  # content-free request id -> its fitted fingerprint (planned before its partner)
    for r in plan:
        if r.scorer == CONTENT_FREE:
            # The demos its partner kept: the prior is measured in the context of the prediction it divides.
            partner, kept = fitted[calibrated_id(r.id)]
            prompt = request_prompt(
                bench, queries[r.query_id], kept, Setting.parse(r.setting), CONTENT_FREE, preset, seed, blank_dir
            )
            assert partner.fit is not None
            r = replace(r, prompt=prompt, fit=replace(partner.fit, prompt_tokens=count(prompt.messages)))
            free[r.id] = r.fingerprint
        else:
            r = fitted[r.id][0]
            if r.content_free is not None:
                r = replace(r, content_free=free[content_free_id(r.id)])
        out.append(r)
    return out
