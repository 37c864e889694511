"""When a remote model call is worth another attempt, and how long to wait before it.

A failed attempt is reduced to a `Failure`: a short ``cause`` that names what went wrong
(``http_429``, ``http_500``, ``timeout``, ``connection``, ``bad_response``, …), a detail for
humans, whether asking again can help, and how long the server asked us to wait. The caller
maps its own exceptions to failures; this module owns only the policy, so the policy is one
readable thing rather than a property of some HTTP client's defaults.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

# Rate limits, server errors, and the two statuses servers use for "busy, try again".
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Failure:
    """Why an attempt (or, once retries are spent, a request) failed."""

    cause: str
    detail: str
    retryable: bool
    retry_after: float | None = None  # seconds the server asked for, if it said

    @property
    def message(self) -> str:
        return f"{self.cause}: {self.detail}"


class ResponseError(Exception):
    """A response that arrived but cannot be used (unparseable, missing fields, …)."""

    def __init__(self, cause: str, detail: str, retryable: bool):
        super().__init__(detail)
        self.failure = Failure(cause, detail, retryable)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, a retry budget, and a per-attempt timeout."""

    max_attempts: int = 6
    timeout: float = 120.0  # seconds for one attempt, from sending to the parsed response
    base_delay: float = 1.0
    max_delay: float = 60.0
    # A server asking for a longer pause than this gets an error, not a run stalled for hours.
    max_retry_after: float = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {self.max_attempts}")
        if self.timeout <= 0 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("timeout must be positive and delays non-negative")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based).

        Equal jitter (half fixed, half random) keeps the exponential growth while spreading
        retries of requests that failed together, so they do not hit the server together again.
        """
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        jittered = backoff * (0.5 + 0.5 * rng.random())
        return max(jittered, retry_after or 0.0)

    def with_attempts(self, max_attempts: int) -> RetryPolicy:
        return replace(self, max_attempts=max_attempts)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``; None if absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[Exception], Failure],
    policy: RetryPolicy,
    *,
    rng: random.Random | None = None,
    describe: str = "request",
) -> T | Failure:
    """``await attempt()`` until it succeeds, fails for good, or the budget is spent.

    Never raises for a failed attempt: the last `Failure` is returned instead, so one bad
    request cannot take its batch down with it. Cancellation still propagates.
    """
    rng = rng or random.Random()
    failure = Failure("error", "no attempt made", False)
    for n in range(1, policy.max_attempts + 1):
        try:
            return await attempt()
        except Exception as exc:  # noqa: BLE001 - every failure is classified, none is swallowed
            failure = classify(exc)
        if not failure.retryable:
            return failure
        if n == policy.max_attempts:
            return replace(failure, detail=f"{failure.detail} (gave up after {n} attempts)")
        if failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
            return replace(
                failure,
                detail=f"{failure.detail} (server asked to retry after {failure.retry_after:g}s, "
                f"more than the {policy.max_retry_after:g}s allowed)",
            )
        wait = policy.delay(n, failure.retry_after, rng)
        log.info(
            "%s failed (%s), attempt %d/%d; retrying in %.2fs", describe, failure.cause, n, policy.max_attempts, wait
        )
        await asyncio.sleep(wait)
    return failure
