"""Tiny Qwen2-VL (multimodal RoPE)."""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

# Qwen2-VL's released template: a default system turn, each image as vision_start/pad/end.
QWEN2_VL_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

SPECIAL = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]


def build(out: Path, size: TinySize) -> None:
    tokenizer = build_tokenizer(SPECIAL)
    model, (image_processor, template) = _qwen2_vl(tokenizer, size.hidden, size.layers)
    save_checkpoint(out, model, tokenizer, "<|im_end|>", parts=(image_processor,), chat_template=template)


def _qwen2_vl(tokenizer, hidden: int, layers: int):
    """Qwen2-VL with multimodal RoPE: image tokens take fewer positions than they are tokens.

    Returns the model and the processor's parts (image processor, chat template):
    transformers' `Qwen2VLProcessor` cannot be built without torchvision (its video
    processor needs it), so the parts are saved as the hub's checkpoints lay them out and
    `AutoProcessor` (or mmctx's Qwen adapter, where torchvision is missing) puts them together.
    """
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    head_dim = hidden // 4
    third = head_dim // 2 // 3
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        # Temporal, height and width sections of each head's rotary frequencies.
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                            "mrope_section": [head_dim // 2 - 2 * third, third, third]},
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.pad_token_id,
    }  # fmt: skip
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": hidden, "num_heads": 2, "mlp_ratio": 2,
              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}  # fmt: skip
    ids = tokenizer.convert_tokens_to_ids
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )
    model = Qwen2VLForConditionalGeneration(config)
    # 4 to 16 visual tokens an image (one per 28×28 px) unless a loader caps them otherwise.
    image_processor = Qwen2VLImageProcessorPil(min_pixels=4 * 28 * 28, max_pixels=16 * 28 * 28)
    return model, (image_processor, QWEN2_VL_TEMPLATE)


QWEN2_VL = register_tiny(TinyFamily("qwen2_vl", "Qwen/Qwen2-VL-2B-Instruct", build))
