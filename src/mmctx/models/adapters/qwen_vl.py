"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL: the chat template and processor (the default path), pixel-capped.

Loaded by `AutoModelForImageTextToText` (`Qwen2VLForConditionalGeneration`,
`Qwen2_5_VLForConditionalGeneration`, `Qwen3VLForConditionalGeneration` / its MoE sibling); the
processor is transformers' own.

Token budget. Qwen resizes every image to a multiple of its token side and spends one visual
token per token side squared: 28 px for Qwen2-VL and Qwen2.5-VL (14-px patches merged 2×2), 32 px
for Qwen3-VL (16-px patches merged 2×2). The released processors allow up to 12.8 M px (Qwen2/2.5)
or 16.8 M px (Qwen3), i.e. 16,384 tokens for one image. The caps here, the same in tokens for
every version and so in pixels per version (`QWEN2_VL`, `QWEN3_VL`):

* at most 512 tokens an image (401,408 px for Qwen2/2.5, 524,288 px for Qwen3), so the 9 images
  of an 8-shot FewMMBench prompt cost at most 4,608 visual tokens. A 640×480 COCO/VALSE image
  (307 k px) keeps its resolution; larger ones are scaled down;
* at least 64 tokens (50,176 px; 65,536 px, which is Qwen3-VL's released minimum), so
  thumbnails are scaled up.

They are passed as ``min_pixels``/``max_pixels``, not as ``size``: Qwen2/2.5-VL's hub
``preprocessor_config.json`` carries its own ``min_pixels``/``max_pixels``, and those silently
override a ``size`` passed to `from_pretrained`; the image processor's constructor turns
``min_pixels``/``max_pixels`` into ``size`` for every version, Qwen3-VL's (whose config has only
``size``) included. transformers also records them as tokenizer init kwargs and so passes them
again on every processor call, where it warns ("Passing `min_pixels` and `max_pixels` to a
processor call is deprecated", a FutureWarning). The values it passes are these caps, so the cap
holds (tests/test_family_qwen.py checks the visual tokens against release-like configs); mmctx
leaves that warning visible rather than filtering it.

Paper (FewMMBench A.2): fp16, no quantisation. transformers' Qwen-VL processors also load a
video processor, which needs torchvision; mmctx sends no video, so where torchvision is missing
the processor is put together from its image processor (transformers' PIL implementation),
tokenizer and chat template alone, transformers' own processor class without its video part,
and a warning says so.

Positions. Qwen's multimodal RoPE gives an image fewer positions than it has tokens, so text
after images sits at "index + rope delta"; the HF backend carries the model's own delta to the
option tokens it scores (see `mmctx.models.hf`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mmctx.models.adapters import Adapter, _processor_config, register

log = logging.getLogger(__name__)

# The processor class each config type's release names (``processor_class``).
PROCESSOR_CLASSES = {
    "qwen2_vl": "Qwen2VLProcessor",
    "qwen2_5_vl": "Qwen2_5_VLProcessor",
    "qwen3_vl": "Qwen3VLProcessor",
    "qwen3_vl_moe": "Qwen3VLProcessor",
}


def needs_torchvision(exc: Exception) -> bool:
    """Whether loading failed only because torchvision is missing.

    transformers 5.25 says so two ways: an ImportError from Qwen2/2.5-VL's video processor, a
    ValueError ("requires `torchvision` to be installed") from Qwen3-VL's.
    """
    return isinstance(exc, (ImportError, ValueError)) and "torchvision" in str(exc).lower()


def _image_only_processor(model: str, processor_kwargs: dict[str, Any], kwargs: dict[str, Any]):
    """The checkpoint's own Qwen processor class over its image processor and tokenizer, without video."""
    import transformers
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer
    from transformers.processing_utils import ProcessorMixin

    model_type = AutoConfig.from_pretrained(model, **kwargs).model_type
    base = getattr(transformers, PROCESSOR_CLASSES.get(model_type, "Qwen2VLProcessor"))

    class ImageOnlyProcessor(base):  # type: ignore[misc, valid-type]
        # The attributes a processor saves and checks come from its __init__'s parameters.
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **unused):
            for kind in ("image", "video"):
                token = getattr(tokenizer, f"{kind}_token", None) or f"<|{kind}_pad|>"
                setattr(self, f"{kind}_token", token)
                setattr(self, f"{kind}_token_id", tokenizer.convert_tokens_to_ids(token))
            for edge in ("start", "end"):  # Qwen3-VL's processor reads these too
                token = getattr(tokenizer, f"vision_{edge}_token", None) or f"<|vision_{edge}|>"
                setattr(self, f"vision_{edge}_token", token)
                setattr(self, f"vision_{edge}_token_id", tokenizer.convert_tokens_to_ids(token))
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
        except Exception as exc:
            if not needs_torchvision(exc):
                raise
        log.warning(
            "%s: torchvision is not installed, so transformers' %s processor (its video part needs it) "
            "cannot be built; using its image-only part (images are resized by the PIL implementation)",
            model, self.family,
        )  # fmt: skip
        return _image_only_processor(model, self.processor_kwargs, kwargs)

    def overrides(self, model: str, kwargs: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """As `Adapter.overrides`, reading a checkpoint's pixel range from ``size`` where it has no
        ``min_pixels``/``max_pixels`` keys (Qwen3-VL's config: ``shortest_edge``/``longest_edge``)."""
        config = _processor_config(model, kwargs)
        size = config.get("size") if isinstance(config.get("size"), dict) else {}
        stated = {
            "min_pixels": config.get("min_pixels", size.get("shortest_edge")),
            "max_pixels": config.get("max_pixels", size.get("longest_edge")),
        }
        return {
            key: {"checkpoint": stated.get(key, config.get(key)), "mmctx": value}
            for key, value in self.processor_kwargs.items()
            if stated.get(key, config.get(key)) != value
        }


MIN_TOKENS, MAX_TOKENS = 64, 512
PIXELS_PER_TOKEN = 28 * 28  # Qwen2-VL, Qwen2.5-VL: 14-px patches merged 2×2
QWEN3_PIXELS_PER_TOKEN = 32 * 32  # Qwen3-VL: 16-px patches merged 2×2
MIN_PIXELS = MIN_TOKENS * PIXELS_PER_TOKEN
MAX_PIXELS = MAX_TOKENS * PIXELS_PER_TOKEN

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

QWEN3_VL = register(
    QwenVLAdapter(
        family="qwen3_vl",
        aliases=(r"qwen3-vl",),
        model_types=("qwen3_vl", "qwen3_vl_moe"),
        auto_class="AutoModelForImageTextToText",
        processor_kwargs={
            "min_pixels": MIN_TOKENS * QWEN3_PIXELS_PER_TOKEN,
            "max_pixels": MAX_TOKENS * QWEN3_PIXELS_PER_TOKEN,
        },
        dtypes=("bfloat16", "float16", "float32", "auto"),
        quantization=(),
        notes="chat template; 64-512 visual tokens an image (min/max_pixels, 32 px a token); released in bf16; "
        "without torchvision, an image-only processor",
    )
)
