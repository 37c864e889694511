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
from mmctx.models.tiny.parts import save_checkpoint
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

    # Qwen1.5's tokenizer: no BOS token, "<|endoftext|>" pads, "<|im_end|>" ends a turn.
    tokenizer = build_tokenizer(SPECIAL, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    ids = tokenizer.convert_tokens_to_ids
    text = {
        "model_type": "qwen2", "vocab_size": len(tokenizer), "hidden_size": size.hidden,
        "intermediate_size": size.hidden * 2, "num_hidden_layers": size.layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "eos_token_id": ids("<|im_end|>"), "pad_token_id": tokenizer.pad_token_id,
    }  # fmt: skip
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "image_size": VIEW, "patch_size": PATCH, "vision_use_head": False}  # fmt: skip
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
    image_processor = SiglipImageProcessor(size={"height": VIEW, "width": VIEW}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
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
