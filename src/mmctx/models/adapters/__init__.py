"""Per-family adapters for the HF backend: the only place a model family's quirks live.

An adapter says how a family is loaded (auto class, remote code), how its prompt is rendered
from mmctx's chat messages, how text and images become model inputs, and what it can take
(image limits, tiling, dtypes, quantisation). The default adapter — chat template +
processor — serves every family that follows transformers' conventions; a family adapter
overrides only what differs. `adapter_for` picks one by model id or config ``model_type``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar


@dataclass(frozen=True)
class Adapter:
    family: str = "default"
    aliases: tuple[str, ...] = ()  # regexes over the model id (case-insensitive)
    model_types: tuple[str, ...] = ()  # config.model_type values
    auto_class: str = "AutoModelForImageTextToText"
    needs_remote_code: bool = False
    max_images: int | None = None
    processor_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. image size / tiling caps
    # Resolution settings of the paper's released code that no prompt needs in order to fit its
    # context (Idefics' 448-px resize): applied only when asked (`with_paper_settings`), since
    # on a checkpoint made for smaller images they upscale every image and back, at many times
    # the cost of the checkpoint's own setting.
    paper_processor_kwargs: dict[str, Any] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
    quantization: tuple[str, ...] = ()  # "8bit", "4bit" (bitsandbytes) where the family supports it
    notes: str = ""
    # Whether prompts are rendered through the checkpoint's chat template (a checkpoint without
    # one is refused); an adapter that writes the release's prompt format itself says False.
    uses_chat_template: ClassVar[bool] = True

    def matches(self, model_id: str, model_type: str | None = None) -> bool:
        if model_type and model_type in self.model_types:
            return True
        return self.named_by(model_id)

    def named_by(self, model_id: str) -> bool:
        return any(re.search(pattern, model_id, re.IGNORECASE) for pattern in self.aliases)

    def with_paper_settings(self) -> Adapter:
        """This adapter with the paper's resolution settings applied over the checkpoint's."""
        return replace(self, processor_kwargs={**self.processor_kwargs, **self.paper_processor_kwargs})

    def load_processor(self, model: str, kwargs: dict[str, Any]):
        """The processor of checkpoint ``model``; ``kwargs`` carry revision and remote-code trust."""
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(model, **self.processor_kwargs, **kwargs)

    def overrides(self, model: str, kwargs: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Where ``processor_kwargs`` replace what the checkpoint's own processor config says.

        ``{key: {"checkpoint": value, "mmctx": value}}`` for every key whose value differs (a key
        the checkpoint does not set shows ``None``); recorded with the run, so a reader sees that
        the paper's settings, not the release's, were applied.
        """
        if not self.processor_kwargs:
            return {}
        config = _processor_config(model, kwargs)
        return {
            key: {"checkpoint": config.get(key), "mmctx": value}
            for key, value in self.processor_kwargs.items()
            if config.get(key) != value
        }

    def render(self, processor, messages: list[dict], generation_prompt: bool) -> str:
        """The prompt text for ``messages`` (HF chat format, images as ``{"type": "image"}``)."""
        return processor.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)

    def prepare(self, model, processor):
        """Family set-up after loading (special tokens, token ids); returns the processor to use."""
        return processor

    def inputs(self, processor, texts: list[str], images: list[list]) -> dict:
        """Model inputs for a batch of rendered prompts and their images, in order.

        Special tokens are added as the processor's own ``apply_chat_template(tokenize=True)``
        adds them (`adds_special_tokens`): never a second BOS after a template's.
        """
        from mmctx.models.spans import adds_special_tokens

        tokenizer = getattr(processor, "tokenizer", processor)
        kwargs: dict[str, Any] = {
            "text": texts, "return_tensors": "pt", "padding": True,
            "add_special_tokens": adds_special_tokens(tokenizer, texts),
        }  # fmt: skip
        if any(images):
            kwargs["images"] = images
        return dict(processor(**kwargs))


IMAGE_SETTINGS = ("checkpoint", "paper")


def with_image_settings(
    adapter: Adapter, image_settings: str, model: str, kwargs: dict[str, Any]
) -> tuple[Adapter, dict[str, str]]:
    """The adapter to load ``model`` with under ``image_settings``, and what the choice adds to
    the model's recorded settings (`ModelInfo.settings`, so every cache key).

    ``"checkpoint"`` keeps the checkpoint's own resolution; ``"paper"`` applies the adapter's
    `Adapter.paper_processor_kwargs` over it. The choice is recorded only where the two would
    process this checkpoint's images differently; a run made with the paper's settings before
    the choice existed has no such entry, as ``"paper"`` has none, and keeps its keys.
    """
    if image_settings not in IMAGE_SETTINGS:
        raise ValueError(f"unknown image_settings {image_settings!r}; choose from {IMAGE_SETTINGS}")
    paper = adapter.with_paper_settings()
    differs = bool(adapter.paper_processor_kwargs) and paper.overrides(model, kwargs) != adapter.overrides(
        model, kwargs
    )
    if image_settings == "paper":
        return paper, {}
    return adapter, ({"image_settings": image_settings} if differs else {})


def _processor_config(model: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The image-processing settings a checkpoint ships: ``preprocessor_config.json``, else the
    ``image_processor`` section of ``processor_config.json`` (transformers 5's single file)."""
    import json

    from transformers.utils import cached_file

    found: dict[str, Any] = {}
    for name in ("processor_config.json", "preprocessor_config.json"):
        try:
            path = cached_file(
                model, name, revision=kwargs.get("revision"), _raise_exceptions_for_missing_entries=False
            )
        except Exception:  # noqa: BLE001 - an unreadable config means "not stated", not a failed load
            path = None
        if path:
            data = json.loads(open(path, encoding="utf-8").read())
            found.update(data.get("image_processor", data) if isinstance(data, dict) else {})
    return found


DEFAULT = Adapter()
ADAPTERS: list[Adapter] = []  # family adapters register here (see `register`)


def register(adapter: Adapter) -> Adapter:
    ADAPTERS.append(adapter)
    return adapter


def adapter_for(model_id: str, model_type: str | None = None, name: str | None = None) -> Adapter:
    """The adapter named ``name``, else the first whose aliases or model types match, else the default."""
    _load_families()
    if name:
        for a in ADAPTERS + [DEFAULT]:
            if a.family == name:
                return a
        raise ValueError(f"unknown adapter {name!r}; known: {[a.family for a in ADAPTERS + [DEFAULT]]}")
    # An id names a family only where the config's type does not contradict it (a native
    # checkpoint of a remote-code family); failing that, the type decides; registration order
    # breaks ties (the more specific xGen-MM base before instruct).
    named = [
        a
        for a in ADAPTERS
        if a.named_by(model_id) and (not model_type or not a.model_types or model_type in a.model_types)
    ]
    typed = [a for a in ADAPTERS if model_type and model_type in a.model_types]
    return (named or typed or [DEFAULT])[0]


def all_adapters() -> list[Adapter]:
    _load_families()
    return ADAPTERS + [DEFAULT]


def _load_families() -> None:
    # Family modules register themselves on import; imported once, lazily.
    import importlib
    import pkgutil

    if getattr(_load_families, "done", False):
        return
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    _load_families.done = True  # type: ignore[attr-defined]
