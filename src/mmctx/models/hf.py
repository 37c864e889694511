"""HF transformers backend: any image-text-to-text model with a chat template.

Loads through `AutoModelForImageTextToText` + the family adapter's processor loader
(`AutoProcessor` by default; the tests build Idefics3, LLaVA and Qwen2-VL checkpoints offline).
`trust_remote_code` is off unless the caller turns it on.

Option scoring encodes the shared prompt once per query: one prefill over the prompt (images
included), then all options in one packed sequence, each attending to the prefix and to
itself only (or a batch against copies of the KV cache). Option tokens take the positions the
model itself would give them (Qwen's multimodal RoPE shifts text after images). Which path a
model takes is decided once, on its first scored query, against one full forward per option
on a probe of multi-token options (`OptionCheck`); a model that no shared-prefix path scores
exactly is scored one full forward per option. The option's tokens are located in the
text-token space, where image expansion cannot shift them, and the alignment with the
processor's expanded ids is checked, not assumed. The long prompt is tokenised once per query
and each option only from the prompt's last special token on (`mmctx.models.spans.encode_options`,
equal token for token to tokenising it whole). The chat template still renders the whole
conversation once per option: a template may treat an answer's text in any way (trim it, open
it with a think block), and nothing short of rendering shows how.
Whatever the chat template puts between the generation prompt and the answer (a space, an
empty ``<think></think>`` block) is context, not option.
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from PIL import Image

from mmctx.models.adapters import Adapter, adapter_for, with_image_settings
from mmctx.models.base import (
    Capabilities,
    GenerateRequest,
    Generation,
    ModelInfo,
    OptionScores,
    ScoreRequest,
)
from mmctx.models.decode import CompiledGreedy
from mmctx.models.image_cache import CachedImageProcessor
from mmctx.models.images import load_rgb
from mmctx.models.registry import backend, option_values
from mmctx.models.revision import folder_digest
from mmctx.models.spans import (
    EncodedPrompt,
    ModelError,
    answer_turn,
    chat_conversation,
    common_suffix,
    continuations,
    encode_options,
    encode_prompt,
    option_tokens,
    restart_tokens,
    spans_of,
)
from mmctx.prompts.messages import Prompt

log = logging.getLogger(__name__)

# Part of every cache key: bump when how option spans or scores are computed changes.
SCORING_VERSION = "3"

# How far a shared-prefix path's option log-likelihood (nats, summed over the option's tokens)
# may be from one full forward per option for the path to be taken. In float32 the two differ
# only by summation order, far below 1e-4 (the figure the README states). In half precision
# they differ by rounding of that order (bfloat16 keeps 8 bits of mantissa), so the check there
# catches only mechanism errors larger than that: wrong positions after images in a real
# model's prompt are off by hundreds of positions.
EXACT_TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}


@dataclass(frozen=True)
class OptionCheck:
    """How a model's option-scoring path was chosen, on its first scored query.

    ``differences``: per shared-prefix path, its largest difference (nats) from one full
    forward per option on the probe; ``failures``: paths that raised, and the error.
    """

    path: str  # "packed", "copied" or "per_option"
    probe_options: tuple[str, ...]
    probe_token_counts: tuple[int, ...]
    tolerance: float
    differences: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


@dataclass
class _Query:
    """A scoring query made ready: processed shared context and each option's token span."""

    images: list[Image.Image]
    prompt_text: str
    conts: list[tuple[str, str]]
    inputs: dict  # processor outputs cut to the shared context
    context_len: int
    suffixes: list[list[int]]
    starts: list[int]


# Families whose transformers processors import torchvision (video processors, or image
# processors that exist only in their torchvision form); the Qwen-VL adapter falls back to an
# image-only processor instead.
TORCHVISION_FAMILIES = "InternVL (-hf), Mistral 3 / Pixtral, Phi-4-multimodal and, for video, Qwen2/2.5/3-VL"


def _torchvision_missing(exc: BaseException) -> bool:
    import importlib.util

    return "torchvision" in str(exc).lower() and importlib.util.find_spec("torchvision") is None


def has_sliding_window(text_config) -> bool:
    """Whether any attention layer of the language model sees only a window of recent tokens.

    ``layer_types`` (transformers 5) names each layer's kind; older configs say it with
    ``sliding_window`` alone, unless ``use_sliding_window`` turns it off (Qwen2's configs carry a
    window they do not use). A window at least as long as the model's longest context is none.
    """
    window = getattr(text_config, "sliding_window", None)
    longest = getattr(text_config, "max_position_embeddings", None)
    if window and longest and window >= longest:
        return False  # a window no prompt can exceed never takes effect (Phi-4's 262,144 over 131,072)
    types = getattr(text_config, "layer_types", None)
    if types:
        return any("sliding" in str(t) for t in types)
    return bool(window) and getattr(text_config, "use_sliding_window", True) is not False


# Below this many parameters a CPU forward pass is too small to share out: a second thread makes
# it no faster and costs more CPU (benchmarks/threads_speed.py measures it).
SMALL_MODEL_PARAMETERS = 50_000_000


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, which containers and taskset narrow)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads(device: str, parameters: int) -> int:
    """torch's CPU threads when none are asked for: one for a small model on CPU, every usable
    core for a larger one; on a GPU, the CPU only preprocesses images, for which four are plenty."""
    cores = usable_cores()
    if not device.startswith("cpu"):
        return min(4, cores)
    return 1 if parameters < SMALL_MODEL_PARAMETERS else cores


def _pick_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _pick_dtype(dtype: str, device: str) -> torch.dtype:
    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; choose auto, float32, bfloat16 or float16") from None


def _quantization_kwargs(quantization: str | None, adapter: Adapter) -> dict:
    """bitsandbytes 8-bit / 4-bit loading, where the family supports it and the package is there."""
    if quantization is None:
        return {}
    if quantization not in adapter.quantization:
        raise ModelError(
            f"{adapter.family} models cannot be loaded in {quantization!r}; supported: {adapter.quantization}"
        )
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError as exc:
        raise ModelError("quantized loading needs bitsandbytes: pip install 'mmctx[quant]'") from exc
    config = BitsAndBytesConfig(load_in_8bit=True) if quantization == "8bit" else BitsAndBytesConfig(load_in_4bit=True)
    return {"quantization_config": config, "device_map": "auto"}


@dataclass(frozen=True)
class HFOptions:
    """What the HF backend takes (`HFBackend`'s keyword arguments)."""

    revision: str | None = None  # branch, tag or commit to pin
    device: str = "auto"  # auto, cpu, cuda, cuda:1, mps
    dtype: str = "auto"  # auto (bf16/fp16 on GPU, fp32 on CPU), float32, bfloat16, float16
    batch_size: int = 8  # prompts per generate call; options per scoring forward
    trust_remote_code: bool = False
    attn_implementation: str | None = None
    adapter: str | None = None  # family adapter; None: picked by model id and config
    quantization: str | None = None  # 8bit or 4bit (bitsandbytes), where the family allows
    image_settings: str = "checkpoint"  # or "paper": the adapter's paper resolution settings (see `Adapter`)
    threads: int | None = None  # torch's CPU threads; None: `default_threads`
    compile: bool = False  # decode single prompts through a compiled step (`mmctx.models.decode`)


@backend("hf", options=HFOptions)
class HFBackend:
    """Generation and option log-likelihoods with a transformers model."""

    @classmethod
    def from_spec(cls, spec: str, options: HFOptions | None = None, **overrides: object) -> HFBackend:
        """An HF id, a local folder or ``builtin:<name>`` (built or found, then recorded by that name)."""
        from mmctx.models import BUILTIN_PREFIX, resolve_builtin

        values = {**option_values(options or HFOptions()), **overrides}
        if not spec.startswith(BUILTIN_PREFIX):
            return cls(spec, **values)  # type: ignore[arg-type]
        backend = cls(str(resolve_builtin(spec)), **values)  # type: ignore[arg-type]
        backend.info = ModelInfo(spec, backend.info.revision, backend.info.backend, backend.info.settings)
        return backend

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        trust_remote_code: bool = False,
        attn_implementation: str | None = None,
        adapter: str | None = None,
        quantization: str | None = None,
        image_settings: str = "checkpoint",
        threads: int | None = None,
        compile: bool = False,
    ):
        import transformers

        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")

        self.device = _pick_device(device)
        self.dtype = _pick_dtype(dtype, self.device)
        self.batch_size = batch_size
        kwargs = {"revision": revision, "trust_remote_code": trust_remote_code}
        self.adapter, image_identity = with_image_settings(
            self._adapter(model, adapter, kwargs), image_settings, model, kwargs
        )
        if self.adapter.needs_remote_code and not trust_remote_code:
            raise ModelError(f"model {model!r} ({self.adapter.family}) runs its own code: pass --trust-remote-code")
        try:
            self.processor = self.adapter.load_processor(model, kwargs)
            auto_class = getattr(transformers, self.adapter.auto_class)
            self.model = auto_class.from_pretrained(
                model,
                dtype=self.dtype,
                attn_implementation=attn_implementation,
                **_quantization_kwargs(quantization, self.adapter),
                **kwargs,
            )
        except ModelError:
            raise
        except Exception as exc:
            if _torchvision_missing(exc):
                raise ModelError(
                    f"model {model!r} ({self.adapter.family}) needs torchvision for its processor, which is not "
                    f"installed: pip install 'mmctx[vision]' (processors of {TORCHVISION_FAMILIES} need it)"
                ) from exc
            raise ModelError(f"model {model!r} could not be loaded: {exc}") from exc
        if quantization is None:  # quantized weights are placed by their loader
            self.model.to(self.device)
        self.model.eval()
        self.threads = threads or default_threads(self.device, sum(p.numel() for p in self.model.parameters()))
        torch.set_num_threads(self.threads)
        self.processor = self.adapter.prepare(self.model, self.processor)
        if CachedImageProcessor.assembles(getattr(self.processor, "image_processor", None)):
            self.processor.image_processor = CachedImageProcessor(self.processor.image_processor)
        self.processor_overrides = self.adapter.overrides(model, kwargs)
        text_config = self.model.config.get_text_config()
        self._attn_impl = getattr(text_config, "_attn_implementation", None) or "eager"
        self._sliding_window = has_sliding_window(text_config)
        # "packed" (needs a custom 4D mask, which flash attention cannot take), "copied" or
        # "per_option"; None until the first scored query checks them (see `_choose_path`).
        self.option_path: str | None = None
        self.option_check: OptionCheck | None = None
        # The module holding a multimodal-RoPE model's position shift after its last prompt.
        self._rope_owner = next((m for m in self.model.modules() if hasattr(m, "rope_deltas")), None)
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        if getattr(self.processor, "chat_template", None) is None and self.adapter.uses_chat_template:
            raise ModelError(f"model {model!r} has no chat template; mmctx renders prompts through it")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        eos = self.model.generation_config.eos_token_id
        self._eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.compiled = CompiledGreedy(self.model, self._eos_ids) if compile else None
        local = Path(model)
        # The commit actually loaded beats the name asked for ("main" moves).
        resolved = (
            "local-" + folder_digest(local)[:16]
            if local.is_dir()
            else getattr(self.model.config, "_commit_hash", None) or revision
        )
        self.info = ModelInfo(
            name=str(model),
            revision=resolved or "unknown",
            backend="hf",
            settings={
                "dtype": str(self.dtype).removeprefix("torch."),
                "device": self.device.split(":")[0],
                "scoring": SCORING_VERSION,
                "adapter": self.adapter.family,
                **({"quantization": quantization} if quantization else {}),
                **image_identity,
            },
        )
        self.capabilities = Capabilities(
            max_images=self.adapter.max_images,
            interleaved=True,
            loglikelihood=True,
            chat_template=True,
            context_window=getattr(text_config, "max_position_embeddings", None),
        )

    def usage(self) -> dict:
        """What the run records of this backend: processor settings mmctx changed from the
        checkpoint's, how often preprocessed images were reused, and which option-scoring path
        it chose, and why."""
        used: dict = {"threads": self.threads}
        if self.compiled is not None:
            used["compiled_decoding"] = self.compiled.usage()
        if self.processor_overrides:
            used["processor_overrides"] = self.processor_overrides
        images = getattr(self.processor, "image_processor", None)
        used["image_preprocessing"] = images.usage() if isinstance(images, CachedImageProcessor) else {"cached": False}
        if self.option_check is None:
            return used
        check = self.option_check
        return {**used, "option_scoring": {
            "path": check.path, "tolerance": check.tolerance, "probe_options": list(check.probe_options),
            "probe_token_counts": list(check.probe_token_counts), "differences": check.differences,
            "failures": check.failures, "sliding_window_layers": self._sliding_window,
        }}  # fmt: skip

    # ---- prompt encoding -------------------------------------------------------------

    @staticmethod
    def _hf_messages(messages: Prompt) -> tuple[list[dict], list[Image.Image]]:
        conversation, parts = chat_conversation(messages)
        return conversation, [load_rgb(part.path, part.sha256) for part in parts]

    @staticmethod
    def _adapter(model: str, name: str | None, kwargs: dict) -> Adapter:
        """The family adapter for ``model``; refuses, naming model and cause, what nothing can load."""
        import transformers
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(model, **kwargs)
        except Exception:  # remote-code configs need trust first; the id still selects the family
            config = None
        model_type = getattr(config, "model_type", None)
        try:
            adapter = adapter_for(str(model), model_type, name)
        except ValueError as exc:
            raise ModelError(f"model {model!r}: {exc}") from None
        # A config transformers knows but the adapter's auto class does not map (a text-only or
        # an encoder checkpoint, or a family mmctx has no adapter for) fails here, before any
        # weights load, rather than deep inside from_pretrained.
        if adapter.needs_remote_code or config is None:
            return adapter  # remote code brings its own classes; checked after trust is given
        if type(config) not in getattr(transformers, adapter.auto_class)._model_mapping:
            raise ModelError(
                f"model {model!r}: config type {model_type!r} is not an image-text-to-text model that "
                f"{adapter.auto_class} loads, and no mmctx adapter covers it (adapter {adapter.family!r}); "
                "see `mmctx models`, or pass --adapter for a family that loads it"
            )
        return adapter

    def _template(self, hf_messages: list[dict], generation_prompt: bool) -> str:
        return self.adapter.render(self.processor, hf_messages, generation_prompt)

    def _rendered(self, messages: Prompt) -> tuple[str, list[Image.Image]]:
        """The prompt's text as the chat template renders it, up to the answer, and its images in order."""
        hf, images = self._hf_messages(messages)
        return self._template(hf, generation_prompt=True), images

    def prompt_tokens(self, messages: Prompt) -> int:
        """The tokens ``messages`` take as `generate` feeds them to the model: the chat template's
        rendering up to the answer, each image expanded by the processor into its tokens (equal
        to a generation's ``prompt_tokens``). Nothing runs on the model."""
        text, images = self._rendered(messages)
        return len(self.adapter.inputs(self.processor, [text], [images])["input_ids"][0])

    def _process(self, texts: list[str], images: list[list[Image.Image]]) -> dict:
        inputs = self.adapter.inputs(self.processor, texts, images)
        return {k: self._to_model(v) for k, v in inputs.items()}

    def _to_model(self, value):
        """Tensors onto the model's device; floating ones (pixels) in its dtype too."""
        if isinstance(value, torch.Tensor):
            return value.to(self.device, dtype=self.dtype) if value.is_floating_point() else value.to(self.device)
        if isinstance(value, list):
            return [self._to_model(v) for v in value]
        return value

    def _overflow(self, n_tokens: int, extra: int) -> str | None:
        window = self.capabilities.context_window
        if window is not None and n_tokens + extra > window:
            return f"context_overflow: prompt has {n_tokens} tokens (+{extra}), model window is {window}"
        return None

    # ---- generate --------------------------------------------------------------------

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        results: list[Generation] = []
        for start in range(0, len(requests), self.batch_size):
            results.extend(self._generate_batch(requests[start : start + self.batch_size]))
        return results

    def _generate_batch(self, batch: list[GenerateRequest]) -> list[Generation]:
        if len({(r.max_new_tokens, r.stop) for r in batch}) != 1:
            # Different limits cannot share one `generate` call; split rather than guess.
            return [g for r in batch for g in self._generate_batch([r])]
        texts, images = [], []
        for r in batch:
            text, imgs = self._rendered(r.messages)
            texts.append(text)
            images.append(imgs)
        inputs = self._process(texts, images)
        prompt_lens = inputs["attention_mask"].sum(dim=1).tolist()
        limit = batch[0].max_new_tokens
        errors = [self._overflow(n, limit) for n in prompt_lens]
        if all(errors):
            return [Generation(error=e, prompt_tokens=n) for e, n in zip(errors, prompt_lens)]
        if any(errors):
            return [g for r in batch for g in self._generate_batch([r])]
        gen_kwargs = {"max_new_tokens": limit, "do_sample": False, "pad_token_id": self.tokenizer.pad_token_id}
        if batch[0].stop:
            gen_kwargs.update(stop_strings=list(batch[0].stop), tokenizer=self.tokenizer)
        with torch.inference_mode():
            rows = self._new_tokens(batch, inputs, gen_kwargs)
        results = []
        for row, n_prompt in zip(rows, prompt_lens):
            ended = self._first_eos(row)
            tokens = row[:ended] if ended is not None else [t for t in row if t != self.tokenizer.pad_token_id]
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            stopped_by_string = bool(batch[0].stop) and any(text.rstrip().endswith(s) for s in batch[0].stop)
            truncated = ended is None and len(tokens) >= limit and not stopped_by_string
            results.append(
                Generation(text=text, prompt_tokens=n_prompt, output_tokens=len(tokens), truncated=truncated)
            )
        return results

    def _new_tokens(self, batch: list[GenerateRequest], inputs: dict, gen_kwargs: dict) -> list[list[int]]:
        """Each prompt's generated token ids: `generate()`'s, or the compiled decoder's where it
        serves the call (one prompt, no stop strings) and agrees with `generate()` when checked."""
        width = inputs["input_ids"].shape[1]

        def generated() -> list[list[int]]:
            return self.model.generate(**inputs, **gen_kwargs)[:, width:].tolist()

        compiled = self.compiled
        if compiled is None or compiled.off is not None or len(batch) > 1 or batch[0].stop:
            return generated()
        check = compiled.due_for_check()
        try:
            tokens = compiled.decode(inputs, gen_kwargs["max_new_tokens"])
        except Exception as exc:  # a model the compiler or the static cache cannot take
            compiled.off = f"compiled decoding failed: {type(exc).__name__}: {str(exc)[:300]}"
            log.warning("%s; generating with generate() instead", compiled.off)
            return generated()
        if not check:
            return [tokens]
        reference = generated()[0]
        compiled.checked += 1
        ended = self._first_eos(reference)
        if reference[: None if ended is None else ended + 1] != tokens:
            compiled.off = (
                f"compiled decoding gave {tokens} where generate() gave {reference} "
                f"(a {width}-token prompt, check {compiled.checked})"
            )
            log.warning("%s; generating with generate() from here on", compiled.off)
        return [reference]

    def _first_eos(self, row: list[int]) -> int | None:
        return next((i for i, t in enumerate(row) if t in self._eos_ids), None)

    # ---- score -----------------------------------------------------------------------

    def _continuations(self, hf: list[dict], prompt_text: str, options: tuple[str, ...]) -> list[tuple[str, str]]:
        """Per option, ``(lead, text)``: see `mmctx.models.spans.continuations`."""
        answered = [self._template(hf + [answer_turn(option)], False) for option in options]
        return continuations(prompt_text, answered, options, model=self.info.name)

    def _option_tokens(self, context: str, option: str) -> tuple[list[int], int]:
        """See `mmctx.models.spans.option_tokens`."""
        return option_tokens(self.tokenizer, context, option)

    @cached_property
    def _restarts(self) -> dict[int, str]:
        """See `mmctx.models.spans.restart_tokens`."""
        return restart_tokens(self.tokenizer)

    def _option_spans(
        self, prompt: EncodedPrompt, conts: list[tuple[str, str]]
    ) -> tuple[int, list[list[int]], list[int]]:
        """``(drop, suffixes, starts)`` of `mmctx.models.spans.option_spans`, token for token.

        The long prompt is tokenised once per query (``prompt``), each option only from the
        prompt's last restart token on (`mmctx.models.spans.encode_options`).
        """
        encoded = encode_options(self.tokenizer, prompt, conts, self._restarts)
        return spans_of(prompt.ids, encoded, model=self.info.name)

    def _check_alignment(self, expanded: list[int], text_ids: list[int], drop: int) -> None:
        """The processed prompt must end with the text-only tokenisation's (``text_ids``) last ``drop + 1`` tokens.

        Option tokens are located in text space and appended after ``expanded[:-drop]``; that is
        right when the tokens around that boundary are the same in both. A processor may rewrite
        the text near its image markers (Idefics2 writes a space after its closing
        ``<fake_token_around_image>``), so the whole tail after the last image need not agree,
        only its end. The first scored query also checks the result against one full forward
        per option through the processor (`_choose_path`).
        """
        image_ids = {
            getattr(self.processor, "image_token_id", None),
            getattr(self.model.config, "image_token_id", None),
        }
        last_image = max((i for i, t in enumerate(text_ids) if t in image_ids), default=-1)
        tail = text_ids[last_image + 1 :]
        needed = min(len(tail), drop + 1)
        if needed and common_suffix(expanded, tail) < needed:
            raise ModelError(f"{self.info.name}: processed prompt and text tokenisation disagree at the prompt's end")

    def score(self, requests: list[ScoreRequest]) -> list[OptionScores]:
        return [self._score_one(r) for r in requests]

    def _prepare(self, request: ScoreRequest) -> _Query | OptionScores:
        """The query's shared context and option spans, or an error result when it does not fit."""
        hf, images = self._hf_messages(request.messages)
        prompt_text = self._template(hf, generation_prompt=True)
        conts = self._continuations(hf, prompt_text, request.options)
        prompt = encode_prompt(self.tokenizer, prompt_text)
        drop, suffixes, starts = self._option_spans(prompt, conts)
        inputs = self._process([prompt_text], [images])
        expanded = inputs["input_ids"][0].tolist()
        self._check_alignment(expanded, prompt.ids, drop)
        context_len = len(expanded) - drop
        error = self._overflow(context_len, max(len(s) for s in suffixes))
        if error:
            return OptionScores(error=error, prompt_tokens=len(expanded))
        # Every per-token input is cut, not just the ids (Qwen2-VL's mm_token_type_ids, Gemma's token_type_ids).
        width = len(expanded)
        for key, value in inputs.items():
            if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape == (1, width):
                inputs[key] = value[:, :context_len]
        return _Query(images, prompt_text, conts, inputs, context_len, suffixes, starts)

    def _score_one(self, request: ScoreRequest) -> OptionScores:
        query = self._prepare(request)
        if isinstance(query, OptionScores):
            return query
        if self.option_path is None:
            self._choose_path(request)
        # Until a probe could be checked (it did not fit the context), one option at a time: exact.
        lls = self._score_query(query, self.option_path or "per_option")
        counts = [len(s) - st for s, st in zip(query.suffixes, query.starts)]
        return OptionScores(loglikelihoods=tuple(lls), token_counts=tuple(counts), prompt_tokens=query.context_len)

    # ---- the scoring paths and the check that picks one -------------------------------

    def _score_query(self, query: _Query, path: str) -> list[float]:
        """The options' log-likelihoods along ``path``: "packed", "copied" or "per_option"."""
        if path == "per_option":
            return [ll for ll, _ in self._per_option(query.images, query.prompt_text, query.conts)]
        with torch.inference_mode():
            self._forget_position_shift()
            # Only the last position's logits are needed: a full-vocabulary row per prompt token
            # would cost gigabytes on real models with long few-shot prompts.
            prefill = self.model(**query.inputs, use_cache=True, logits_to_keep=1)
            cache = prefill.cache
            last = prefill.logits[0, -1].float().log_softmax(-1)
            # Where the model puts the token after the prefix: its index, plus the model's own
            # correction for positions images did not take (Qwen's multimodal RoPE).
            first_position = query.context_len + self._position_shift()
            score = self._score_packed if path == "packed" else self._score_copied
            lls: list[float] = []
            for start in range(0, len(query.suffixes), self.batch_size):
                suffixes = query.suffixes[start : start + self.batch_size]
                starts = query.starts[start : start + self.batch_size]
                lls.extend(score(cache, last, query.context_len, first_position, suffixes, starts))
        return lls

    def _choose_path(self, request: ScoreRequest) -> None:
        """Pick the fastest path whose scores equal one full forward per option, on a probe.

        The probe is the query's prompt with options of several tokens each and of different
        lengths, built from the query's own options: with one-token options (colour words,
        letters) every path reads the same prefix logits, and a check on them tests nothing.
        A path that raises or differs by more than the tolerance is not taken; when neither
        fast path qualifies, options are scored one full forward each (slow, exact).
        """
        probe = ScoreRequest(request.messages, self._probe_options(request))
        query = self._prepare(probe)
        if isinstance(query, OptionScores):
            return  # the probe does not fit the context; the next query tries again
        reference = [ll for ll, _ in self._per_option(query.images, query.prompt_text, query.conts)]
        tolerance = EXACT_TOLERANCE.get(self.dtype, EXACT_TOLERANCE[torch.float16])
        # The packed path's one 4-D mask cannot express a sliding window (Gemma 3's local layers
        # keep only the window in their cache): such a model is never packed, however short the
        # probe, since later prompts exceed the window. The copied path extends each option as
        # generation does, window included, and is checked like any other.
        packs = self._attn_impl in ("sdpa", "eager") and not self._sliding_window
        candidates = ("packed", "copied") if packs else ("copied",)
        differences: dict[str, float] = {}
        failures: dict[str, str] = {}
        for path in candidates:
            try:
                scores = self._score_query(query, path)
            except Exception as exc:  # a path this model cannot run is not taken
                failures[path] = f"{type(exc).__name__}: {exc}"
                continue
            differences[path] = max(abs(a - b) for a, b in zip(scores, reference))
        exact = [p for p in candidates if differences.get(p, math.inf) <= tolerance]  # NaN is never exact
        path = exact[0] if exact else "per_option"
        if path == "per_option":
            log.warning(
                "%s: shared-prefix option scoring is not exact for this model (largest differences %s, "
                "errors %s; tolerance %g); scoring one full forward per option",
                self.info.name, differences, failures, tolerance,
            )  # fmt: skip
        self.option_check = OptionCheck(
            path=path,
            probe_options=probe.options,
            probe_token_counts=tuple(len(s) - st for s, st in zip(query.suffixes, query.starts)),
            tolerance=tolerance,
            differences=differences,
            failures=failures,
        )
        self.option_path = path

    def _probe_options(self, request: ScoreRequest) -> tuple[str, ...]:
        """Three options of 2, 3 and 4 of the query's option texts each: several tokens, three lengths."""
        words = [o.strip() for o in request.options if o.strip()] or ["yes", "no"]
        return tuple(" ".join(words[(i + k) % len(words)] for k in range(n)) for i, n in enumerate((2, 3, 4)))

    def _forget_position_shift(self) -> None:
        # Qwen-style models keep the last prompt's rope delta and reuse it whenever a cache
        # is passed; a text-only prompt computes none, so a stale one must not survive it.
        if self._rope_owner is not None:
            self._rope_owner.rope_deltas = None

    def _position_shift(self) -> int:
        """The model's position of the token after the prefill, minus its index (0 for 1-D RoPE)."""
        deltas = getattr(self._rope_owner, "rope_deltas", None)
        return int(deltas.reshape(-1)[0]) if isinstance(deltas, torch.Tensor) else 0

    @staticmethod
    def _sum_option(logprobs: torch.Tensor, offset: int, last: torch.Tensor, suffix: list[int], start: int) -> float:
        """Sum of log-probabilities of ``suffix[start:]``; row ``offset + p - 1`` predicts token ``p``."""
        return sum(float((last if p == 0 else logprobs[offset + p - 1])[suffix[p]]) for p in range(start, len(suffix)))

    def _score_packed(
        self, cache, last, context_len: int, first_position: int, suffixes: list[list[int]], starts: list[int]
    ) -> list[float]:
        """All options in one sequence after the shared prefix, each seeing only the prefix and itself.

        No copy of the KV cache is made (a long few-shot prefix can hold gigabytes of it); the
        cache is cropped back to the prefix afterwards. Each option's tokens take the positions
        they would have right after the prefix, from ``first_position`` on.
        """
        ids = [t for s in suffixes for t in s]
        owner = torch.tensor([a for a, s in enumerate(suffixes) for _ in s])
        local = torch.tensor([p for s in suffixes for p in range(len(s))])
        own_past = (owner[:, None] == owner[None, :]) & (local[:, None] >= local[None, :])
        allowed = torch.cat([torch.ones(len(ids), context_len, dtype=torch.bool), own_past], dim=1)[None, None]
        mask = (
            allowed
            if self._attn_impl == "sdpa"
            else torch.zeros(allowed.shape, dtype=self.dtype).masked_fill(~allowed, torch.finfo(self.dtype).min)
        )
        out = self.model(
            input_ids=torch.tensor([ids], device=self.device),
            position_ids=(local + first_position)[None].to(self.device),
            attention_mask=mask.to(self.device),
            cache=cache,
            use_cache=True,
        )
        cache.crop(-len(ids))  # negative: remove that many tokens (the API of transformers 5)
        logprobs = out.logits[0].float().log_softmax(-1)
        offsets = [sum(len(s) for s in suffixes[:a]) for a in range(len(suffixes))]
        return [self._sum_option(logprobs, o, last, s, st) for o, s, st in zip(offsets, suffixes, starts)]

    def _score_copied(
        self, cache, last, context_len: int, first_position: int, suffixes: list[list[int]], starts: list[int]
    ) -> list[float]:
        """Options as a right-padded batch against copies of the prefix's KV cache.

        Positions are passed, not left to the model: a model that derives them from the
        attention mask and a cached rope delta (Qwen2-VL) builds them for the whole masked
        width, prefix included, and fails.
        """
        n, width = len(suffixes), max(len(s) for s in suffixes)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in suffixes], device=self.device)
        mask = torch.tensor(
            [[1] * (context_len + len(s)) + [0] * (width - len(s)) for s in suffixes], device=self.device
        )
        positions = (torch.arange(width) + first_position)[None].expand(n, width).to(self.device)
        batch_cache = copy.deepcopy(cache)
        if n > 1:
            batch_cache.batch_repeat_interleave(n)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=batch_cache, use_cache=True)
        logprobs = out.logits.float().log_softmax(-1)
        return [self._sum_option(logprobs[row], 0, last, s, st) for row, (s, st) in enumerate(zip(suffixes, starts))]

    def _per_option(
        self, images: list[Image.Image], prompt_text: str, conts: list[tuple[str, str]]
    ) -> list[tuple[float, int]]:
        """Per option, its log-likelihood and token count from one full forward through the processor.

        No cache and no positions passed: the model computes everything itself, so this is
        exact for any position scheme. The scored tokens are the last ones of the processed
        text, as many as cover the option's characters.
        """
        out = []
        for lead, text in conts:
            _, n_option = self._option_tokens(prompt_text + lead, text)
            inputs = self._process([prompt_text + lead + text], [images])
            ids = inputs["input_ids"][0].tolist()
            with torch.inference_mode():
                self._forget_position_shift()
                # Logits of the last n_option + 1 positions only (the last predicts past the option):
                # a full-vocabulary row per prompt token would cost gigabytes on long prompts.
                logits = self.model(**inputs, logits_to_keep=n_option + 1).logits[0]
            logprobs = logits[:n_option].float().log_softmax(-1)  # row r predicts the option's token r
            out.append((sum(float(logprobs[r, ids[len(ids) - n_option + r]]) for r in range(n_option)), n_option))
        return out

    def score_naive(self, request: ScoreRequest) -> OptionScores:
        """Reference: one full forward per option through the processor, no cache, no packing.

        Slow on purpose; the fast paths' prefix sharing plays no part here.
        """
        hf, images = self._hf_messages(request.messages)
        prompt_text = self._template(hf, generation_prompt=True)
        scored = self._per_option(images, prompt_text, self._continuations(hf, prompt_text, request.options))
        prompt_tokens = len(self._process([prompt_text], [images])["input_ids"][0])
        return OptionScores(
            loglikelihoods=tuple(ll for ll, _ in scored),
            token_counts=tuple(n for _, n in scored),
            prompt_tokens=prompt_tokens,
        )
