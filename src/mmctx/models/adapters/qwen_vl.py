"""Qwen2-VL and Qwen2.5-VL: the chat template and processor (the default path), pixel-capped.

Loaded by `AutoModelForImageTextToText` (`Qwen2VLForConditionalGeneration` /
`Qwen2_5_VLForConditionalGeneration`); the processor is transformers' own.

Token budget. Qwen resizes every image to a multiple of 28 px and spends one visual token per
28×28 px (14-px patches merged 2×2). The released processors allow up to 12.8 M px, i.e.
16,384 tokens for one image. The caps here:

* ``max_pixels = 512·28·28 = 401,408`` px: at most 512 tokens an image, so the 9 images of an
  8-shot FewMMBench prompt cost at most 4,608 visual tokens. A 640×480 COCO/VALSE image
  (307 k px) keeps its resolution; larger ones are scaled down.
* ``min_pixels = 64·28·28 = 50,176`` px: at least 64 tokens, so thumbnails are scaled up.

They are passed as ``min_pixels``/``max_pixels``, not as ``size``: the hub's
``preprocessor_config.json`` carries its own ``min_pixels``/``max_pixels``, and those would
silently override a ``size`` passed to `from_pretrained` (checked in tests/test_adapters.py).

Paper (FewMMBench A.2): fp16, no quantisation. Transformers' Qwen2-VL processor also loads a
video processor, which needs torchvision installed.
"""

from __future__ import annotations

from mmctx.models.adapters import Adapter, register

PIXELS_PER_TOKEN = 28 * 28
MIN_PIXELS = 64 * PIXELS_PER_TOKEN
MAX_PIXELS = 512 * PIXELS_PER_TOKEN

QWEN_VL = register(
    Adapter(
        family="qwen_vl",
        aliases=(r"qwen2(\.5)?-vl",),
        model_types=("qwen2_vl", "qwen2_5_vl"),
        auto_class="AutoModelForImageTextToText",
        processor_kwargs={"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS},
        dtypes=("float16", "bfloat16", "float32", "auto"),
        quantization=(),
        notes="chat template; 64-512 visual tokens an image (min/max_pixels); paper: fp16; processor needs torchvision",
    )
)
