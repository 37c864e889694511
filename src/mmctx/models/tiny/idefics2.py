"""Tiny Idefics2 (the architecture of HuggingFaceM4/idefics2-8b): perceiver-resampled images.

Mirrors the release where defects hide: the chat template verbatim (no BOS in it), a tokenizer that
prepends ``<s>`` as the released (Mistral) one does, and the real `Idefics2Processor`, which rewrites
the prompt text: each ``<image>`` becomes ``<fake_token_around_image>`` + the image tokens +
``<fake_token_around_image>``, and transformers 5.25 writes a space after the closing fake token when
a word follows. Image settings as released (``do_image_splitting: false``), resolution lowered; the
resampler gives 4 tokens an image here instead of 64.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

# HuggingFaceM4/idefics2-8b, processor chat template.
IDEFICS2_TEMPLATE = (
    "{% for message in messages %}{{message['role'].capitalize()}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
SPECIAL = ["<fake_token_around_image>", "<image>", "<end_of_utterance>"]
IMAGE_TOKENS = 4
IMAGE_SIZE = 32


def build(out: Path, size: TinySize) -> None:
    from transformers import Idefics2Config, Idefics2ForConditionalGeneration, Idefics2Processor
    from transformers.models.idefics2.image_processing_pil_idefics2 import Idefics2ImageProcessorPil

    tokenizer = build_tokenizer(SPECIAL, prepend=(), add_bos=True)
    text = {
        "model_type": "mistral", "vocab_size": len(tokenizer), "hidden_size": size.hidden,
        "intermediate_size": size.hidden * 2, "num_hidden_layers": size.layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 4096, "sliding_window": None,
        "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.convert_tokens_to_ids("<end_of_utterance>"),
    }  # fmt: skip
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": IMAGE_SIZE, "patch_size": 8}  # fmt: skip
    perceiver = {"hidden_size": size.hidden, "resampler_n_latents": IMAGE_TOKENS, "resampler_depth": 1,
                 "resampler_n_heads": 2, "resampler_head_dim": 16, "num_key_value_heads": 1}  # fmt: skip
    config = Idefics2Config(
        vision_config=vision, perceiver_config=perceiver, text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = Idefics2ForConditionalGeneration(config)
    image_processor = Idefics2ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": IMAGE_SIZE, "shortest_edge": IMAGE_SIZE // 2}
    )
    processor = Idefics2Processor(
        image_processor, tokenizer, image_seq_len=IMAGE_TOKENS, chat_template=IDEFICS2_TEMPLATE
    )
    save_checkpoint(out, model, tokenizer, "<end_of_utterance>", processor=processor)


IDEFICS2 = register_tiny(TinyFamily("idefics2", "HuggingFaceM4/idefics2-8b", build))
