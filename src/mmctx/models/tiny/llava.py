"""Tiny LLaVA (the architecture of llava-hf/llava-interleave-qwen-0.5b-hf).

Mirrors the release where defects hide:

* the chat template, verbatim: every image of a turn first as a bare ``<image>``, then each text
  part after a newline (so an answered assistant turn reads ``assistant\\n\\nred``);
* a Qwen1.5 (Qwen2-architecture) tokenizer that prepends nothing (the release has no BOS token)
  and ends a turn with ``<|im_end|>``;
* `LlavaProcessor` over a SigLIP image processor (square resize, mean/std 0.5, bicubic) and a
  SigLIP vision tower with ``vision_feature_select_strategy="full"``: no CLS token, every patch
  is an image token (27×27 = 729 at 384 px / patch 14 in the release; 4×4 = 16 at 32 px / 8 here).
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import QWEN_TOKENS, qwen2_text_config, save_checkpoint, siglip_vision_config
from mmctx.models.tiny.tokenizer import build_tokenizer

# https://huggingface.co/llava-hf/llava-interleave-qwen-0.5b-hf/blob/1abeb3a994bf01d53d492318a1c9517950cd9f1b/chat_template.json
# (unchanged on main since; the same string in llava-interleave-qwen-7b-hf)
LLAVA_INTERLEAVE_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\n' + content['text'] }}"
    "{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ '\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|im_start|>", "<|im_end|>", "<image>"]
VIEW, PATCH = 32, 8  # 384 px and patch 14 in the release


def build(out: Path, size: TinySize) -> None:
    from transformers import LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.siglip.image_processing_siglip import SiglipImageProcessor

    tokenizer = build_tokenizer(SPECIAL, **QWEN_TOKENS)  # Qwen1.5's
    ids = tokenizer.convert_tokens_to_ids
    text = qwen2_text_config(tokenizer, size.hidden, size.layers)
    vision = siglip_vision_config(VIEW, PATCH)
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        image_seq_length=(VIEW // PATCH) ** 2,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlavaForConditionalGeneration(config)
    image_processor = SiglipImageProcessor(
        size={"height": VIEW, "width": VIEW}, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=0,  # SigLIP has no CLS token
        chat_template=LLAVA_INTERLEAVE_TEMPLATE,
    )
    save_checkpoint(out, model, tokenizer, "<|im_end|>", processor=processor)


LLAVA = register_tiny(TinyFamily("llava", "llava-hf/llava-interleave-qwen-0.5b-hf", build))
