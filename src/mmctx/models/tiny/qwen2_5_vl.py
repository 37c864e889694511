"""Tiny Qwen2.5-VL (the architecture of Qwen/Qwen2.5-VL-*-Instruct): windowed vision attention, M-RoPE.

Mirrors the release where defects hide:

* the chat template, verbatim: the release ships Qwen2-VL's string unchanged;
* Qwen's tokenizer BOS behaviour (none), the release's ``preprocessor_config.json`` keys
  (``min_pixels``/``max_pixels``, pixel range lowered) and `Qwen2_5_VLProcessor`, built by
  `AutoProcessor` from those files;
* the vision tower's layout: windowed attention in most blocks, full attention in the blocks
  ``fullatt_block_indexes`` names (the release: 7, 15, 23, 31 of 32 with 112-px windows; here one
  windowed block and one full, with 56-px windows, which a 84×84 image already spans several of);
* multimodal RoPE with absolute time (``tokens_per_second``): only videos are affected, but the
  position scheme and its rope delta are the release's.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.qwen2_vl import (
    QWEN2_VL_TEMPLATE,
    mrope_sections,
    qwen2_vl_preprocessor,
    qwen_text_config,
    qwen_tokenizer,
    save_release_layout,
    vision_token_ids,
)

# https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/chat_template.json: byte for byte
# Qwen2-VL's template.
QWEN2_5_VL_TEMPLATE = QWEN2_VL_TEMPLATE
WINDOW_PX = 56


def build(out: Path, size: TinySize) -> None:
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tokenizer = qwen_tokenizer()
    rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": mrope_sections(size.hidden // 4)}
    text = qwen_text_config(tokenizer, size, rope_parameters=rope)
    vision = {
        "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": size.hidden,
        "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "tokens_per_second": 2,
        "window_size": WINDOW_PX, "fullatt_block_indexes": [1],
    }  # fmt: skip
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, **vision_token_ids(tokenizer))
    model = Qwen2_5_VLForConditionalGeneration(config)
    preprocessor = qwen2_vl_preprocessor("Qwen2_5_VLProcessor")
    save_release_layout(out, model, tokenizer, preprocessor, QWEN2_5_VL_TEMPLATE)


QWEN2_5_VL = register_tiny(
    TinyFamily(
        "qwen2_5_vl", "Qwen/Qwen2.5-VL-7B-Instruct", build, notes=f"windowed vision attention ({WINDOW_PX} px); M-RoPE"
    )
)
