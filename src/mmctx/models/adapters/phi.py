"""Phi-3.5-vision and Phi-4-multimodal: remote code (raw-string prompts, numbered image tags), and
the native transformers Phi-4-multimodal.

The remote-code checkpoints both load with `AutoModelForCausalLM` + `AutoProcessor`
(``trust_remote_code``). Neither takes chat-format image entries: the prompt is a string in
which ``<|image_1|>`` … ``<|image_N|>`` stand for the images, numbered from 1 across the whole
prompt in the order the images are passed. `render` writes it:

* Phi-4-multimodal (model card): ``<|system|>…<|end|><|user|><|image_1|>…<|end|><|assistant|>…``
  with nothing between the tags;
* Phi-3.5-vision (its chat template): the same turns with a newline after every role tag,
  image tag and ``<|end|>``.

The processor tells them apart: Phi-4-MM's has an ``audio_processor``. `inputs` passes the
images as one flat list; for Phi-4-MM it makes sure ``input_mode`` (1 = vision, 0 = text
only) is in the inputs, since forward and generate need it. Phi-3.5-vision's processor encodes
one prompt per call, so batches of several prompts are refused (use batch size 1).

``num_crops=4`` (processor_kwargs) is Phi-3.5-vision's model-card setting for multi-image
prompts (16 is for single images): each image becomes at most 4 crops of 336 px plus a global
view, about 750 tokens, so 9 images take about 7k of its 128k context. Phi-4-MM's processor has
no such setting (its tiling is ``dynamic_hd`` in its own config) and ignores the keyword.

The main-branch hub repos are remote code written for transformers 4. Only stub processors test
this rendering (`tests/test_adapters.py`): the remote code is not part of transformers, so no tiny
checkpoint of it can be built offline.

``phi4_multimodal``: the native transformers conversion (model type ``phi4_multimodal``; the hub
repo's transformers-native revision). Its model class is registered under `AutoModelForCausalLM`
only; the prompt comes from its chat template, which writes one ``<|image|>`` per image (no
numbers: the processor expands each into that image's run of tokens, in order). The template
lives in the tokenizer's config alone, so `Phi4MultimodalProcessor.from_pretrained` returns a
processor without one; `load_processor` gives it the tokenizer's, as transformers' own conversion
script does (``processor.chat_template = processor.tokenizer.chat_template``). Images are tiled by
the checkpoint's own ``dynamic_hd`` (at most 36 crops of 448 px plus a global view), which is what
the paper's remote-code runs used too, so mmctx changes no processor setting. The vision LoRA the
release ships beside the base weights (``vision-lora/``) is applied by `prepare`, which needs
``peft``; a checkpoint that has one is refused without it rather than run without its vision
adapter.
Paper (FewMMBench A.2): fp32 for both (half precision was not compatible), no quantisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mmctx.models.adapters import Adapter, register
from mmctx.models.spans import ModelError

VISION_MODE, TEXT_MODE = 1, 0


def is_phi4(processor) -> bool:
    return hasattr(processor, "audio_processor")


@dataclass(frozen=True)
class PhiAdapter(Adapter):
    uses_chat_template = False  # writes the release's prompt format itself

    def matches(self, model_id: str, model_type: str | None = None) -> bool:
        # A config that loads without remote code is a native checkpoint, not this one.
        return (not model_type or model_type in self.model_types) and super().matches(model_id, model_type)

    def render(self, processor, messages: list[dict], generation_prompt: bool) -> str:
        nl = "" if is_phi4(processor) else "\n"
        text, n = "", 0
        for m in messages:
            body = ""
            for part in m["content"]:
                if part["type"] == "image":
                    n += 1
                    body += f"<|image_{n}|>{nl}"
                else:
                    body += part["text"]
            text += f"<|{m['role']}|>{nl}{body}<|end|>{nl}"
        return text + (f"<|assistant|>{nl}" if generation_prompt else "")

    def inputs(self, processor, texts: list[str], images: list[list]) -> dict:
        flat = [im for imgs in images for im in imgs]
        phi4 = is_phi4(processor)
        if not phi4 and len(texts) > 1:
            raise ModelError("Phi-3.5-vision's processor encodes one prompt per call: use batch size 1")
        out = dict(processor(text=texts if phi4 else texts[0], images=flat or None, return_tensors="pt"))
        if phi4:
            out.setdefault("input_mode", torch.tensor([VISION_MODE if flat else TEXT_MODE]))
        return out


@dataclass(frozen=True)
class Phi4MultimodalAdapter(Adapter):
    """The native Phi-4-multimodal: default rendering and inputs, with the two loading fixes it needs."""

    image_placeholder: str = "<|image|>"  # what its template writes per image (the remote code's: <|image_1|>, …)
    vision_adapter: str = "vision-lora"  # the LoRA subfolder the release ships for image inputs

    def load_processor(self, model: str, kwargs: dict[str, Any]):
        """The processor, with the tokenizer's chat template where the processor config has none."""
        processor = super().load_processor(model, kwargs)
        if getattr(processor, "chat_template", None) is None:
            processor.chat_template = getattr(getattr(processor, "tokenizer", None), "chat_template", None)
        return processor

    def prepare(self, model, processor):
        """Apply the checkpoint's vision LoRA (``vision-lora/``), where it has one; returns the processor."""
        source = str(getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", ""))
        if not _has_file(source, f"{self.vision_adapter}/adapter_config.json"):
            return processor
        try:
            import peft  # noqa: F401
        except ImportError:
            raise ModelError(
                f"model {source!r} ships its vision LoRA in {self.vision_adapter}/, which needs peft to load "
                "(pip install peft); without it the base model does not see images as released"
            ) from None
        model.load_adapter(source, adapter_name="vision", adapter_kwargs={"subfolder": self.vision_adapter})
        model.set_adapter("vision")
        return processor


def _has_file(model: str, name: str) -> bool:
    """Whether checkpoint ``model`` (a folder or a hub id) has the file ``name``."""
    if Path(model).is_dir():
        return (Path(model) / name).is_file()
    from transformers.utils import cached_file

    try:
        return cached_file(model, name, _raise_exceptions_for_missing_entries=False) is not None
    except Exception:  # noqa: BLE001 - an unreachable hub means "not known to have it"
        return False


PHI = register(
    PhiAdapter(
        family="phi",
        aliases=(r"phi-3(\.5)?-vision", r"phi-4-multimodal"),
        model_types=("phi3_v", "phi4mm"),
        auto_class="AutoModelForCausalLM",
        needs_remote_code=True,
        dtypes=("float32", "bfloat16", "auto"),
        processor_kwargs={"num_crops": 4},
        quantization=(),
        notes="remote code (rendering tested with stub processors only); raw <|user|>…<|end|><|assistant|> prompt, "
        "<|image_i|> tags numbered in order; "
        "Phi-4-MM gets input_mode; Phi-3.5: batch size 1; paper: fp32",
    )
)
# Registered after the remote-code adapter: an id alone (no loadable config) still means remote code.
PHI4_MULTIMODAL = register(
    Phi4MultimodalAdapter(
        family="phi4_multimodal",
        aliases=(r"phi-4-multimodal",),
        model_types=("phi4_multimodal",),
        auto_class="AutoModelForCausalLM",
        dtypes=("float32", "bfloat16", "auto"),
        quantization=(),
        notes="native transformers Phi-4-MM; chat template taken from the tokenizer; <|image|> per image; "
        "checkpoint's dynamic_hd tiling; vision-lora/ applied with peft; paper: fp32",
    )
)
