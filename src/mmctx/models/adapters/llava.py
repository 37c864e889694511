"""LLaVA-Interleave and LLaVA-OneVision (``llava-hf/...`` checkpoints): the default path.

ChatML through the checkpoint's chat template, one ``{"type": "image"}`` per demo turn, and
``processor(images=[...], text=prompt)``. LLaVA-Interleave (`LlavaForConditionalGeneration`,
SigLIP-384) spends a fixed 729 tokens an image: the 9 images of an 8-shot prompt cost 6,561
tokens of Qwen1.5's 32k context, so no processor cap is needed. LLaVA-OneVision and LLaVA-NeXT
tile every image ("anyres": thousands of tokens an image for OneVision); their tiling cannot be
capped through the processor alone (the model recomputes the grid from its own config), so
9-image prompts may overflow: the backend reports that as ``context_overflow``.

Only the transformers-format ``llava-hf`` conversions load; the original ``lmms-lab`` repos
need the LLaVA code base. Paper (FewMMBench A.2): fp16 and 4-bit for all LLaVA variants.
"""

from __future__ import annotations

from mmctx.models.adapters import Adapter, register

LLAVA = register(
    Adapter(
        family="llava",
        aliases=(r"(^|/)llava",),
        model_types=("llava", "llava_onevision", "llava_next"),
        auto_class="AutoModelForImageTextToText",
        processor_kwargs={},
        dtypes=("float16", "bfloat16", "float32", "auto"),
        quantization=("4bit",),
        notes="chat template (ChatML); Interleave: 729 tokens an image; OneVision/NeXT tile (anyres); "
        "paper: fp16, 4-bit",
    )
)
