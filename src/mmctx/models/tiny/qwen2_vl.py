"""Tiny Qwen2-VL (the architecture of Qwen/Qwen2-VL-*-Instruct): multimodal RoPE, dynamic resolution.

Mirrors the release where defects hide:

* the chat template, verbatim: a default system turn when the conversation has none, each image
  as ``<|vision_start|><|image_pad|><|vision_end|>`` inside its own turn, no BOS written;
* a tokenizer that adds no special tokens (Qwen's has no BOS: ``bos_token`` is null), with
  ``<|im_end|>`` as EOS and ``<|endoftext|>`` as padding, as released;
* the release's files as the hub lays them out: ``preprocessor_config.json`` with its own
  ``min_pixels``/``max_pixels`` (lowered here: 4 to 16 visual tokens an image, one per 28×28 px),
  ``chat_template.json`` and the tokenizer; `AutoProcessor` puts `Qwen2VLProcessor` together,
  which expands each ``<|image_pad|>`` into one token per 2×2 merged patches;
* multimodal RoPE (temporal, height and width sections), so text after an image sits at
  "index + rope delta".

The helpers here are shared by the Qwen2.5-VL and Qwen3-VL tiny families.
"""

from __future__ import annotations

import json
from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import QWEN_TOKENS
from mmctx.models.tiny.tokenizer import build_tokenizer

# https://huggingface.co/Qwen/Qwen2-VL-7B-Instruct/blob/main/chat_template.json (the same string in
# Qwen2-VL-2B-Instruct and in Qwen2.5-VL-{3,7,72}B-Instruct), as quoted byte for byte by public
# copies on GitHub (e.g. scripts that restore the "official_chat_template" on a fine-tune).
QWEN2_VL_TEMPLATE = "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"  # fmt: skip

SPECIAL = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]

# The released image normalisation (CLIP's mean and std) of Qwen2-VL and Qwen2.5-VL.
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
# Visual tokens an image may take in the tiny checkpoints' own processor config (the releases
# allow 4 to 16,384); a loader's caps (mmctx's Qwen adapter) replace them.
TINY_MIN_TOKENS, TINY_MAX_TOKENS = 4, 16


def qwen_tokenizer():
    """A Qwen-style tokenizer: no BOS token and none added, ``<|im_end|>`` ends a turn, ``<|endoftext|>`` pads."""
    return build_tokenizer(SPECIAL, **QWEN_TOKENS)


def qwen_text_config(tokenizer, size: TinySize, **extra) -> dict:
    """The language model's config (a Qwen decoder); ``extra`` adds the family's own keys (its RoPE)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": size.hidden,
        "intermediate_size": size.hidden * 2,
        "num_hidden_layers": size.layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "bos_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.pad_token_id,
        **extra,
    }  # fmt: skip


def mrope_sections(head_dim: int) -> list[int]:
    """Temporal, height and width sections of a head's rotary frequencies (the release: 16, 24, 24 of 64)."""
    third = head_dim // 2 // 3
    return [head_dim // 2 - 2 * third, third, third]


def vision_token_ids(tokenizer) -> dict[str, int]:
    ids = tokenizer.convert_tokens_to_ids
    return {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }


def save_release_layout(out: Path, model, tokenizer, preprocessor: dict, chat_template: str) -> None:
    """Weights, ``preprocessor_config.json``, ``chat_template.json`` and the tokenizer, as the Qwen releases ship them.

    The processor itself is not saved: `AutoProcessor` builds it from these files, as it does
    for a hub checkpoint (its video processor, which mmctx never uses, comes from its defaults).
    """
    out = Path(out)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    (out / "chat_template.json").write_text(json.dumps({"chat_template": chat_template}, indent=2) + "\n")


def qwen2_vl_preprocessor(processor_class: str, pixels_per_token: int = 28 * 28) -> dict:
    """Qwen2-VL's / Qwen2.5-VL's released ``preprocessor_config.json``, with the pixel range lowered."""
    return {
        "min_pixels": TINY_MIN_TOKENS * pixels_per_token,
        "max_pixels": TINY_MAX_TOKENS * pixels_per_token,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": processor_class,
    }


def build(out: Path, size: TinySize) -> None:
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    tokenizer = qwen_tokenizer()
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope_sections(size.hidden // 4)}
    text = qwen_text_config(tokenizer, size, rope_parameters=rope)
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": size.hidden, "num_heads": 2, "mlp_ratio": 2,
              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}  # fmt: skip
    config = Qwen2VLConfig(text_config=text, vision_config=vision, **vision_token_ids(tokenizer))
    model = Qwen2VLForConditionalGeneration(config)
    save_release_layout(out, model, tokenizer, qwen2_vl_preprocessor("Qwen2VLProcessor"), QWEN2_VL_TEMPLATE)


QWEN2_VL = register_tiny(TinyFamily("qwen2_vl", "Qwen/Qwen2-VL-2B-Instruct", build, notes="multimodal RoPE"))
