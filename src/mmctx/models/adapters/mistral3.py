"""Mistral 3 (``mistralai/Mistral-Small-3.1-24B-Instruct-2503`` and later): Pixtral vision, the default path.

`Mistral3ForConditionalGeneration` through `AutoModelForImageTextToText`; `PixtralProcessor` (it
needs torchvision) cuts an image into 14-px patches merged 2×2, one token per 28×28 px, rows
closed by ``[IMG_BREAK]`` and the image by ``[IMG_END]``; the released cap is a longest edge of
1,540 px (up to 3,025 tokens an image). The template writes BOS, and without a system turn today's
date (mmctx's presets always send one). Neither paper evaluated it: release settings are kept,
9 images at most about 27k tokens of its 128k context. Released in bfloat16.
"""

from __future__ import annotations

from mmctx.models.adapters import Adapter, register

MISTRAL3 = register(
    Adapter(
        family="mistral3",
        aliases=(r"mistral-small-3",),
        model_types=("mistral3",),
        auto_class="AutoModelForImageTextToText",
        dtypes=("bfloat16", "float32", "auto"),
        quantization=("8bit", "4bit"),
        notes="chat template (writes BOS, [SYSTEM_PROMPT]); Pixtral patches, one token per 28x28 px; "
        "release settings kept; needs torchvision; bf16",
    )
)
