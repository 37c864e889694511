"""Offline vLLM backend: `vllm.LLM` in this process, multi-image chat prompts, prefix caching.

Install with ``pip install 'mmctx[vllm]'`` on a machine with a CUDA GPU; vllm is imported only
when a `VLLMBackend` starts its engine. Everything else here is plain functions of plain data
(messages → engine prompts, options → scoring requests, vLLM outputs → `Generation` /
`OptionScores`, usage), tested without vllm.

**Prompt route.** The prompt is rendered as the HF backend renders it — its family adapter
(`mmctx.models.adapters`) over the checkpoint's chat template — tokenised as the HF backend
tokenises it (special tokens only where the processor's own ``apply_chat_template`` adds them:
`mmctx.models.spans.adds_special_tokens`), and handed to `LLM.generate` as a token prompt,
``{"prompt_token_ids": ids, "multi_modal_data": {"image": [PIL images in prompt order]}}``;
vLLM's multimodal processor expands each image placeholder, set up with the adapter's
``processor_kwargs`` (vLLM's ``mm_processor_kwargs``: Idefics unsplit images, Qwen-VL pixel
caps, …). Token ids, not text: vLLM tokenises a raw text prompt with
``add_special_tokens=True``, so a template that writes BOS (Gemma 3, Mistral 3, Llama) would
get a second one (vllm-project/vllm#9519; `LLM.chat` itself tokenises the rendered template
and sends ids, vllm-project/vllm#55197). Not `LLM.chat`: scoring must know the exact tokens
vLLM is given, so that the option's tokens can be located in them, and the text must be the
one the HF backend renders (vLLM resolves templates and content formats its own way).
Adapters that build the model's inputs themselves (remote-code InternVL, Phi-vision, xGen-MM)
are refused.

**Image placeholders.** vLLM expands, for each image, the placeholder its model class names
(``get_placeholder_str``); `VLLM_IMAGE_PLACEHOLDERS` lists them for the multi-image families
vLLM documents. A template that does not write it once per image of a one-shot probe
conversation is refused at load, and a rendered prompt whose placeholder count differs from its
image count before it is sent, naming the model and both counts (vLLM would fail it inside its
processor, after loading the weights). ``limit_mm_per_prompt`` allows the plan's most images and no video
or audio, which mmctx never sends (vLLM reserves encoder memory for every allowed item).

**Scoring.** Per option one request whose prompt is the generation prompt + the template's
lead + the option (`SamplingParams(max_tokens=1, prompt_logprobs=0)`); the options of every
query in a `score` call are submitted together so the shared prefix (images included) is
computed once and read from the prefix cache by the others. The option's log-likelihood is
the sum of ``prompt_logprobs`` over exactly its tokens: the last ``token_count`` ids of
``prompt_token_ids``. Which tokens those are comes from `mmctx.models.spans`, the functions
the HF backend uses, so both backends score the same tokens; the tail of vLLM's ids is
checked against the text tokenisation, not assumed.

**Prefix cache and prompt log-probs.** vLLM computes prompt log-probs only for the positions
it computes: for a request with ``num_cached_tokens = c`` the entries of tokens ``1..c``
hold whatever the buffer held (vllm/v1/worker/gpu_model_runner.py,
``_get_prompt_logprobs_dict``: rows from ``request.num_computed_tokens`` on are filled, the
rest of ``LogprobsTensors.empty_cpu`` is not). That is why vLLM, unless told otherwise,
does not *read* the cache for prompt-logprob requests (``SamplingParams.__post_init__``:
``skip_reading_prefix_cache = prompt_logprobs is not None``, vLLM ≥ 0.12, PR #28194). Here
scoring requests set ``skip_reading_prefix_cache=False``, and every result is checked:
token ``p``'s log-prob comes from position ``p - 1``, so an option's tokens are trusted only
if ``num_cached_tokens`` is below the first of them. Requests where the hit reached that far
are sent again with the cache read off: a repeated query, an option that extends another,
and — hits being whole cache blocks — a query whose shared context ends exactly on a block
boundary (about one query in ``block_size``). `VLLMBackend.usage` counts them. On a vLLM
without that field the engine never reads the cache for scoring: slower, equally exact.

**Usage.** `VLLMBackend.usage` reports prompt tokens computed vs total and the prefix-cache
hit rate from each ``RequestOutput.num_cached_tokens`` (always there), plus vLLM's own
``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` counters from `LLM.get_metrics`
when the backend was started with ``engine_metrics=True`` (vLLM only keeps them with log
stats on).

**vLLM shapes relied on** (vllm-project/vllm ``vllm/outputs.py`` at 003d3ee,
``vllm/logprobs.py`` at 578b601): `RequestOutput` with ``prompt_token_ids``,
``prompt_logprobs`` (a sequence aligned with ``prompt_token_ids``: a list whose first entry
is None, or a ``FlatLogprobs`` whose first position is an empty dict; each position maps
token id → `Logprob` with ``.logprob``), ``outputs`` (`CompletionOutput`: ``text``,
``token_ids``, ``finish_reason`` "stop" | "length", ``stop_reason`` None for EOS, the
string for a stop string, the id for a stop token) and ``num_cached_tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from mmctx.models.adapters import Adapter, adapter_for, with_image_settings
from mmctx.models.base import (
    Capabilities,
    GenerateRequest,
    Generation,
    ModelInfo,
    OptionScores,
    ScoreRequest,
)
from mmctx.models.images import load_rgb
from mmctx.models.registry import backend, option_values
from mmctx.models.revision import folder_digest
from mmctx.models.spans import (
    ModelError,
    adds_special_tokens,
    answer_turn,
    chat_conversation,
    continuations,
    option_spans,
)
from mmctx.prompts.messages import ImagePart, Prompt

SPEC_PREFIX = "vllm:"
# What vLLM's model class expands for each image (its ``get_placeholder_str``), by config
# ``model_type``: the text the family's chat template must write once per image, in order.
# Multi-image support and placeholders: vllm-project/vllm docs/models/supported_models.md
# (``I+``: several images a prompt) and examples/offline_inference/vision_language_multi_image.py
# (at 85f1f91: load_qwen2_vl, load_qwen2_5_vl, load_idefics3, load_smolvlm, load_llava,
# load_llava_onevision, load_gemma3, load_mistral3, load_pixtral_hf, load_interns1).
_QWEN_VL_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"  # vllm/model_executor/models/qwen2_vl.py
VLLM_IMAGE_PLACEHOLDERS: dict[str, str] = {
    "qwen2_vl": _QWEN_VL_IMAGE,
    "qwen2_5_vl": _QWEN_VL_IMAGE,  # qwen2_5_vl.py
    "qwen3_vl": _QWEN_VL_IMAGE,  # qwen3_vl.py
    "idefics3": "<image>",  # idefics3.py (the example runs it with several images)
    "smolvlm": "<image>",  # smolvlm.py, Idefics3's processor
    "llava": "<image>",  # llava.py: LLaVA-1.5 and LLaVA-Interleave
    "llava_next": "<image>",  # llava_next.py
    "llava_onevision": "<image>",  # llava_onevision.py
    "gemma3": "<start_of_image>",  # gemma3_mm.py
    "mistral3": "[IMG]",  # mistral3.py (HF format; the Mistral format is PixtralForConditionalGeneration)
    "internvl": "<IMG_CONTEXT>",  # InternVLForConditionalGeneration (-hf) runs as interns1.py
    "phi4_multimodal": "<|image|>",  # phi4_multimodal.py (native transformers format)
}
# Not here: Idefics2 (no vLLM model class in its docs: vLLM refuses it at load), and the
# remote-code Phi-3.5-vision / Phi-4-MM / InternVL / xGen-MM, whose adapters build the model's
# inputs themselves (`pick_adapter` refuses them).
# Modalities an engine may otherwise reserve encoder memory for; mmctx sends images only
# (the example's run_chat sets them to 0 in the same way).
_OTHER_MODALITIES = ("video", "audio")
# Part of every cache key: bump when how option spans or scores are computed changes.
SCORING_VERSION = "2"  # 2: token prompts (no second BOS after a template that writes one)

# `LLM.generate` in vLLM's shapes: engine prompts and `SamplingParams` keyword dicts in,
# one `RequestOutput` per prompt out, in order.
Engine = Callable[[list[dict], list[dict]], Sequence[Any]]


# ---- messages → engine prompts ---------------------------------------------------------------


def pick_adapter(model: str, model_type: str | None, name: str | None) -> Adapter:
    """The HF backend's family adapter for ``model``: its rendering and processor settings are
    used here too. One that builds the model's inputs itself is refused: vLLM processes images
    its own way, so its scores could not be the HF backend's."""
    adapter = adapter_for(model, model_type, name)
    if type(adapter).inputs is not Adapter.inputs:
        raise ModelError(
            f"the {adapter.family} adapter builds the model's inputs itself, which vLLM cannot take; use the HF backend"
        )
    return adapter


def unapplied_vision_adapter(model: str, adapter: Adapter, revision: str | None) -> str | None:
    """The LoRA folder a checkpoint ships for image inputs, where its adapter names one (adapter
    data ``vision_adapter``; Phi-4-multimodal: ``vision-lora``) and the checkpoint has it.

    The HF backend applies it after loading (the adapter's ``prepare``); a vLLM engine would need
    it as a LoRA request on every prompt, which this backend does not send, so such a checkpoint
    would answer images with its base weights.
    """
    sub = getattr(adapter, "vision_adapter", None)
    if not sub:
        return None
    name = f"{sub}/adapter_config.json"
    if Path(model).is_dir():
        return sub if (Path(model) / name).is_file() else None
    from transformers.utils import cached_file

    try:
        found = cached_file(model, name, revision=revision, _raise_exceptions_for_missing_entries=False)
    except Exception:  # noqa: BLE001 - an unreachable hub: loading the config fails first, with its own message
        return None
    return sub if found else None


def prompt_ids(tokenizer: Any, text: str) -> list[int]:
    """The ids of a template-rendered prompt, as the HF backend feeds them: special tokens only
    where the processor's own ``apply_chat_template(tokenize=True)`` adds them (no second BOS)."""
    return tokenizer(text, add_special_tokens=adds_special_tokens(tokenizer, [text]))["input_ids"]


def engine_prompt(ids: Sequence[int], images: Sequence[Any]) -> dict:
    """A vLLM token prompt: the rendered prompt's ids and, if any, its images in order."""
    if not images:
        return {"prompt_token_ids": list(ids)}
    return {"prompt_token_ids": list(ids), "multi_modal_data": {"image": list(images)}}


def check_placeholders(text: str, n_images: int, placeholder: str | None, model: str) -> None:
    """The rendered prompt must carry vLLM's placeholder once per image (``None``: a family
    vLLM documents no placeholder for, left to vLLM)."""
    if placeholder is None:
        return
    found = text.count(placeholder)
    if found != n_images:
        raise ModelError(
            f"{model}: the chat template wrote {found} image placeholders ({placeholder}) for {n_images} images; "
            "vLLM expands one per image"
        )


def max_images_per_prompt(prompts: Iterable[Prompt]) -> int:
    """The most images any prompt has: what ``limit_mm_per_prompt`` must allow."""
    return max((sum(len(m.images) for m in prompt) for prompt in prompts), default=0)


# ---- sampling --------------------------------------------------------------------------------


def generation_params(request: GenerateRequest) -> dict:
    """Greedy, up to ``max_new_tokens``; a stop string ends the text and stays in it (as in the HF backend)."""
    params: dict[str, Any] = {"temperature": 0.0, "max_tokens": request.max_new_tokens, "skip_special_tokens": True}
    if request.stop:
        params.update(stop=list(request.stop), include_stop_str_in_output=True)
    return params


def score_params(read_cache: bool = True) -> dict:
    """One token (nothing is generated that matters), the log-prob of each prompt token, no
    detokenising of those; ``read_cache`` lets the request read the prefix cache (see module doc)."""
    return {
        "temperature": 0.0,
        "max_tokens": 1,
        "prompt_logprobs": 0,
        "detokenize": False,
        "skip_reading_prefix_cache": not read_cache,
    }


def sampling_params(cls: Callable[..., Any], params: dict) -> Any:
    """``cls(**params)``; a vLLM older than ``skip_reading_prefix_cache`` gets the params without it."""
    try:
        return cls(**params)
    except TypeError:
        if "skip_reading_prefix_cache" not in params:
            raise
        return cls(**{k: v for k, v in params.items() if k != "skip_reading_prefix_cache"})


# ---- options → scoring requests --------------------------------------------------------------


@dataclass(frozen=True)
class OptionRequest:
    """One option of a query, as vLLM is asked for it.

    ``text`` is the whole prompt (generation prompt + lead + option); ``suffix`` its last
    text tokens after the context all options share, of which those from ``start`` on are
    the option's own (what is scored).
    """

    text: str
    suffix: tuple[int, ...]
    start: int

    @property
    def token_count(self) -> int:
        return len(self.suffix) - self.start


def option_requests(
    tokenizer: Any, prompt_text: str, answered: Sequence[str], options: Sequence[str], model: str
) -> list[OptionRequest]:
    """The options of one query; ``answered[i]`` is the conversation rendered with option i as
    the reply. Spans as in the HF backend: `mmctx.models.spans`."""
    conts = continuations(prompt_text, answered, options, model=model)
    _, suffixes, starts = option_spans(tokenizer, prompt_text, conts, model=model)
    return [
        OptionRequest(prompt_text + lead + text, tuple(suffix), start)
        for (lead, text), suffix, start in zip(conts, suffixes, starts)
    ]


# ---- vLLM outputs → results ------------------------------------------------------------------


def first_scored(output: Any, request: OptionRequest) -> int:
    """Position in ``prompt_token_ids`` of the option's first token."""
    return len(output.prompt_token_ids) - request.token_count


def cache_covers_option(output: Any, request: OptionRequest) -> bool:
    """Did the prefix cache reach into the option? Then its tokens' log-probs were never computed.

    A hit of ``c`` tokens leaves the log-probs of tokens ``1..c`` unset; token ``p`` is
    computed iff ``p > c``.
    """
    return (output.num_cached_tokens or 0) >= first_scored(output, request)


def check_alignment(output: Any, request: OptionRequest, model: str) -> None:
    """vLLM's processed prompt must end with the text tokenisation's continuation."""
    ids = list(output.prompt_token_ids)
    if len(ids) < len(request.suffix) or tuple(ids[len(ids) - len(request.suffix) :]) != request.suffix:
        raise ModelError(f"{model}: vLLM's prompt tokens and the text tokenisation disagree at the option")
    if output.prompt_logprobs is None or len(output.prompt_logprobs) != len(ids):
        raise ModelError(f"{model}: vLLM returned no prompt log-probs aligned with the prompt tokens")


def token_logprob(position: Any, token_id: int, model: str) -> float:
    """The log-prob of ``token_id`` at one prompt position (a dict token id → `Logprob`)."""
    entry = position.get(token_id) if position else None
    value = getattr(entry, "logprob", None)
    if value is None or not math.isfinite(value) or value > 1e-3:
        raise ModelError(f"{model}: vLLM gave no usable log-prob for prompt token {token_id} ({entry!r})")
    return float(value)


def option_loglikelihood(output: Any, request: OptionRequest, model: str) -> float:
    """Sum of the prompt log-probs of exactly the option's tokens (the last ``token_count``)."""
    check_alignment(output, request, model)
    if cache_covers_option(output, request):
        raise ModelError(f"{model}: the prefix cache covered the option's tokens; their log-probs were not computed")
    ids = output.prompt_token_ids
    scored = range(first_scored(output, request), len(ids))
    return sum(token_logprob(output.prompt_logprobs[p], ids[p], model) for p in scored)


def option_scores(
    outputs: Sequence[Any], requests: Sequence[OptionRequest], model: str, window: int | None
) -> OptionScores:
    """One query's `OptionScores`; ``prompt_tokens`` is the shared context with images expanded,
    as the HF backend counts it."""
    context = len(outputs[0].prompt_token_ids) - len(requests[0].suffix)
    longest = max(len(o.prompt_token_ids) for o in outputs)
    error = overflow(context, longest - context, window)
    if error:
        return OptionScores(error=error, prompt_tokens=context)
    return OptionScores(
        loglikelihoods=tuple(option_loglikelihood(o, r, model) for o, r in zip(outputs, requests)),
        token_counts=tuple(r.token_count for r in requests),
        prompt_tokens=context,
    )


def output_token_count(completion: Any) -> int:
    """Generated tokens, the end-of-turn token not counted (vLLM keeps it in ``token_ids``; HF does not)."""
    n = len(completion.token_ids)
    ended_on_token = completion.finish_reason == "stop" and not isinstance(completion.stop_reason, str)
    return n - 1 if ended_on_token and n else n


def read_generation(output: Any, max_new_tokens: int, window: int | None) -> Generation:
    """A `Generation` from a `RequestOutput` (or the error string its request failed with)."""
    if isinstance(output, str):
        return Generation(error=output)
    n_prompt = len(output.prompt_token_ids)
    error = overflow(n_prompt, max_new_tokens, window)
    if error:
        return Generation(error=error, prompt_tokens=n_prompt)
    completion = output.outputs[0]
    return Generation(
        text=completion.text,
        prompt_tokens=n_prompt,
        output_tokens=output_token_count(completion),
        truncated=completion.finish_reason == "length",
    )


def overflow(n_tokens: int, extra: int, window: int | None) -> str | None:
    """The HF backend's rule: a prompt whose tokens plus ``extra`` exceed the window is an error."""
    if window is not None and n_tokens + extra > window:
        return f"context_overflow: prompt has {n_tokens} tokens (+{extra}), model window is {window}"
    return None


def describe_failure(exc: BaseException) -> str:
    """A request's failure as stored: vLLM's over-long-prompt refusal is a context overflow."""
    text = str(exc)
    if "longer than the maximum model length" in text:
        return f"context_overflow: {text}"
    return f"{type(exc).__name__}: {text}"


# ---- usage -----------------------------------------------------------------------------------


@dataclass
class PrefixCacheUsage:
    """Prompt tokens the engine was given vs read from its prefix cache, over `RequestOutput`s."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    recomputed: int = 0  # scoring requests sent again because the cache reached into the option

    def record(self, outputs: Iterable[Any]) -> None:
        for output in outputs:
            if isinstance(output, str):
                continue
            self.requests += 1
            self.prompt_tokens += len(output.prompt_token_ids)
            self.cached_tokens += output.num_cached_tokens or 0

    def as_dict(self) -> dict:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_cached": self.cached_tokens,
            "prompt_tokens_computed": self.prompt_tokens - self.cached_tokens,
            "prefix_cache_hit_rate": self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
            "recomputed_requests": self.recomputed,
        }


def engine_prefix_cache(metrics: Iterable[Any]) -> dict:
    """vLLM's own prefix-cache counters (``LLM.get_metrics``), summed over engines, in tokens."""
    totals = {"vllm:prefix_cache_queries": 0, "vllm:prefix_cache_hits": 0}
    for metric in metrics:
        if metric.name in totals:
            totals[metric.name] += int(getattr(metric, "value", 0))
    queries, hits = totals["vllm:prefix_cache_queries"], totals["vllm:prefix_cache_hits"]
    return {
        "engine_prefix_cache_queries": queries,
        "engine_prefix_cache_hits": hits,
        "engine_prefix_cache_hit_rate": hits / queries if queries else 0.0,
    }


# ---- the engine ------------------------------------------------------------------------------


def engine_args(
    model: str,
    *,
    max_images: int,
    revision: str | None = None,
    dtype: str = "auto",
    tensor_parallel_size: int = 1,
    max_model_len: int | None = None,
    trust_remote_code: bool = False,
    seed: int = 0,
    mm_processor_kwargs: dict | None = None,
    engine_metrics: bool = False,
    engine_kwargs: Mapping[str, Any] | None = None,
) -> dict:
    """Keyword arguments of `vllm.LLM`: prefix caching on, images per prompt capped at
    ``max_images`` (no video or audio), the HF processor set up as the adapter sets it
    (``mm_processor_kwargs``)."""
    args: dict[str, Any] = {
        "model": model,
        "revision": revision,
        "tokenizer_revision": revision,
        "dtype": dtype,
        "tensor_parallel_size": tensor_parallel_size,
        "trust_remote_code": trust_remote_code,
        "enable_prefix_caching": True,
        "limit_mm_per_prompt": {"image": max_images, **{m: 0 for m in _OTHER_MODALITIES}},
        "seed": seed,
        "disable_log_stats": not engine_metrics,
    }
    if max_model_len is not None:
        args["max_model_len"] = max_model_len
    if mm_processor_kwargs:
        args["mm_processor_kwargs"] = dict(mm_processor_kwargs)
    return {**args, **(engine_kwargs or {})}


def start_llm(args: dict) -> Any:
    try:
        from vllm import LLM
    except ImportError as exc:
        hint = "the vLLM backend needs vllm: pip install 'mmctx[vllm]' (on a machine with a CUDA GPU)"
        raise ModelError(hint) from exc
    try:
        return LLM(**args)
    except Exception as exc:
        raise ModelError(f"vLLM could not load {args['model']!r}: {exc}") from exc


def run_llm(llm: Any, prompts: list[dict], params: list[dict]) -> Sequence[Any]:
    """`Engine` over a real `vllm.LLM`."""
    from vllm import SamplingParams

    return llm.generate(prompts, [sampling_params(SamplingParams, p) for p in params], use_tqdm=False)


def _revision(model: str, config: Any, revision: str | None) -> str:
    """As the HF backend names it: a local folder by its content, a hub model by the commit loaded."""
    local = Path(model)
    if local.is_dir():
        return "local-" + folder_digest(local)[:16]
    return getattr(config, "_commit_hash", None) or revision or "unknown"


def engine_context_window(llm: Any) -> int | None:
    config = getattr(llm, "model_config", None) or getattr(getattr(llm, "llm_engine", None), "model_config", None)
    return getattr(config, "max_model_len", None)


def engine_dtype(llm: Any) -> str | None:
    config = getattr(llm, "model_config", None) or getattr(getattr(llm, "llm_engine", None), "model_config", None)
    dtype = getattr(config, "dtype", None)
    return None if dtype is None else str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class VLLMOptions:
    """What the vLLM backend takes (`VLLMBackend`'s keyword arguments, less the test engine)."""

    max_images: int = 1  # vLLM's limit_mm_per_prompt; a run sets it to its plan's most
    revision: str | None = None
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    trust_remote_code: bool = False
    adapter: str | None = None  # the HF backend's family adapter; None: picked by model id and config
    image_settings: str = "checkpoint"  # or "paper": as the HF backend's
    seed: int = 0
    engine_metrics: bool = False  # keep vLLM's own prefix-cache counters (log stats on)
    engine_kwargs: Mapping[str, Any] | None = None  # more `vllm.LLM` arguments (its own quantization, …)

    hints: ClassVar[dict[str, str]] = {
        "quantization": "--quantization is the HF backend's (bitsandbytes); give vLLM's own in engine_kwargs",
        "threads": "--threads is the HF backend's (torch on CPU); vLLM runs on the GPU",
        "compile": "--compile is the HF backend's; vLLM compiles and captures CUDA graphs itself",
    }


@backend("vllm", options=VLLMOptions, sized_by_plan=True)
class VLLMBackend:
    """Generation and option log-likelihoods with an offline `vllm.LLM`.

    ``max_images`` caps images per prompt (vLLM's ``limit_mm_per_prompt``): a run passes its
    plan's most (`max_images_per_prompt`). ``adapter`` names the HF backend's family adapter
    (default: picked by model id and config, as there), and ``image_settings`` its image resolution
    (`mmctx.models.adapters.with_image_settings`). ``engine`` replaces the vLLM engine
    (tests); `engine_args` is what the engine is, or would be, started with.
    """

    def __init__(
        self,
        model: str,
        *,
        max_images: int = 1,
        revision: str | None = None,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        max_model_len: int | None = None,
        trust_remote_code: bool = False,
        adapter: str | None = None,
        image_settings: str = "checkpoint",
        seed: int = 0,
        engine_metrics: bool = False,
        engine_kwargs: Mapping[str, Any] | None = None,
        engine: Engine | None = None,
    ):
        config, family, self.processor = self._load(model, revision, trust_remote_code, adapter)
        kwargs = {"revision": revision, "trust_remote_code": trust_remote_code}
        self.adapter, image_identity = with_image_settings(family, image_settings, str(model), kwargs)
        lora = unapplied_vision_adapter(str(model), self.adapter, revision)
        if lora:
            raise ModelError(
                f"model {model!r} ships its vision LoRA in {lora}/, which the HF backend applies and this vLLM "
                "backend does not (vLLM takes it as a LoRA request per prompt); use the HF backend"
            )
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.image_placeholder = VLLM_IMAGE_PLACEHOLDERS.get(getattr(config, "model_type", None) or "")
        self._check_template(str(model))
        if self.adapter.max_images is not None:
            max_images = min(max_images, self.adapter.max_images)
        self.engine_args = engine_args(
            model,
            max_images=max_images,
            revision=revision,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            trust_remote_code=trust_remote_code,
            seed=seed,
            mm_processor_kwargs=self.adapter.processor_kwargs,
            engine_metrics=engine_metrics,
            engine_kwargs=engine_kwargs,
        )
        self._llm = start_llm(self.engine_args) if engine is None else None
        self._engine = engine or partial(run_llm, self._llm)
        self._engine_metrics = engine_metrics
        self._usage = PrefixCacheUsage()
        window = engine_context_window(self._llm) or max_model_len
        window = window or getattr(config.get_text_config(), "max_position_embeddings", None)
        self.info = ModelInfo(
            name=str(model),
            revision=_revision(model, config, revision),
            backend="vllm",
            settings={
                "dtype": engine_dtype(self._llm) or dtype,
                "tensor_parallel_size": tensor_parallel_size,
                "max_model_len": window,
                "scoring": SCORING_VERSION,
                "adapter": self.adapter.family,
                **image_identity,
            },
        )
        self.capabilities = Capabilities(
            max_images=max_images, interleaved=True, loglikelihood=True, chat_template=True, context_window=window
        )

    def _check_template(self, model: str) -> None:
        """Before any request: the chat template writes vLLM's placeholder once per image (a
        one-shot conversation as the probe), so a template vLLM cannot expand fails at load, by name."""
        turn = [{"type": "image"}, {"type": "text", "text": "?"}]
        probe = [
            {"role": "user", "content": turn},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": turn},
        ]
        try:
            text = self._render(probe, True)
        except Exception as exc:
            raise ModelError(f"{model}: the chat template cannot render a one-shot image conversation: {exc}") from exc
        check_placeholders(text, 2, self.image_placeholder, model)

    @staticmethod
    def _load(model: str, revision: str | None, trust_remote_code: bool, name: str | None) -> tuple[Any, Adapter, Any]:
        """The model's config, family adapter and HF processor (set up as the adapter says)."""
        from transformers import AutoConfig

        kwargs = {"revision": revision, "trust_remote_code": trust_remote_code}
        try:
            config = AutoConfig.from_pretrained(model, **kwargs)
        except Exception as exc:
            raise ModelError(f"model {model!r} could not be loaded: {exc}") from exc
        adapter = pick_adapter(str(model), getattr(config, "model_type", None), name)
        if adapter.needs_remote_code and not trust_remote_code:
            raise ModelError(f"model {model!r} ({adapter.family}) runs its own code: pass --trust-remote-code")
        try:
            # The adapter's loader, as in the HF backend: a family whose processor needs mending
            # (no chat template on the processor, no torchvision) gets the same mending here.
            processor = adapter.load_processor(model, kwargs)
        except Exception as exc:
            raise ModelError(f"model {model!r} could not be loaded: {exc}") from exc
        if getattr(processor, "chat_template", None) is None and adapter.uses_chat_template:
            raise ModelError(f"model {model!r} has no chat template; mmctx renders prompts through it")
        return config, adapter, processor

    @classmethod
    def from_spec(cls, spec: str, options: VLLMOptions | None = None, **overrides: Any) -> VLLMBackend:
        """``vllm:<HF id or folder>`` or ``vllm:builtin:<name>`` (recorded by that name)."""
        from mmctx.models import BUILTIN_PREFIX, resolve_builtin

        model = spec.removeprefix(SPEC_PREFIX)
        values = {**option_values(options or VLLMOptions()), **overrides}
        if not model.startswith(BUILTIN_PREFIX):
            return cls(model, **values)
        backend = cls(str(resolve_builtin(model)), **values)
        backend.info = ModelInfo(spec, backend.info.revision, backend.info.backend, backend.info.settings)
        return backend

    def usage(self) -> dict:
        """Prompt tokens computed vs total and the prefix-cache hit rate, over this backend's life."""
        usage = self._usage.as_dict()
        if self._engine_metrics and self._llm is not None:
            try:
                usage.update(engine_prefix_cache(self._llm.get_metrics()))
            except Exception:  # noqa: BLE001 - metrics are a report, never a failure
                pass
        return usage

    # ---- engine calls --------------------------------------------------------------------------

    def _run(self, prompts: list[dict], params: list[dict]) -> list[Any]:
        """Outputs in order; a batch that fails is sent again one by one, and a prompt that
        still fails comes back as its error string, so one bad prompt never fails the rest."""
        if not prompts:
            return []
        try:
            outputs = list(self._engine(prompts, params))
        except Exception as exc:  # noqa: BLE001 - recorded per request
            if len(prompts) == 1:
                return [describe_failure(exc)]
            return [out for p, sp in zip(prompts, params) for out in self._run([p], [sp])]
        self._usage.record(outputs)
        return outputs

    def _render(self, conversation: list[dict], generation_prompt: bool) -> str:
        """The prompt text, rendered as the HF backend renders it (the adapter's chat template)."""
        return self.adapter.render(self.processor, conversation, generation_prompt)

    def _images(self, parts: list[ImagePart]) -> list[Any]:
        return [load_rgb(part.path, part.sha256) for part in parts]

    def _engine_prompt(self, text: str, images: list[Any]) -> dict:
        """The token prompt vLLM is given for rendered ``text`` and its images."""
        check_placeholders(text, len(images), self.image_placeholder, self.info.name)
        return engine_prompt(prompt_ids(self.tokenizer, text), images)

    def engine_prompts(self, requests: list[GenerateRequest]) -> list[dict | str]:
        """Each request as the engine prompt it is sent as, or the error string it fails with
        (a bad image, a template that drops an image's placeholder): nothing is sent."""
        prompts: list[dict | str] = []
        for request in requests:
            try:
                conversation, images = chat_conversation(request.messages)
                prompts.append(self._engine_prompt(self._render(conversation, True), self._images(images)))
            except Exception as exc:  # noqa: BLE001 - a bad image fails its request only
                prompts.append(describe_failure(exc))
        return prompts

    # ---- generate ------------------------------------------------------------------------------

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        prompts = self.engine_prompts(requests)
        ready = [i for i, p in enumerate(prompts) if isinstance(p, dict)]
        outputs = self._run([prompts[i] for i in ready], [generation_params(requests[i]) for i in ready])
        results: list[Any] = list(prompts)
        for i, output in zip(ready, outputs):
            results[i] = output
        window = self.capabilities.context_window
        return [read_generation(out, r.max_new_tokens, window) for out, r in zip(results, requests)]

    # ---- score ---------------------------------------------------------------------------------

    def _query(self, request: ScoreRequest) -> tuple[list[OptionRequest], list[Any]]:
        """One query's option requests and its images (shared by all its options)."""
        conversation, parts = chat_conversation(request.messages)
        prompt_text = self._render(conversation, True)
        check_placeholders(prompt_text, len(parts), self.image_placeholder, self.info.name)
        answered = [self._render(conversation + [answer_turn(o)], False) for o in request.options]
        options = option_requests(self.tokenizer, prompt_text, answered, request.options, self.info.name)
        return options, self._images(parts)

    def score(self, requests: list[ScoreRequest]) -> list[OptionScores]:
        """All options of all ``requests`` go to the engine together."""
        queries: list[tuple[list[OptionRequest], list[Any]] | str] = []
        for request in requests:
            try:
                queries.append(self._query(request))
            except Exception as exc:  # noqa: BLE001 - a template or image problem fails its query only
                queries.append(describe_failure(exc))
        flat = [(q, option) for q, query in enumerate(queries) if not isinstance(query, str) for option in query[0]]
        prompts = [engine_prompt(prompt_ids(self.tokenizer, option.text), queries[q][1]) for q, option in flat]
        outputs = self._prompt_logprobs(prompts, [option for _, option in flat])
        by_query: dict[int, list[Any]] = {}
        for (q, _), output in zip(flat, outputs):
            by_query.setdefault(q, []).append(output)
        return [self._query_scores(query, by_query.get(q, [])) for q, query in enumerate(queries)]

    def _prompt_logprobs(self, prompts: list[dict], options: list[OptionRequest]) -> list[Any]:
        """One output per option; where the prefix-cache hit reached the option, computed again
        with the cache unread (see the module doc)."""
        outputs = self._run(prompts, [score_params()] * len(prompts))
        redo = [
            i
            for i, (out, option) in enumerate(zip(outputs, options))
            if not isinstance(out, str) and cache_covers_option(out, option)
        ]
        self._usage.recomputed += len(redo)
        again = self._run([prompts[i] for i in redo], [score_params(read_cache=False)] * len(redo))
        for i, out in zip(redo, again):
            outputs[i] = out
        return outputs

    def _query_scores(self, query: tuple[list[OptionRequest], list[Any]] | str, outputs: list[Any]) -> OptionScores:
        if isinstance(query, str):
            return OptionScores(error=query)
        failed = next((out for out in outputs if isinstance(out, str)), None)
        if failed is not None:
            return OptionScores(error=failed)
        try:
            return option_scores(outputs, query[0], self.info.name, self.capabilities.context_window)
        except ModelError as exc:
            return OptionScores(error=describe_failure(exc))
