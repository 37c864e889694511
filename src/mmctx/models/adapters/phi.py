"""Phi-3.5-vision and Phi-4-multimodal: remote code, raw-string prompts, numbered image tags.

Both load with `AutoModelForCausalLM` + `AutoProcessor` (``trust_remote_code``). Neither takes
chat-format image entries: the prompt is a string in which ``<|image_1|>`` … ``<|image_N|>``
stand for the images, numbered from 1 across the whole prompt in the order the images are
passed. `render` writes it:

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

The main-branch hub repos are remote code written for transformers 4; a native
``phi4_multimodal`` checkpoint (model type ``phi4_multimodal``) is not matched here.
Paper (FewMMBench A.2): fp32 for both (half precision was not compatible), no quantisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mmctx.models.adapters import Adapter, register
from mmctx.models.spans import ModelError

VISION_MODE, TEXT_MODE = 1, 0


def is_phi4(processor) -> bool:
    return hasattr(processor, "audio_processor")


@dataclass(frozen=True)
class PhiAdapter(Adapter):
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
        notes="remote code; raw <|user|>…<|end|><|assistant|> prompt, <|image_i|> tags numbered in order; "
        "Phi-4-MM gets input_mode; Phi-3.5: batch size 1; paper: fp32",
    )
)
