"""Tiny Idefics3 (the architecture of HuggingFaceTB/SmolVLM-256M-Instruct and Idefics3 checkpoints).

Mirrors SmolVLM-256M-Instruct where defects hide:

* the chat template, verbatim (`SMOLVLM_TEMPLATE`): it writes ``<|im_start|>``, the tokenizer's
  BOS, itself; ``User:<image>…`` with no space when a turn opens with an image;
* a SmolLM2 tokenizer that prepends nothing (BOS ``<|im_start|>``, EOS ``<end_of_utterance>``,
  pad ``<|im_end|>``);
* `Idefics3Processor` with the release's image splitting on: an image is resized to a longest
  edge of 4 views and cut into view-sized tiles plus a global view (2048 / 512 px in the release,
  256 / 64 px here), each view ``(view / patch)² / scale²`` tokens (64 in the release, 4 here).
  mmctx's idefics adapter turns splitting off, as the paper's runs do.

Idefics3-8B-Llama3 differs in its tokenizer (Llama 3: prepends ``<|begin_of_text|>``) and its
template (writes ``<|begin_of_text|>`` where SmolVLM writes ``<|im_start|>``).
"""

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
# https://huggingface.co/HuggingFaceTB/SmolVLM-500M-Instruct/blob/dfffb6e7622a286a500146106027bc181c99a80e/chat_template.json,
# the same string as SmolVLM-256M-Instruct's, SmolVLM-Instruct's (since its 2024-11-26 update) and SmolVLM2's.
SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
SPECIAL = ["<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>", "<image>", "<global-img>"] + [
    f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)
]


def build(out: Path, size: TinySize) -> None:
    tokenizer = build_tokenizer(
        SPECIAL, bos_token="<|im_start|>", eos_token="<end_of_utterance>", pad_token="<|im_end|>"
    )
    text_config = llama_text_config(len(tokenizer), size.hidden, size.layers)
    model, processor = _idefics3(tokenizer, size.image_size, text_config, splitting=True, template=SMOLVLM_TEMPLATE)
    save_checkpoint(out, model, tokenizer, "<end_of_utterance>", processor=processor)


def _idefics3(tokenizer, image_size: int, text_config, splitting: bool = False, template: str = IDEFICS3_TEMPLATE):
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
        do_image_splitting=splitting,
        size={"longest_edge": 4 * image_size if splitting else image_size},
        max_image_size={"longest_edge": image_size},
    )
    seq_len = (image_size // patch) ** 2 // (scale**2)
    processor = Idefics3Processor(image_processor, tokenizer, image_seq_len=seq_len, chat_template=template)
    return model, processor


IDEFICS3 = register_tiny(TinyFamily("idefics3", "HuggingFaceTB/SmolVLM-256M-Instruct (Idefics3 architecture)", build))
