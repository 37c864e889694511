"""Greedy decoding of one prompt through a compiled decode step over a static KV cache.

At batch size 1 a small model's decode step is mostly framework overhead: Python module calls,
mask building and `generate()`'s per-step bookkeeping, not arithmetic. `CompiledGreedy` runs
the prefill eagerly (its length varies from prompt to prompt) and every later step through one
`torch.compile`d function (forward and argmax, a fixed shape) over a `StaticCache` whose length
is the prompt plus the generation limit rounded up to a power of two (at least 256), so a run
compiles once per length class, not once per prompt.

It is opt-in (`--compile`) and guarded:

* It serves only what it decodes exactly as `generate()` would: one prompt, greedy, no stop
  strings, and a checkpoint whose generation config changes no logits (`plain_greedy`).
* The first `CHECK_FIRST` prompts and one in `CHECK_EVERY` after them are also decoded by
  `generate()` and the tokens compared; a difference, or any error while compiling or running,
  turns it off for the rest of the run (with the reason in `usage()`) and `generate()`'s tokens
  are the answer.
* Compiling takes seconds per length class (once per process; inductor caches its kernels on
  disk), so it pays for itself only over many prompts.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import torch

CHECK_FIRST = 3
CHECK_EVERY = 256
MIN_CACHE_LEN = 256

# Generation-config fields whose set value adds a logits processor (or a stopping rule) that
# changes what greedy decoding picks; `generate()` honours them and the compiled step does not.
_UNSET = (
    "bad_words_ids", "begin_suppress_tokens", "suppress_tokens", "sequence_bias", "forced_bos_token_id",
    "forced_eos_token_id", "exponential_decay_length_penalty", "watermarking_config", "min_new_tokens",
    "max_time", "stop_strings",
)  # fmt: skip
_NEUTRAL = {
    "repetition_penalty": (None, 1.0),
    "encoder_repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "min_length": (None, 0),
    "num_beams": (None, 1),
    "guidance_scale": (None, 1.0),
}


def plain_greedy(generation_config: Any) -> str | None:
    """None when greedy `generate()` with this config is a bare argmax per step; else the field
    that makes it more."""
    for name in _UNSET:
        value = getattr(generation_config, name, None)
        if value is not None and value != [] and value != {}:
            return f"the checkpoint's generation config sets {name}={value!r}"
    for name, neutral in _NEUTRAL.items():
        value = getattr(generation_config, name, None)
        if value not in neutral:
            return f"the checkpoint's generation config sets {name}={value!r}"
    return None


def cache_length(prompt_tokens: int, max_new_tokens: int) -> int:
    """The static cache's length for a prompt: the next power of two that holds it and its answer."""
    return max(MIN_CACHE_LEN, 1 << (prompt_tokens + max_new_tokens - 1).bit_length())


def _step_for(model: Any, cache_arg: str) -> Callable:
    def step(token: torch.Tensor, cache: Any) -> torch.Tensor:
        logits = model(input_ids=token, use_cache=True, **{cache_arg: cache}).logits
        return logits[:, -1].argmax(-1, keepdim=True)

    return step


class CompiledGreedy:
    """Greedy decoding of single prompts through a compiled step; see the module docstring."""

    def __init__(self, model: Any, eos_ids: set[int]):
        self.model = model
        self.eos_ids = frozenset(eos_ids)
        # transformers renamed the forward's `past_key_values` to `cache` within 5.x.
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self._caches: dict[int, Any] = {}  # by length
        self._step: Callable | None = None
        self.off: str | None = plain_greedy(model.generation_config)
        self.decoded = 0  # prompts answered by the compiled step
        self.checked = 0  # of them, also decoded by `generate()` and compared

    def usage(self) -> dict:
        return {
            "on": self.off is None, "off_reason": self.off, "decoded": self.decoded, "checked": self.checked,
            "cache_lengths": sorted(self._caches),
        }  # fmt: skip

    def due_for_check(self) -> bool:
        return self.decoded < CHECK_FIRST or self.decoded % CHECK_EVERY == 0

    def compiled_step(self) -> Callable:
        if self._step is None:
            step = _step_for(self.model, self._cache_arg)
            # dynamo keeps compiled graphs on the function's code object, and with the module
            # guards skipped (below) a second model's step could take the first model's graph: a
            # copy of the code object gives each decoder graphs of its own.
            step = types.FunctionType(step.__code__.replace(), step.__globals__, step.__name__, None, step.__closure__)
            options = {}
            # The model is frozen for the whole run, so re-checking every parameter and module
            # attribute before each step (most of a compiled step's cost at this size) buys nothing.
            skip = getattr(torch.compiler, "skip_guard_on_all_nn_modules_unsafe", None)
            if skip is not None:
                options["guard_filter_fn"] = skip
            self._step = torch.compile(step, dynamic=False, fullgraph=True, options=options)
        return self._step

    def decode(self, inputs: dict, max_new_tokens: int) -> list[int]:
        """The new tokens greedy decoding gives for one processed prompt, up to and including the
        first end-of-sequence token or `max_new_tokens` of them."""
        from transformers import StaticCache

        n_prompt = inputs["input_ids"].shape[1]
        length = cache_length(n_prompt, max_new_tokens)
        cache = self._caches.get(length)
        if cache is None:
            cache = self._caches[length] = StaticCache(config=self.model.config, max_cache_len=length)
        else:
            cache.reset()
        out = self.model(**inputs, use_cache=True, **{self._cache_arg: cache})
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens = [int(token)]
        step = self.compiled_step()
        while len(tokens) < max_new_tokens and tokens[-1] not in self.eos_ids:
            token = step(token, cache)
            tokens.append(int(token))
        self.decoded += 1
        return tokens
