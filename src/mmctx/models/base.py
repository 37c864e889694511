"""The backend protocol: `generate` and `score` over typed prompts, plus declared capabilities.

Log-likelihood is defined once, here: for each option continuation, the summed
log-probability of exactly the option's tokens given the full prompt (images expanded), and
its token count. Perplexity and length-normalised scores derive from those two numbers.

A request that fails (context overflow, a bad image) comes back with ``error`` set; it is
stored as an error and never scored as a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from mmctx.prompts.messages import Prompt


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; a run checks these before it starts."""

    max_images: int | None  # None: no limit the backend knows of
    interleaved: bool  # images may appear in any turn, in order
    loglikelihood: bool  # can `score`
    chat_template: bool
    context_window: int | None


@dataclass(frozen=True)
class GenerateRequest:
    messages: Prompt
    max_new_tokens: int
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Generation:
    text: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False  # stopped by the token limit, not by the model
    error: str | None = None


@dataclass(frozen=True)
class ScoreRequest:
    messages: Prompt
    options: tuple[str, ...]  # continuations, each scored as the assistant's reply


@dataclass(frozen=True)
class OptionScores:
    loglikelihoods: tuple[float, ...] = ()
    token_counts: tuple[int, ...] = ()
    prompt_tokens: int = 0
    error: str | None = None


@dataclass(frozen=True)
class ModelInfo:
    """What identifies the model in cache keys and manifests."""

    name: str
    revision: str
    backend: str
    settings: dict = field(default_factory=dict)  # dtype, device, … anything that can change outputs


@runtime_checkable
class Backend(Protocol):
    """What every model backend offers the executor.

    A backend that holds a credential (an API key) also defines ``secrets() -> tuple[str, ...]``:
    every stored text is redacted of them (`mmctx.models.store.backend_secrets`). It is optional, so
    it is not part of this protocol's required members.

    A backend whose calls may overlap — an API client, called from several threads at once —
    declares ``max_concurrency: int``, the requests it keeps in flight across all of them
    (`declared_concurrency`). A run then keeps enough batches going to fill it instead of
    waiting for each. Optional too: a backend without it (a local model, whose batch is its
    capacity) is called one batch at a time, from one thread.

    A backend that can count a prompt's tokens as its model reads them — chat template rendered,
    each image expanded into the tokens it takes — defines ``prompt_tokens(messages) -> int``
    (`prompt_counter`); a run with a prompt budget (``max_prompt_tokens``, `mmctx.run.budget`)
    needs it. Optional too: an API server or an engine that expands images itself cannot say.
    """

    info: ModelInfo
    capabilities: Capabilities

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]: ...

    def score(self, requests: list[ScoreRequest]) -> list[OptionScores]: ...


def declared_concurrency(backend: object) -> int | None:
    """The requests ``backend`` keeps in flight across overlapping calls (its ``max_concurrency``),
    or None when it declares none: its calls must not overlap."""
    slots = getattr(backend, "max_concurrency", None)
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None


def prompt_counter(backend: object) -> Callable[[Prompt], int] | None:
    """``backend``'s ``prompt_tokens`` (the tokens a prompt takes as its model reads it, images
    included), or None when it cannot count them. Given a backend class, whether it can (checked
    before the model loads)."""
    count = getattr(backend, "prompt_tokens", None)
    return count if callable(count) else None
