"""Gemma 3 (``google/gemma-3-*-it``): the chat template and processor (the default path).

`Gemma3ForConditionalGeneration` through `AutoModelForImageTextToText`; `Gemma3Processor` expands
each ``<start_of_image>`` into 256 soft tokens (896 px, SigLIP), pan-and-scan off as released.
The template writes BOS and the tokenizer prepends one too: the processor is called without
special tokens on template text (see `mmctx.models.spans.adds_special_tokens`). Its language model
alternates five sliding-window layers (1,024 tokens) with one global layer: option scoring never
takes the packed path on it (see `mmctx.models.hf`).

Neither paper evaluated Gemma 3, so no processor setting is changed from the release: 9 images
of an 8-shot prompt cost 2,304 tokens of its 128k context. Released in bfloat16.
"""

from __future__ import annotations

from mmctx.models.adapters import Adapter, register

GEMMA3 = register(
    Adapter(
        family="gemma3",
        aliases=(r"(^|/)gemma-3-",),
        model_types=("gemma3",),
        auto_class="AutoModelForImageTextToText",
        dtypes=("bfloat16", "float32", "auto"),
        quantization=("8bit", "4bit"),
        notes="chat template (writes BOS); 256 tokens an image; sliding-window layers: copied or per-option "
        "scoring; release settings kept; bf16",
    )
)
