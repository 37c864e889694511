"""Tiny LLaVA (the architecture of llava-hf LLaVA-Interleave checkpoints)."""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import llama_text_config, save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}{{ '<image>\n' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|im_start|>", "<|im_end|>", "<image>"]


def build(out: Path, size: TinySize) -> None:
    tokenizer = build_tokenizer(SPECIAL)
    model, processor = _llava(tokenizer, size.image_size, llama_text_config(len(tokenizer), size.hidden, size.layers))
    save_checkpoint(out, model, tokenizer, "<|im_end|>", processor=processor)


def _llava(tokenizer, image_size: int, text_config):
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    patch = 16
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=patch,
        projection_dim=32,
    )
    config = LlavaConfig(
        vision_config=vision.to_dict(),
        text_config=text_config.to_dict(),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        pad_token_id=tokenizer.pad_token_id,
    )
    config.model_type = "llava"
    model = LlavaForConditionalGeneration(config)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # the CLS token the vision tower adds and "default" drops
        chat_template=CHATML_TEMPLATE,
    )
    return model, processor


LLAVA = register_tiny(TinyFamily("llava", "llava-hf/llava-interleave-qwen-0.5b-hf", build))
