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
video processor, which needs torchvision; mmctx sends no video, so where torchvision is missing
the processor is put together from its image processor, tokenizer and chat template alone
(transformers' own `Qwen2VLProcessor` code, without the video part).

Positions. Qwen's multimodal RoPE gives an image fewer positions than it has tokens, so text
after images sits at "index + rope delta"; the HF backend carries the model's own delta to the
option tokens it scores (see `mmctx.models.hf`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmctx.models.adapters import Adapter, register


def _image_only_processor(model: str, processor_kwargs: dict[str, Any], kwargs: dict[str, Any]):
    """`Qwen2VLProcessor` (or Qwen2.5-VL's) over its image processor and tokenizer, without video."""
    import transformers
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer
    from transformers.processing_utils import ProcessorMixin

    model_type = AutoConfig.from_pretrained(model, **kwargs).model_type
    base = transformers.Qwen2_5_VLProcessor if model_type == "qwen2_5_vl" else transformers.Qwen2VLProcessor

    class ImageOnlyProcessor(base):  # type: ignore[misc, valid-type]
        # The attributes a processor saves and checks come from its __init__'s parameters.
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **unused):
            self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
            self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    image_processor = AutoImageProcessor.from_pretrained(model, **processor_kwargs, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(model, **kwargs)
    chat_template = ProcessorMixin.get_processor_dict(model, **kwargs)[0].get("chat_template")
    return ImageOnlyProcessor(image_processor, tokenizer, chat_template=chat_template or tokenizer.chat_template)


@dataclass(frozen=True)
class QwenVLAdapter(Adapter):
    def load_processor(self, model: str, kwargs: dict[str, Any]):
        try:
            return super().load_processor(model, kwargs)
        except ImportError as exc:
            if "torchvision" not in str(exc).lower():
                raise
        return _image_only_processor(model, self.processor_kwargs, kwargs)

PIXELS_PER_TOKEN = 28 * 28
MIN_PIXELS = 64 * PIXELS_PER_TOKEN
MAX_PIXELS = 512 * PIXELS_PER_TOKEN

QWEN_VL = register(
    QwenVLAdapter(
        family="qwen_vl",
        aliases=(r"qwen2(\.5)?-vl",),
        model_types=("qwen2_vl", "qwen2_5_vl"),
        auto_class="AutoModelForImageTextToText",
        processor_kwargs={"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS},
        dtypes=("float16", "bfloat16", "float32", "auto"),
        quantization=(),
        notes="chat template; 64-512 visual tokens an image (min/max_pixels); paper: fp16; "
        "without torchvision, an image-only processor",
    )
)
