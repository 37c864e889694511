"""LLaVA-Interleave, LLaVA-OneVision and LLaVA-NeXT (``llava-hf/...`` checkpoints): the default path.

ChatML through the checkpoint's chat template, one ``{"type": "image"}`` per demo turn, and
``processor(images=[...], text=prompt)``. The released templates write every image of a turn
before its text (``<image>`` then ``\\n`` + text), so text around an image inside one turn is
not interleaved with it; mmctx renders exactly what the release renders.

Image tokens (the adapter caps nothing; these are the releases' own settings):

* LLaVA-Interleave (`LlavaForConditionalGeneration`, SigLIP-384, patch 14): a fixed 729 tokens an
  image, so the 9 images of an 8-shot prompt cost 6,561 tokens of Qwen1.5's 32k context.
* LLaVA-OneVision (`LlavaOnevisionForConditionalGeneration`, ``anyres_max_9``): a prompt with
  one image is tiled over a 384-px grid of up to 6×6 tiles: the 729-token base view, the tiles'
  features (thinned to about 9 tiles' worth) and a newline token per row: 1,485 tokens for a
  square image, 2,929 for a 640×480 photo, up to about 8,800. A prompt with several images gets
  the base view and one newline an image (730 each, 6,570 for 9 images). The tiling cannot be
  capped through the processor alone (the model recomputes the grid from its own config), so a
  long prompt may overflow the context: the backend reports that as ``context_overflow``.
* LLaVA-NeXT: anyres tiling too (2,000+ tokens an image).

OneVision's released template opens an answered assistant turn with ``<|im_start|>assistant ``
(a space) but prompts generation with ``<|im_start|>assistant\\n``: the answered conversation
does not extend the generation prompt. The model is prompted with the generation prompt, so
an option is scored as the text right after it (`mmctx.models.spans.continuations`, the rule
for any template that does this).

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
        notes="chat template (ChatML, images before text in a turn); Interleave: 729 tokens an image; "
        "OneVision: anyres tiling, a lone image 1.5k-8.8k tokens, 730 an image when several; "
        "NeXT tiles too; not capped; paper: fp16, 4-bit",
    )
)
