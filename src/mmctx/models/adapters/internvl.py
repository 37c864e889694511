"""InternVL 2.5 / 3, in two variants.

``internvl_hf``: the native transformers conversions (``OpenGVLab/InternVL3-8B-hf``, model type
``internvl``): chat template and processor, the default path. Tiling is capped with
``crop_to_patches=True, max_patches=6``: at most 6 tiles of 448 px plus a thumbnail, 256 tokens
each, so 9 images cost at most 16,128 tokens (InternVL2.5/3 contexts: 32k). That matches the
remote variant below.

``internvl``: the remote-code checkpoints the paper ran (``OpenGVLab/InternVL3-8B``,
``OpenGVLab/InternVL2_5-8B-MPO``, …; model type ``internvl_chat``, `AutoModel`). Their repos
have no processor, so `AutoProcessor` yields the tokenizer and this adapter does the rest:
`render` writes the ``internvl2_5`` conversation template (ChatML with InternVL's default
system message when the prompt has none; one ``<image>`` line per image) and `inputs` tiles
each image as the model card's ``load_image(max_num=6)`` does (dynamic aspect-ratio tiles of
448 px, thumbnail, ImageNet normalisation), expands the n-th ``<image>`` into ``<img>`` +
``<IMG_CONTEXT>``×(256 × its tiles) + ``</img>``, and adds ``pixel_values`` and ``image_flags``.
`prepare` sets ``model.img_context_token_id``, which ``model.chat`` would otherwise set.
Not covered (the backend would need it): the remote ``generate`` rejects ``image_flags`` that
its ``forward`` requires; ``pixel_values`` stay float32; the code was written for transformers 4.

Paper (FewMMBench A.2): fp16 and 8-bit for all InternVL models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from mmctx.models.adapters import Adapter, register
from mmctx.models.spans import ModelError

MEAN, STD = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
SYSTEM = "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的多模态大语言模型。"
IMG_START, IMG_CONTEXT, IMG_END = "<img>", "<IMG_CONTEXT>", "</img>"
DTYPES = ("float16", "bfloat16", "float32", "auto")


def tiles(image: Image.Image, size: int = 448, max_num: int = 6) -> list[Image.Image]:
    """InternVL's ``dynamic_preprocess``: the grid closest to the aspect ratio, row-major, then a thumbnail."""
    w, h = image.size
    grids = [(i, j) for i in range(1, max_num + 1) for j in range(1, max_num // i + 1)]
    grids.sort(key=lambda g: g[0] * g[1])  # fewest tiles first; an equally close bigger grid needs the pixels
    best, best_diff = (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(w / h - cols / rows)
        if diff < best_diff or (diff == best_diff and w * h > 0.5 * size * size * cols * rows):
            best, best_diff = (cols, rows), diff
    cols, rows = best
    grid = image.resize((size * cols, size * rows), Image.BICUBIC)
    out = [grid.crop((c * size, r * size, (c + 1) * size, (r + 1) * size)) for r in range(rows) for c in range(cols)]
    return out + [image.resize((size, size), Image.BICUBIC)] if len(out) > 1 else out


@dataclass(frozen=True)
class InternVLChatAdapter(Adapter):
    uses_chat_template = False  # writes the release's prompt format itself

    image_size: int = 448
    max_tiles: int = 6
    tokens_per_tile: int = 256  # (448 / 14)² patches, pixel-shuffled by 0.5 in each direction

    def matches(self, model_id: str, model_type: str | None = None) -> bool:
        # A config that loads without remote code is a native checkpoint, not this variant.
        return (not model_type or model_type in self.model_types) and super().matches(model_id, model_type)

    def render(self, processor, messages: list[dict], generation_prompt: bool) -> str:
        system = [m for m in messages if m["role"] == "system"]
        text = f"<|im_start|>system\n{_text(system[0]) if system else SYSTEM}<|im_end|>\n"
        for m in (m for m in messages if m["role"] != "system"):
            text += f"<|im_start|>{m['role']}\n{_text(m)}<|im_end|>\n"
        return text + ("<|im_start|>assistant\n" if generation_prompt else "")

    def inputs(self, processor, texts: list[str], images: list[list]) -> dict:
        tokenizer = getattr(processor, "tokenizer", processor)
        pixels, expanded = [], []
        for text, imgs in zip(texts, images):
            if text.count("<image>") != len(imgs):
                raise ModelError(f"{text.count('<image>')} <image> placeholders for {len(imgs)} images")
            for im in imgs:
                views = tiles(im.convert("RGB"), self.image_size, self.max_tiles)
                context = IMG_CONTEXT * (self.tokens_per_tile * len(views))
                text = text.replace("<image>", IMG_START + context + IMG_END, 1)
                pixels += [_normalise(v) for v in views]
            expanded.append(text)
        out = dict(tokenizer(expanded, return_tensors="pt", padding=True))
        if pixels:
            out["pixel_values"] = torch.stack(pixels)
            out["image_flags"] = torch.ones(len(pixels), 1, dtype=torch.long)
        return out

    def prepare(self, model, processor):
        """Called once after loading (see the module docstring); returns the processor to use."""
        model.img_context_token_id = getattr(processor, "tokenizer", processor).convert_tokens_to_ids(IMG_CONTEXT)
        return processor


def _normalise(view: Image.Image) -> torch.Tensor:
    return torch.from_numpy((np.asarray(view, np.float32) / 255 - MEAN) / STD).permute(2, 0, 1)


def _text(message: dict) -> str:
    return "".join("<image>\n" if p["type"] == "image" else p["text"] for p in message["content"])


INTERNVL_HF = register(
    Adapter(
        family="internvl_hf",
        aliases=(r"internvl[^/]*-hf\b",),
        model_types=("internvl",),
        processor_kwargs={"crop_to_patches": True, "max_patches": 6},
        dtypes=DTYPES,
        quantization=("8bit",),
        notes="native -hf conversions; chat template; ≤6 tiles + thumbnail an image; paper: fp16, 8-bit",
    )
)
INTERNVL = register(
    InternVLChatAdapter(
        family="internvl",
        aliases=(r"internvl(2[_.]5|3)",),  # InternVL2.5 and InternVL3(.x): the internvl2_5 template
        model_types=("internvl_chat",),
        auto_class="AutoModel",
        needs_remote_code=True,
        dtypes=DTYPES,
        quantization=("8bit",),
        notes="remote code (rendering tested with stub processors only); internvl2_5 template and <IMG_CONTEXT> "
        "expansion done here; ≤6 tiles + thumbnail an image; needs prepare() after loading; paper: fp16, 8-bit",
    )
)
