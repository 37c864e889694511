"""Idefics2, Idefics3 and SmolVLM: the chat template and processor (the default path), unsplit images.

Chat template: ``User:<image>text<end_of_utterance>\\nAssistant: answer<end_of_utterance>\\n``;
every demo turn carries its own ``{"type": "image"}`` entry and the processor takes the images
in order. The released templates open with the tokenizer's BOS (SmolVLM: ``<|im_start|>``, a
tokenizer that adds nothing; Idefics3-8B-Llama3: ``<|begin_of_text|>``, which its Llama 3
tokenizer also prepends): the backend adds no second one (tiny families ``idefics3`` and
``idefics3_llama3`` mirror both).

Token budget (processor_kwargs):

* ``do_image_splitting=False``: no sub-image tiles. Idefics3 otherwise cuts an image into up to
  4×4 tiles of 364 px plus a global view, 17 × 169 = 2,873 tokens an image: 9 images would
  overflow Idefics3-8B's (Llama-3) context. Unsplit: 169 tokens an image (1,521 for 9);
  Idefics2: 64 (perceiver-resampled; 320 when split); SmolVLM: 64 or 81.

Resolution (paper_processor_kwargs, only with ``image_settings="paper"``):

* ``size={"longest_edge": 448, "shortest_edge": 378}``: images are first resized to a longest
  edge of 448 px (378 px minimum; the FewMMBench code's Idefics2 setting). For Idefics2 this is
  the resolution the vision encoder sees (980 px by default); Idefics3/SmolVLM then resize the
  global view to their ``max_image_size`` (364/384/512 px), so the cap only bounds that step.
  By default the checkpoint's own ``size`` holds: on a checkpoint made for small images
  (``builtin:shapes-vlm``: 96 px) the paper's setting upscales every image to 448 px and back,
  13.8 times the preprocessing cost.

Paper (FewMMBench A.2): fp16 for both, 4-bit (bitsandbytes) for Idefics2; Idefics3 only in fp16.
"""

from __future__ import annotations

from mmctx.models.adapters import Adapter, register

LONGEST_EDGE = 448
SHORTEST_EDGE = 378

IDEFICS = register(
    Adapter(
        family="idefics",
        aliases=(r"idefics[23]", r"smolvlm"),
        model_types=("idefics2", "idefics3", "smolvlm"),
        auto_class="AutoModelForImageTextToText",
        processor_kwargs={"do_image_splitting": False},
        paper_processor_kwargs={"size": {"longest_edge": LONGEST_EDGE, "shortest_edge": SHORTEST_EDGE}},
        dtypes=("float16", "bfloat16", "float32", "auto"),
        quantization=("4bit",),
        notes="chat template; no image splitting (Idefics3: 169 tokens an image); --image-settings paper: "
        "longest edge 448 px; paper: fp16, 4-bit for Idefics2",
    )
)
