"""Tiny native Phi-4-multimodal (model type ``phi4_multimodal``, microsoft/Phi-4-multimodal-instruct's
transformers-native revision): a Phi-3-style language model with a SigLIP vision tower and a
Conformer audio encoder, loaded with `AutoModelForCausalLM` (it is not an image-text-to-text class).

Mirrors the release where defects hide:

* the chat template, verbatim: ``<|role|>`` + content + ``<|end|>`` with nothing in between, each
  image as ``<|image|>`` (not the remote code's numbered ``<|image_1|>``), ``<|assistant|>`` as the
  generation prompt and ``eos_token`` after a conversation without one; no BOS;
* where the template lives: in the tokenizer's config only. The released processor config has
  none, so `Phi4MultimodalProcessor.from_pretrained` comes back without a template: the checkpoint
  here is saved the same way (tokenizer with template, processor parts without);
* the tokenizer: GPT-2-style byte-level BPE that prepends nothing; ``<|endoftext|>`` is BOS, EOS
  and padding, ``<|end|>`` ends a turn (generation stops at either, as released);
* `Phi4MultimodalProcessor`, which rewrites each ``<|image|>`` into one run of image tokens whose
  length the image processor computes from its dynamic HD crops. That count assumes 32 × 32
  patches a crop (16 × 16 after pooling), as released, so the crops keep 32 × 32 patches here
  but of one pixel each (crops of 32 px instead of 448) and at most 2 crops an image instead
  of 36: about 550 tokens an image;
* the positions and attention layout: LongRoPE over 3/4 of each head, switching from short to
  long factors past 4,096 positions (an 8-shot prompt here is longer), and the released config's
  ``sliding_window`` (262,144, beyond any prompt, yet a window to mmctx's path check); tied
  input and output embeddings.

The audio encoder is as small as its config allows; mmctx never feeds it.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.tokenizer import build_tokenizer

# The native revision's chat template (its tokenizer_config.json), as transformers' Phi-4-multimodal
# processor tests carried it (https://github.com/huggingface/transformers/blob/main/tests/models/
# phi4_multimodal/test_processor_phi4_multimodal.py, ``prepare_processor_dict``, before the tests
# switched to loading the hub revision itself).
PHI4_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>' }}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' %}"
    "{{ '<|image|>' }}{% elif content['type'] == 'audio' %}{{ '<|audio|>' }}{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}{% endif %}{% endfor %}{% endif %}{% if message['role'] == 'system' and 'tools' in message "
    "and message['tools'] is not none %}{{ '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% endif %}"
    "{{ '<|end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"
)

SPECIAL = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|image|>", "<|audio|>",
           "<|tool|>", "<|/tool|>"]  # fmt: skip
CROP, PATCH, MAX_CROPS = 32, 1, 2
ORIGINAL_CONTEXT, ROTARY_FRACTION = 4096, 0.75
CONTEXT = 131072  # positions, as released: a few-shot prompt of ~550 tokens an image needs more than 4k
SLIDING_WINDOW = 262144  # the released config's: longer than its 131,072 positions


def build(out: Path, size: TinySize) -> None:
    from transformers import (
        Phi4MultimodalConfig,
        Phi4MultimodalFeatureExtractor,
        Phi4MultimodalForCausalLM,
        Phi4MultimodalImageProcessor,
        Phi4MultimodalProcessor,
    )

    tokenizer = build_tokenizer(
        SPECIAL, prepend=(), bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>",
        named_tokens={"image_token": "<|image|>", "audio_token": "<|audio|>"},
    )  # fmt: skip
    tokenizer.chat_template = PHI4_TEMPLATE
    tokenizer.model_max_length = CONTEXT
    ids = tokenizer.convert_tokens_to_ids
    vision = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
              "image_size": CROP, "patch_size": PATCH, "crop_size": CROP,
              "image_token_id": ids("<|image|>")}  # fmt: skip
    audio = {"hidden_size": 16, "intermediate_size": 16, "num_blocks": 1, "num_attention_heads": 2,
             "ext_pw_out_channel": 16, "depthwise_separable_out_channel": 16, "nemo_conv_channels": 16,
             "audio_token_id": ids("<|audio|>")}  # fmt: skip
    config = Phi4MultimodalConfig(
        vocab_size=len(tokenizer), hidden_size=size.hidden, intermediate_size=size.hidden * 2,
        num_hidden_layers=size.layers, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
        original_max_position_embeddings=ORIGINAL_CONTEXT, sliding_window=SLIDING_WINDOW, tie_word_embeddings=True,
        rope_parameters=_longrope(size.hidden // 4),
        bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=[tokenizer.eos_token_id, ids("<|end|>")],
        vision_config=vision, audio_config=audio,
    )  # fmt: skip
    model = Phi4MultimodalForCausalLM(config)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, ids("<|end|>")]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    image_processor = Phi4MultimodalImageProcessor(
        size={"height": CROP, "width": CROP}, patch_size=PATCH, dynamic_hd=MAX_CROPS
    )
    # Built without a template, as the release's processor is: the tokenizer keeps its own, and
    # `Phi4MultimodalProcessor.from_pretrained` comes back without one.
    processor = Phi4MultimodalProcessor(image_processor, Phi4MultimodalFeatureExtractor(), tokenizer)
    processor.save_pretrained(out)


def _longrope(head_dim: int) -> dict:
    """The released rotary scheme: LongRoPE over 3/4 of each head, short factors up to 4,096
    positions and long ones beyond (where an 8-shot prompt of ~550 tokens an image goes)."""
    n = int(head_dim * ROTARY_FRACTION) // 2
    return {
        "rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": ROTARY_FRACTION,
        "short_factor": [1.0 + 0.05 * i for i in range(n)], "long_factor": [1.0 + 0.5 * i for i in range(n)],
    }  # fmt: skip


PHI4_MULTIMODAL = register_tiny(
    TinyFamily(
        "phi4_multimodal",
        "microsoft/Phi-4-multimodal-instruct",
        build,
        notes="native phi4_multimodal; template in the tokenizer only; <|image|> placeholders; ≤2 HD crops of 32 px",
    )  # fmt: skip
)
