"""Tiny Idefics3 (the architecture of Idefics3 and SmolVLM checkpoints)."""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import llama_text_config, save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
SPECIAL = ["<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>", "<image>", "<global-img>"] + [
    f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)
]


def build(out: Path, size: TinySize) -> None:
    tokenizer = build_tokenizer(SPECIAL)
    model, processor = _idefics3(tokenizer, size.image_size, llama_text_config(len(tokenizer), size.hidden, size.layers))
    save_checkpoint(out, model, tokenizer, "<end_of_utterance>", processor=processor)


def _idefics3(tokenizer, image_size: int, text_config):
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    patch, scale = 16, 2
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": image_size,
        "patch_size": patch,
    }
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    config = Idefics3Config(
        vision_config=vision,
        text_config=text_config.to_dict(),
        scale_factor=scale,
        image_token_id=image_token,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Idefics3ForConditionalGeneration(config)
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": image_size},
        max_image_size={"longest_edge": image_size},
    )
    seq_len = (image_size // patch) ** 2 // (scale**2)
    processor = Idefics3Processor(image_processor, tokenizer, image_seq_len=seq_len, chat_template=IDEFICS3_TEMPLATE)
    return model, processor


IDEFICS3 = register_tiny(TinyFamily("idefics3", "HuggingFaceTB/SmolVLM-256M-Instruct (Idefics3 architecture)", build))
