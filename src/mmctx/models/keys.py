"""The key a model call is stored under: which model answered what.

A key hashes the model's identity (name, revision, backend and every setting that can change
an output) with the request's fingerprint: the call's kind (``generate`` or ``ppl``), the
rendered conversation (text and image *content*, never file paths; `prompt_fingerprint`), the
options scored and the token budget. Two calls share a key exactly when a deterministic model
would answer them alike, so a stored response can stand in for asking again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from mmctx.models.base import GenerateRequest, ModelInfo, ScoreRequest
from mmctx.prompts.messages import Prompt, prompt_fingerprint


def request_fingerprint(
    kind: str,
    prompt: Prompt,
    max_new_tokens: int | None,
    options: Sequence[str] | None = None,
    stop: Sequence[str] = (),
    attempt: int = 1,
) -> str:
    """Everything about one call that can change its response, except the model.

    ``attempt`` numbers a deliberate re-ask of the same request (a sampling model may answer
    it differently); the first ask's fingerprint carries no attempt.
    """
    body: dict = {
        "kind": kind,
        "prompt": prompt_fingerprint(prompt),
        "options": list(options) if options is not None else None,
        "max_new_tokens": max_new_tokens,
    }
    if stop:  # absent when empty, so keys of calls without stop strings never change
        body["stop"] = list(stop)
    if attempt != 1:
        body["attempt"] = attempt
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def request_key(model: ModelInfo, fingerprint: str) -> str:
    """The store key of a call with ``fingerprint`` answered by ``model``."""
    ident = json.dumps(
        {"model": model.name, "revision": model.revision, "backend": model.backend, "settings": model.settings},
        sort_keys=True,
    )
    return hashlib.sha256(f"{ident}\n{fingerprint}".encode()).hexdigest()


def generate_key(model: ModelInfo, request: GenerateRequest, attempt: int = 1) -> str:
    """The store key of one ``generate`` call (its ``attempt``-th ask)."""
    fingerprint = request_fingerprint(
        "generate", request.messages, request.max_new_tokens, stop=request.stop, attempt=attempt
    )
    return request_key(model, fingerprint)


def score_key(model: ModelInfo, request: ScoreRequest) -> str:
    """The store key of one option-scoring (``ppl``) call."""
    return request_key(model, request_fingerprint("ppl", request.messages, None, request.options))
