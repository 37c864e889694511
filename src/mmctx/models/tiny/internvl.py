"""Tiny InternVL (the architecture of the native conversions OpenGVLab/InternVL3-1B-hf, InternVL2.5 / 3.5 -hf).

Mirrors the release where defects hide:

* the chat template, verbatim: ChatML turns, each image as ``<IMG_CONTEXT>`` and a newline, no
  default system turn and no BOS (unlike the remote-code checkpoints' ``internvl2_5`` template);
* the tokenizer of the Qwen-based releases (InternVL3-1B/2B/8B-hf): Qwen2.5-VL's, which has no BOS
  token and prepends nothing; ``<|im_end|>`` ends a turn and generation;
* `InternVLProcessor`, which rewrites each ``<IMG_CONTEXT>`` into ``<img>`` + ``<IMG_CONTEXT>`` ×
  (tokens per tile × tiles) + ``</img>``, with the GOT-OCR2 image processor's dynamic tiling
  (the aspect-ratio grid closest to the image's, then a thumbnail) kept: tiles of 32 px instead
  of 448, 4 tokens a tile instead of 256 (patch 8 instead of 14, pixel shuffle 0.5 as released);
* the language model: Qwen2, full attention in every layer (no sliding window), as released.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import QWEN_TOKENS, save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

# OpenGVLab/InternVL3-1B-hf chat_template.json, as transformers' conversion script writes it
# (https://github.com/huggingface/transformers/blob/main/src/transformers/models/internvl/
# convert_internvl_weights_to_hf.py, ``chat_template``); the same in every -hf conversion.
INTERNVL_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}"
    "{{ '<IMG_CONTEXT>\n' }}"
    "{% elif content['type'] == 'video' %}"
    "{{ '<video>\n' }}"
    "{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{{'<|im_end|>\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{'<|im_start|>assistant\n' }}"
    "{% endif %}"
)

IMAGE_TOKENS = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
                "video_token": "<video>"}  # fmt: skip
SPECIAL = ["<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>",
           "<box>", "</box>", "<video>"]  # fmt: skip
TILE, PATCH, DOWNSAMPLE = 32, 8, 0.5
TOKENS_PER_TILE = int((TILE // PATCH) ** 2 * DOWNSAMPLE**2)


def build(out: Path, size: TinySize) -> None:
    """InternVL3-1B-hf: Qwen2 language model, Qwen2.5-VL's tokenizer (no BOS token at all)."""
    tokenizer = build_tokenizer(SPECIAL, prepend=(), named_tokens=IMAGE_TOKENS, **QWEN_TOKENS)
    _build(out, size, tokenizer, "qwen2")


def build_llama(out: Path, size: TinySize) -> None:
    """The -hf conversions with an InternLM2 language model (InternVL2.5-8B-MPO-hf, InternVL3-9B-hf):
    a Llama model whose tokenizer prepends ``<s>`` when called, under the same template (which
    writes none), so the processor call must add it, once."""
    tokenizer = build_tokenizer(
        SPECIAL, prepend=(), bos_token="<s>", eos_token="</s>", pad_token="</s>", add_bos=True,
        named_tokens=IMAGE_TOKENS,
    )  # fmt: skip
    _build(out, size, tokenizer, "llama")


def _build(out: Path, size: TinySize, tokenizer, language_model: str) -> None:
    from transformers import InternVLConfig, InternVLForConditionalGeneration, InternVLProcessor
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil
    from transformers.models.internvl.video_processing_internvl import InternVLVideoProcessor

    ids = tokenizer.convert_tokens_to_ids
    text = {
        "model_type": language_model, "vocab_size": len(tokenizer), "hidden_size": size.hidden,
        "intermediate_size": size.hidden * 2, "num_hidden_layers": size.layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "eos_token_id": ids("<|im_end|>"), "pad_token_id": tokenizer.pad_token_id,
        **({"use_sliding_window": False} if language_model == "qwen2" else {"bos_token_id": tokenizer.bos_token_id}),
    }  # fmt: skip
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": TILE, "patch_size": PATCH}  # fmt: skip
    config = InternVLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids("<IMG_CONTEXT>"),
        image_seq_length=TOKENS_PER_TILE,
        downsample_ratio=DOWNSAMPLE,
    )
    model = InternVLForConditionalGeneration(config)
    # As released: crop_to_patches off in the image processor's own config (the processor turns
    # it on for every call), up to 12 tiles; ImageNet normalisation.
    image_processor = GotOcr2ImageProcessorPil(
        size={"height": TILE, "width": TILE}, crop_to_patches=False, min_patches=1, max_patches=12,
        image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225],
    )  # fmt: skip
    video_processor = InternVLVideoProcessor(size={"height": TILE, "width": TILE})
    processor = InternVLProcessor(
        image_processor, tokenizer, video_processor, image_seq_length=TOKENS_PER_TILE, chat_template=INTERNVL_TEMPLATE
    )
    save_checkpoint(out, model, tokenizer, "<|im_end|>", processor=processor)


INTERNVL = register_tiny(
    TinyFamily("internvl", "OpenGVLab/InternVL3-1B-hf", build, notes="dynamic tiles of 32 px, 4 tokens a tile; no BOS")
)
