"""OpenAI-compatible chat-completions backend: vLLM and SGLang servers, hosted APIs.

Requests go through the official ``openai`` client (``pip install 'mmctx[openai]'``), async,
at most ``max_concurrency`` in flight; `generate` and `score` are plain synchronous calls that
run their own event loop and return results in request order. The client's own retries are
off: `mmctx.models.retry` decides what is retried (429, 5xx, timeouts, dropped connections,
unparseable bodies), honouring ``Retry-After``, and a request that still fails comes back with
``error="<cause>: <detail>"`` — stored as an error, never as an (empty) answer.

Images travel as base64 ``data:`` URLs in ``image_url`` parts, in prompt order, interleaved
with the text exactly as in the typed messages; roles are kept.

The API key is read from the environment (``OPENAI_API_KEY`` or the variable named by
``api_key_env``), else from the ``keyring`` package (service ``mmctx-openai``, user = the
server's host:port) when installed; never from arguments. It is redacted from every error
message, never enters `ModelInfo`, and `OpenAIBackend.secrets` hands it to the response store,
which takes it out of everything it stores (a server may echo it inside a successful reply).

Option log-likelihoods (``score_mode="vllm_prompt_logprobs"``) rely on three extensions of
vLLM's chat endpoint, sent in the request body: ``prompt_logprobs`` (log-probabilities of the
prompt's own tokens, returned as a top-level ``prompt_logprobs`` list), and
``add_generation_prompt=false`` + ``continue_final_message=true`` (the option is rendered as
an open assistant turn, so the rendered prompt *ends* with the option's text). Each option is
one request; its score is the sum over the final prompt tokens whose decoded text covers the
option's characters — a token straddling the boundary belongs to the option, as in the HF
backend. See `option_span` and `prompt_token_entry` for the response shape relied on.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import os
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from mmctx.models.base import (
    Capabilities,
    GenerateRequest,
    Generation,
    ModelInfo,
    OptionScores,
    ScoreRequest,
)
from mmctx.models.registry import backend, option_values
from mmctx.models.retry import RETRYABLE_STATUS, Failure, ResponseError, RetryPolicy, parse_retry_after, with_retries
from mmctx.prompts.messages import ImagePart, Message, Prompt, TextPart

T = TypeVar("T")

log = logging.getLogger(__name__)

SPEC_PREFIX = "openai:"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
KEYRING_SERVICE = "mmctx-openai"
SCORE_MODES = ("none", "vllm_prompt_logprobs")
# Part of every cache key when scoring: bump when how option spans or scores are computed changes.
SCORING_VERSION = "1"


class OpenAIBackendError(RuntimeError):
    """The backend cannot do what was asked (bad spec, scoring without a scoring server, …)."""


# ---- secrets ---------------------------------------------------------------------------------


class _Secret:
    """A credential that does not print itself: safe in reprs, tracebacks' locals and ``vars()``."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"


_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;}]+")
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-*]{4,}")  # also the masked form OpenAI echoes in 401s


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without the given secrets, bearer tokens or ``sk-…`` keys (a server may echo headers)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _SK_KEY.sub("sk-***", _BEARER.sub(r"\1***", text))


def resolve_api_key(env_var: str, host: str) -> str | None:
    """The key from ``env_var``, else from the keyring, else None (local servers need none)."""
    key = os.environ.get(env_var)
    if key:
        return key
    try:
        import keyring
    except ImportError:
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, host) or None
    except Exception:  # noqa: BLE001 - a broken keyring backend means "no key", not a crash
        log.warning("keyring lookup for %s failed; continuing without a key", host)
        return None


def server_host(base_url: str) -> str:
    """``host[:port]`` of a base URL: what identifies the server, without credentials, path or query."""
    parts = urlsplit(base_url)
    if not parts.hostname:
        raise OpenAIBackendError(f"base URL {redact(base_url)!r} has no host; expected e.g. http://localhost:8000/v1")
    return parts.hostname + (f":{parts.port}" if parts.port else "")


# ---- prompts → chat messages ------------------------------------------------------------------


_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))


def _image_mime(data: bytes) -> str | None:
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@lru_cache(maxsize=256)
def image_data_url(path: str, sha256: str) -> str:
    """A ``data:`` URL of the image's bytes; formats servers may not decode are re-encoded as PNG.

    Cached by content hash as well as path: few-shot demos recur across many prompts.
    """
    data = Path(path).read_bytes()
    mime = _image_mime(data)
    if mime is None:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
        data, mime = buffer.getvalue(), "image/png"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _content(message: Message) -> str | list[dict]:
    # Text-only turns go as a plain string: every server takes that, not all take part lists
    # in system or assistant turns.
    if not message.images:
        return message.text
    parts: list[dict] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            parts.append({"type": "image_url", "image_url": {"url": image_data_url(part.path, part.sha256)}})
    return parts


def chat_messages(prompt: Prompt) -> list[dict]:
    """The typed prompt as chat-completions messages: roles kept, images in place and in order."""
    return [{"role": m.role, "content": _content(m)} for m in prompt]


# ---- responses → results ----------------------------------------------------------------------


def _parse_body(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResponseError(
            "bad_response", f"body is not JSON ({exc.__class__.__name__}: {exc})", retryable=True
        ) from exc
    if not isinstance(data, dict):
        raise ResponseError("bad_response", f"body is a JSON {type(data).__name__}, not an object", retryable=True)
    return data


def read_generation(data: dict) -> Generation:
    """The first choice of a chat completion; a body without one is a failure, not an empty answer."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ResponseError("bad_response", "no choices in the completion", retryable=True)
    message = choices[0].get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        # A reasoning model can spend the whole token budget before answering: asking again changes nothing.
        spent = choices[0].get("finish_reason") == "length"
        detail = "the first choice has no text content" + (" (token limit reached first)" if spent else "")
        raise ResponseError("bad_response", detail, retryable=not spent)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return Generation(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        truncated=choices[0].get("finish_reason") == "length",
    )


def prompt_token_entry(position: dict) -> dict:
    """The prompt token's own entry at one position of vLLM's ``prompt_logprobs``.

    Asked with ``prompt_logprobs=1``, a position maps token ids (JSON string keys) to
    ``{"logprob", "rank", "decoded_token"}`` for the prompt's token and the top-1 token: one
    entry when they are the same token, else two, and the prompt's token is the one not ranked
    1 (vLLM's V1 engine lists it first with its true rank; earlier V1 releases appended it
    last with rank 2 — the rank tells them apart either way).
    """
    entries = [e for e in position.values() if isinstance(e, dict)]
    if len(entries) == 1:
        return entries[0]
    below_top = [e for e in entries if e.get("rank") != 1]
    if len(entries) == 2 and len(below_top) == 1:
        return below_top[0]
    raise ResponseError("bad_response", f"cannot tell the prompt token among {len(entries)} entries", retryable=False)


_SPACE_MARKERS = str.maketrans("", "", "\u0120\u2581\u010a")  # Ġ ▁ Ċ: byte-level and SentencePiece spaces


def _squash(text: str) -> str:
    """Text without whitespace or tokenizer space markers: how decoded pieces and options are compared."""
    return "".join(text.translate(_SPACE_MARKERS).split())


def option_span(pieces: list[str], option: str) -> tuple[int, int]:
    """``(start, end)``: the final prompt tokens whose text covers ``option``.

    Walks back from the last token with visible text (a template may end the open turn with
    whitespace) until the pieces cover the option's characters. Comparison ignores whitespace
    and space markers, since decoded pieces differ across vLLM versions (``" red"`` vs
    ``"Ġred"``); an option the prompt does not end with is an error, not a guess.
    """
    target = _squash(option)
    if not target:
        raise ResponseError("option_span", f"option {option!r} has no visible characters to score", retryable=False)
    end = len(pieces)
    while end > 0 and not _squash(pieces[end - 1]):
        end -= 1
    covered = ""
    for start in range(end - 1, -1, -1):
        covered = _squash(pieces[start]) + covered
        if len(covered) >= len(target):
            if covered.endswith(target):
                return start, end
            break
    raise ResponseError(
        "option_span",
        f"the prompt does not end with option {option!r} (does the server support continue_final_message?)",
        retryable=False,
    )


def read_option_score(data: dict, option: str) -> tuple[float, int, int]:
    """``(loglikelihood, option tokens, context tokens)`` from a chat completion with ``prompt_logprobs``."""
    positions = data.get("prompt_logprobs")
    if not isinstance(positions, list) or not positions:
        raise ResponseError(
            "no_prompt_logprobs", "the server returned no prompt_logprobs (is it vLLM?)", retryable=False
        )
    entries = [prompt_token_entry(p) if isinstance(p, dict) else None for p in positions]
    pieces = [e.get("decoded_token") if e else "" for e in entries]
    if any(p is None for p in pieces):
        raise ResponseError("bad_response", "prompt_logprobs without decoded_token", retryable=False)
    start, end = option_span(pieces, option)
    scored = entries[start:end]
    if any(e is None or not isinstance(e.get("logprob"), (int, float)) for e in scored):
        raise ResponseError("bad_response", "an option token has no log-probability", retryable=False)
    return sum(float(e["logprob"]) for e in scored), end - start, start


# ---- the backend ------------------------------------------------------------------------------


def _new_client(key: _Secret | None, base_url: str, timeout: float) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(
        api_key=key.reveal() if key else "EMPTY",  # the client insists on a key; local servers take any
        base_url=base_url,
        max_retries=0,  # the retry policy is ours, and observable
        timeout=timeout,
    )


class _Session:
    """An event loop on a thread of its own, the client that lives on it, and their shared limit.

    `generate` and `score` are synchronous, but a client's connection pool belongs to one event
    loop. Keeping loop and client alive between calls saves a client setup per call (tens of
    ms: SSL context, pool) and reuses keep-alive connections; one semaphore bounds every call
    in flight, even calls from several threads; and it works when the caller is itself inside a
    running loop (a notebook), where `asyncio.run` refuses.
    """

    def __init__(self, make_client: Callable[[], Any], max_concurrency: int, name: str):
        self._make_client = make_client
        self._max_concurrency = max_concurrency
        self._client: Any = None
        self._limit: asyncio.Semaphore | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, use: Callable[[Any, asyncio.Semaphore], Awaitable[T]]) -> T:
        """``use(client, limit)`` on the session's loop; blocks until it is done."""
        if self._loop.is_closed():
            raise OpenAIBackendError("the backend is closed")

        async def main() -> T:
            if self._client is None:
                self._client = self._make_client()
                self._limit = asyncio.Semaphore(self._max_concurrency)
            assert self._limit is not None
            return await use(self._client, self._limit)

        return asyncio.run_coroutine_threadsafe(main(), self._loop).result()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._client is not None:
            asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@dataclass(frozen=True)
class _Call:
    """One chat-completions request body, less the model and messages."""

    params: dict[str, Any]
    extra_body: dict[str, Any]


@dataclass(frozen=True)
class OpenAIOptions:
    """What the OpenAI-compatible backend takes (`OpenAIBackend`'s keyword arguments)."""

    base_url: str | None = None  # else the spec's @<base_url>, OPENAI_BASE_URL, OpenAI's
    api_key_env: str = DEFAULT_KEY_ENV
    max_concurrency: int = 16
    retry: RetryPolicy | None = None  # attempts, backoff and per-attempt timeout; None: RetryPolicy()
    temperature: float | None = 0.0
    top_p: float | None = None
    seed: int | None = None
    extra_body: Mapping[str, Any] | None = None
    score_mode: str = "none"  # or "vllm_prompt_logprobs"
    max_images: int | None = None
    revision: str | None = None

    hints: ClassVar[dict[str, str]] = {
        "quantization": "a server quantizes as it was started; the client cannot change it",
        "trust_remote_code": "the server runs the model's code, not this process",
        "threads": "the server runs the model, not this process; --max-concurrency paces the requests",
        "compile": "the server runs the model, not this process",
    }


@backend("openai", options=OpenAIOptions, remote=True)
class OpenAIBackend:
    """Generation (and, against vLLM, option log-likelihoods) through a chat-completions endpoint.

    Args:
        model: the model name the server serves (``--served-model-name`` for vLLM).
        base_url: e.g. ``http://localhost:8000/v1``; else ``OPENAI_BASE_URL``, else OpenAI's.
        api_key_env: the environment variable holding the key (keyring and no key are the fallbacks).
        max_concurrency: requests in flight at once.
        retry: backoff, retry budget and per-attempt timeout (`RetryPolicy`'s defaults if None).
        temperature, top_p, seed: sampling parameters sent with every generation.
        extra_body: server-specific parameters merged into every request body (e.g. vLLM's ``top_k``).
        score_mode: ``"none"`` (no `score`) or ``"vllm_prompt_logprobs"``.
        max_images: images per prompt the server takes, if it has a limit (runs check it up front).
        revision: recorded instead of asking the server which checkpoint it serves.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        max_concurrency: int = 16,
        retry: RetryPolicy | None = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        seed: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        score_mode: str = "none",
        max_images: int | None = None,
        revision: str | None = None,
    ):
        if score_mode not in SCORE_MODES:
            raise ValueError(f"unknown score_mode {score_mode!r}; choose from {SCORE_MODES}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        try:
            import openai  # noqa: F401
        except ImportError:
            raise OpenAIBackendError(
                "the openai backend needs the openai package: pip install 'mmctx[openai]'"
            ) from None
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.host = server_host(self.base_url)
        key = resolve_api_key(api_key_env, self.host)
        self._key = _Secret(key) if key else None
        self.max_concurrency = max_concurrency
        self.retry = retry or RetryPolicy()
        self._session = _Session(
            partial(_new_client, self._key, self.base_url, self.retry.timeout),
            max_concurrency,
            f"mmctx-openai {self.host}",
        )
        # Stops the loop thread when the backend is dropped without `close()` (the runner never closes backends).
        self._finalizer = weakref.finalize(self, self._session.close)
        self.score_mode = score_mode
        self._extra_body = dict(extra_body or {})
        self._sampling = {
            k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("seed", seed)) if v is not None
        }
        self.capabilities = Capabilities(
            max_images=max_images,
            interleaved=True,
            loglikelihood=score_mode != "none",
            chat_template=True,
            context_window=None,  # servers do not say; an overflow comes back as an http_400 error
        )
        self.info = ModelInfo(
            name=model,
            revision=revision or self._served_revision(),
            backend="openai",
            settings=self._settings(),
        )

    @classmethod
    def from_spec(cls, spec: str, options: OpenAIOptions | None = None, **overrides: Any) -> OpenAIBackend:
        """``openai:<model>`` or ``openai:<model>@<base_url>`` (the spec's URL wins over ``base_url``)."""
        model, base_url = parse_spec(spec)
        values = {**option_values(options or OpenAIOptions()), **overrides}
        if base_url:
            values["base_url"] = base_url
        return cls(model, **values)

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, host={self.host!r})"

    def close(self) -> None:
        """Close connections and stop the event loop thread; the backend cannot be used afterwards."""
        self._finalizer()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- identity ----------------------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        """What can change outputs: server host, sampling, extra body, how options are scored.

        Not the key, not the pacing (concurrency, retries), and not ``score_mode`` itself: only
        one mode scores, so switching it on for a later run keeps the stored generations valid.
        """
        settings: dict[str, Any] = {"host": self.host, **self._sampling}
        if self._extra_body:
            settings["extra_body"] = self._extra_body
        settings["scoring"] = SCORING_VERSION
        return settings

    def _served_revision(self) -> str:
        """The server's own name for the model (vLLM: the checkpoint it loaded), else ``"api"``."""

        async def ask(client: Any, limit: asyncio.Semaphore) -> str | Failure:
            outcome = await with_retries(
                lambda: self._attempt(lambda: client.models.with_raw_response.list()),
                self._classify,
                self.retry.with_attempts(min(3, self.retry.max_attempts)),
                describe="GET /models",
            )
            if isinstance(outcome, Failure):
                return outcome
            entries = outcome.get("data") if isinstance(outcome.get("data"), list) else []
            for entry in entries:
                if isinstance(entry, dict) and entry.get("id") == self.model:
                    return str(entry.get("root") or entry["id"])
            return "api"

        outcome = self._session.run(ask)
        if isinstance(outcome, Failure) and outcome.cause in ("http_401", "http_403"):
            # Every request would fail the same way: say so now, not once per request.
            raise OpenAIBackendError(
                f"{self.host} refused the API key ({self._redact(outcome.message)}); "
                "set it in the environment (OPENAI_API_KEY or the variable named by api_key_env)"
            )
        if isinstance(outcome, Failure):
            log.warning(
                "could not list the server's models (%s); recording revision 'api'", self._redact(outcome.message)
            )
            return "api"
        return outcome

    # ---- plumbing ----------------------------------------------------------------------------

    def secrets(self) -> tuple[str, ...]:
        """The credential this backend sends, for the response store to keep out of what it stores."""
        return (self._key.reveal(),) if self._key else ()

    def _redact(self, text: str) -> str:
        return redact(text, self.secrets())

    async def _attempt(self, send: Callable[[], Awaitable[Any]]) -> dict:
        """One HTTP exchange under the timeout, as a parsed JSON object."""
        raw = await asyncio.wait_for(send(), self.retry.timeout)
        return _parse_body(raw.text)

    def _classify(self, exc: Exception) -> Failure:
        """An exception from one attempt as a `Failure` whose cause names it."""
        import openai

        if isinstance(exc, ResponseError):
            return exc.failure
        if isinstance(exc, (asyncio.TimeoutError, openai.APITimeoutError)):
            return Failure("timeout", f"no response within {self.retry.timeout:g}s", retryable=True)
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            return Failure(
                f"http_{code}",
                _shorten(self._redact(_status_detail(exc))),  # redact first: a cut could split the key
                retryable=code in RETRYABLE_STATUS,
                retry_after=parse_retry_after(exc.response.headers),
            )
        if isinstance(exc, openai.APIConnectionError):
            reason = exc.__cause__ or exc
            return Failure("connection", _shorten(self._redact(f"{type(reason).__name__}: {reason}")), retryable=True)
        return Failure("error", _shorten(self._redact(f"{type(exc).__name__}: {exc}")), retryable=False)

    def _call_for(self, request: GenerateRequest) -> _Call:
        params: dict[str, Any] = {"max_tokens": request.max_new_tokens, **self._sampling}
        if request.stop:
            params["stop"] = list(request.stop)
        return _Call(params, self._extra_body)

    async def _chat(
        self,
        client: Any,
        limit: asyncio.Semaphore,
        messages: list[dict],
        call: _Call,
        read: Callable[[dict], T],
        describe: str,
    ) -> T | Failure:
        """POST one chat completion with retries; ``read`` turns the body into a result (or raises `ResponseError`).

        The semaphore is held for the HTTP exchange only, not while backing off, so a request
        waiting out a retry does not keep a healthy one from the server.
        """

        async def attempt() -> T:
            async with limit:
                data = await self._attempt(
                    lambda: client.chat.completions.with_raw_response.create(
                        model=self.model, messages=messages, **call.params, extra_body=call.extra_body or None
                    )
                )
            return read(data)

        return await with_retries(attempt, self._classify, self.retry, describe=describe)

    # ---- generate ----------------------------------------------------------------------------

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        if not requests:
            return []
        return self._session.run(lambda client, limit: self._generate_all(client, limit, requests))

    async def _generate_all(
        self, client: Any, limit: asyncio.Semaphore, requests: list[GenerateRequest]
    ) -> list[Generation]:
        return list(await asyncio.gather(*(self._generate_one(client, limit, r) for r in requests)))

    async def _generate_one(self, client: Any, limit: asyncio.Semaphore, request: GenerateRequest) -> Generation:
        try:
            messages = chat_messages(request.messages)
        except Exception as exc:  # noqa: BLE001 - an unreadable image fails its request, not the batch
            return Generation(error=self._redact(f"bad_input: cannot read an image: {exc}"))
        outcome = await self._chat(client, limit, messages, self._call_for(request), read_generation, "chat completion")
        if isinstance(outcome, Failure):
            return Generation(error=self._redact(outcome.message))
        return outcome

    # ---- score -------------------------------------------------------------------------------

    def score(self, requests: list[ScoreRequest]) -> list[OptionScores]:
        if self.score_mode == "none":
            raise OpenAIBackendError(
                f"model {self.model!r} at {self.host} cannot score option log-likelihoods with score_mode='none'; "
                "against a vLLM server use score_mode='vllm_prompt_logprobs', otherwise drop the 'ppl' scorer"
            )
        if not requests:
            return []
        return self._session.run(lambda client, limit: self._score_all(client, limit, requests))

    async def _score_all(
        self, client: Any, limit: asyncio.Semaphore, requests: list[ScoreRequest]
    ) -> list[OptionScores]:
        return list(await asyncio.gather(*(self._score_one(client, limit, r) for r in requests)))

    async def _score_one(self, client: Any, limit: asyncio.Semaphore, request: ScoreRequest) -> OptionScores:
        try:
            messages = chat_messages(request.messages)
        except Exception as exc:  # noqa: BLE001 - an unreadable image fails its request, not the batch
            return OptionScores(error=self._redact(f"bad_input: cannot read an image: {exc}"))
        call = _Call(
            {"max_tokens": 1, "temperature": 0.0},
            # prompt_logprobs=1, not 0: some vLLM releases treat 0 as "off".
            {**self._extra_body, "prompt_logprobs": 1, "add_generation_prompt": False, "continue_final_message": True},
        )
        outcomes = await asyncio.gather(
            *(
                self._chat(
                    client,
                    limit,
                    messages + [{"role": "assistant", "content": option}],
                    call,
                    lambda data, option=option: read_option_score(data, option),
                    "option score",
                )
                for option in request.options
            )
        )
        failed = next((o for o in outcomes if isinstance(o, Failure)), None)
        if failed is not None:
            return OptionScores(error=self._redact(failed.message))
        return OptionScores(
            loglikelihoods=tuple(ll for ll, _, _ in outcomes),
            token_counts=tuple(n for _, n, _ in outcomes),
            prompt_tokens=min(context for _, _, context in outcomes),
        )


def _status_detail(exc: Any) -> str:
    """The server's own error message when it sent one, else the client's summary."""
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
    return str(message if message is not None else exc)


def _shorten(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``openai:<model>[@<base_url>]`` → ``(model, base_url or None)``."""
    rest = spec.removeprefix(SPEC_PREFIX)
    model, at, url = rest.rpartition("@")
    if at and url.startswith(("http://", "https://")):
        rest, base_url = model, url
    else:
        base_url = None
    if not rest:
        raise ValueError(f"model spec {spec!r} names no model; expected openai:<model> or openai:<model>@<base_url>")
    return rest, base_url
