"""Tiny Gemma 3 (the architecture of google/gemma-3-*-it): hybrid sliding-window / global attention.

Mirrors the release where defects hide:

* the chat template, verbatim (it writes ``{{ bos_token }}``) and a tokenizer that also prepends
  BOS when called, as the released one does: a processor call that adds special tokens to
  template-rendered text would feed two;
* `Gemma3Processor`, which expands each ``<start_of_image>`` into a fixed run of soft tokens
  wrapped in blank lines (256 in the release; 4 here);
* the attention layout: sliding-window layers beside global ones, with a window (24 tokens) that
  a few-shot prompt exceeds, as three or more images exceed the released 1,024.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

# google/gemma-3-4b-it, tokenizer_config.json "chat_template" (the same in the 12b/27b releases).
GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    '    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    '        {%- set role = "model" -%}\n'
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    '        {{ raise_exception("Invalid content type") }}\n'
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n"
    "{%- endif -%}\n"
)

SPECIAL = ["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<image_soft_token>"]
SLIDING_WINDOW = 24
IMAGE_TOKENS = 4


def build(out: Path, size: TinySize) -> None:
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    tokenizer = build_tokenizer(
        SPECIAL, prepend=(), bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", add_bos=True,
        named_tokens={
            "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"
        },
    )  # fmt: skip
    ids = tokenizer.convert_tokens_to_ids
    head_dim = 16
    text = {
        "vocab_size": len(tokenizer), "hidden_size": size.hidden, "intermediate_size": size.hidden * 2,
        "num_hidden_layers": max(size.layers, 2), "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": head_dim, "query_pre_attn_scalar": head_dim, "max_position_embeddings": 4096,
        "sliding_window": SLIDING_WINDOW,
        # the release alternates five sliding layers and one global; here every other layer is global
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(max(size.layers, 2))],
        "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": ids("<end_of_turn>"),
    }  # fmt: skip
    patch = 8
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_size": 32, "patch_size": patch, "vision_use_head": False}  # fmt: skip
    config = Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=IMAGE_TOKENS,
        boi_token_index=ids("<start_of_image>"),
        eoi_token_index=ids("<end_of_image>"),
        image_token_index=ids("<image_soft_token>"),
    )
    model = Gemma3ForConditionalGeneration(config)
    image_processor = Gemma3ImageProcessorPil(size={"height": 32, "width": 32}, do_pan_and_scan=False)
    processor = Gemma3Processor(
        image_processor, tokenizer, chat_template=GEMMA3_TEMPLATE, image_seq_length=IMAGE_TOKENS
    )
    save_checkpoint(out, model, tokenizer, "<end_of_turn>", processor=processor)


GEMMA3 = register_tiny(
    TinyFamily(
        "gemma3", "google/gemma-3-4b-it", build, notes=f"sliding window {SLIDING_WINDOW} tokens; BOS in template"
    )
)
