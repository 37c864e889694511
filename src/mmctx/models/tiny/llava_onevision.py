"""Tiny LLaVA-OneVision (the architecture of llava-hf/llava-onevision-qwen2-*-ov-hf).

Mirrors the release where defects hide:

* the chat template, verbatim: ``<|im_start|>user `` (a space, not a newline, after the role),
  every image of a turn first as a bare ``<image>``, then each text part after a newline, and
  ``<|im_end|>`` with no newline after it;
* a Qwen2 tokenizer that prepends nothing (the release has no BOS token at all) and ends a turn
  with ``<|im_end|>``;
* `LlavaOnevisionProcessor` and its image processor with the anyres logic kept: a prompt with
  one image is tiled over ``image_grid_pinpoints`` (base view + tiles + one newline per row,
  thinned past ``anyres_max_9``), a prompt with several images gets the base view only
  (``num_image_tokens + 1`` an image); the release's 384 px / 729-token views and 384-px grid
  become 32 px / 16-token views and a 32-px grid;
* SigLIP vision tower with ``vision_feature_select_strategy="full"`` (no CLS token to drop).
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import QWEN_TOKENS, qwen2_text_config, save_checkpoint, siglip_vision_config
from mmctx.models.tiny.tokenizer import build_tokenizer

# llava-hf/llava-onevision-qwen2-0.5b-ov-hf, chat_template.json (the same in the 7b-ov-hf release);
# transformers' tests/models/llava_onevision/test_processor_llava_onevision.py keeps this string and
# checks the hub's rendering of it: "<|im_start|>user <image>\nWhat is shown in this image?<|im_end|>
# <|im_start|>assistant\n" (https://github.com/huggingface/transformers, test_chat_template).
LLAVA_ONEVISION_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + ' '}}"
    "{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>' }}{% endfor %}"
    "{# Render all video then #}{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}"
    "{{ '<video>' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\n' + content['text'] }}"
    "{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ '\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL = ["<|im_start|>", "<|im_end|>", "<image>", "<video>"]
VIEW = 32  # px of the base view and of one tile (384 in the release)
PATCH = 8  # SigLIP patch (14 in the release): a 32-px view is 4×4 = 16 tokens (27×27 = 729)
GRID = [[VIEW * h, VIEW * w] for h in range(1, 7) for w in range(1, 7)]  # the release's 1..6 × 384 px grid


def build(out: Path, size: TinySize) -> None:
    from transformers import LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration, LlavaOnevisionProcessor
    from transformers.models.llava_onevision.image_processing_llava_onevision import LlavaOnevisionImageProcessor
    from transformers.models.llava_onevision.video_processing_llava_onevision import LlavaOnevisionVideoProcessor

    tokenizer = build_tokenizer(SPECIAL, **QWEN_TOKENS)  # Qwen2's
    ids = tokenizer.convert_tokens_to_ids
    text = qwen2_text_config(tokenizer, size.hidden, size.layers)
    vision = siglip_vision_config(VIEW, PATCH)
    config = LlavaOnevisionConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=ids("<image>"),
        video_token_index=ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=GRID,
        vision_aspect_ratio="anyres_max_9",
        tie_word_embeddings=False,
    )
    model = LlavaOnevisionForConditionalGeneration(config)
    image_processor = LlavaOnevisionImageProcessor(
        size={"height": VIEW, "width": VIEW}, image_grid_pinpoints=GRID, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    video_processor = LlavaOnevisionVideoProcessor(size={"height": VIEW, "width": VIEW})
    processor = LlavaOnevisionProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        num_image_tokens=(VIEW // PATCH) ** 2,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=LLAVA_ONEVISION_TEMPLATE,
    )
    save_checkpoint(out, model, tokenizer, "<|im_end|>", processor=processor)


LLAVA_ONEVISION = register_tiny(
    TinyFamily(
        "llava_onevision", "llava-hf/llava-onevision-qwen2-0.5b-ov-hf", build,
        notes="anyres tiling on one-image prompts, base view (+ newline) on multi-image prompts; no BOS",
    )
)  # fmt: skip
