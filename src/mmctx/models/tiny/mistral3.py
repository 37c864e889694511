"""Tiny Mistral 3 (the architecture of mistralai/Mistral-Small-3.1-24B-Instruct-2503): Pixtral vision.

Mirrors the release where defects hide: the chat template verbatim (it writes ``bos_token`` and
a ``[SYSTEM_PROMPT]`` turn; assistant turns end in ``eos_token``), a tokenizer that prepends
``<s>`` when called, as the released one does, and `PixtralProcessor`, which expands each
``[IMG]`` into rows of patch tokens separated by ``[IMG_BREAK]`` and closed by ``[IMG_END]``
(patch 14 and a 2×2 spatial merge as released; images capped at 56 px here instead of 1,540).
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.parts import save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

# mistralai/Mistral-Small-3.1-24B-Instruct-2503's chat template, as transformers' Pixtral processor
# tests carry it (tests/models/pixtral/test_processing_pixtral.py). Without a system turn it
# writes today's date into the prompt (``strftime_now``); mmctx's presets always send a system turn.
MISTRAL3_TEMPLATE = (
    '{%- set today = strftime_now("%Y-%m-%d") %}\n'
    '{%- set default_system_message = "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, '
    "a French startup headquartered in Paris.\\nYour knowledge base was last updated on 2023-10-01. The current "
    "date is \" + today + \".\\n\\nWhen you're not sure about some information, you say that you don't have the "
    "information and don't make up anything.\\nIf the user's question is not clear, ambiguous, or does not provide "
    "enough context for you to accurately answer the question, you do not try to answer it right away and you "
    'rather ask the user to clarify their request (e.g. \\"What are some good restaurants around me?\\" => '
    '\\"Where are you?\\" or \\"When is the next flight to Tokyo\\" => \\"Where do you travel from?\\")" %}\n'
    "\n"
    "{{- bos_token }}\n"
    "\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- if messages[0] is string %}\n"
    "        {%- set system_message = messages[0]['content'] %}\n"
    "        {%- set loop_messages = messages[1:] %}\n"
    "    {%- else %} \n"
    "        {%- set system_message = messages[0]['content'][0]['text'] %}\n"
    "        {%- set loop_messages = messages[1:] %}\n"
    "    {%- endif %}\n"
    "{%- else %}\n"
    "    {%- set system_message = default_system_message %}\n"
    "    {%- set loop_messages = messages %}\n"
    "{%- endif %}\n"
    "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}\n"
    "\n"
    "{%- for message in loop_messages %}\n"
    "    {%- if message['role'] == 'user' %}\n"
    "            {%- if message['content'] is string %}\n"
    "            {{- '[INST]' + message['content'] + '[/INST]' }}\n"
    "            {%- else %}\n"
    "                    {{- '[INST]' }}\n"
    "                    {%- for block in message['content'] %}\n"
    "                            {%- if block['type'] == 'text' %}\n"
    "                                    {{- block['text'] }}\n"
    "                            {%- elif block['type'] == 'image' or block['type'] == 'image_url' %}\n"
    "                                    {{- '[IMG]' }}\n"
    "                                {%- else %}\n"
    "                                    {{- raise_exception('Only text and image blocks are supported in "
    "message content!') }}\n"
    "                                {%- endif %}\n"
    "                        {%- endfor %}\n"
    "                    {{- '[/INST]' }}\n"
    "                {%- endif %}\n"
    "    {%- elif message['role'] == 'system' %}\n"
    "        {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}\n"
    "    {%- elif message['role'] == 'assistant' %}\n"
    "        {%- if message['content'] is string %}\n"
    "            {{- message['content'] + eos_token }}\n"
    "        {%- else %}\n"
    "            {{- message['content'][0]['text'] + eos_token }}\n"
    "        {%- endif %}\n"
    "    {%- else %}\n"
    "        {{- raise_exception('Only user, system and assistant roles are supported!') }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}"
)

SPECIAL = ["[INST]", "[/INST]", "[IMG]", "[IMG_BREAK]", "[IMG_END]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"]
PATCH, MERGE, LONGEST_EDGE = 14, 2, 56


def build(out: Path, size: TinySize) -> None:
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration, PixtralProcessor
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    tokenizer = build_tokenizer(SPECIAL, prepend=(), add_bos=True)
    text = {
        "model_type": "mistral", "vocab_size": len(tokenizer), "hidden_size": size.hidden,
        "intermediate_size": size.hidden * 2, "num_hidden_layers": size.layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": size.hidden // 4, "max_position_embeddings": 4096,
        "sliding_window": None, "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }  # fmt: skip
    vision = {"model_type": "pixtral", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
              "num_attention_heads": 2, "head_dim": 16, "image_size": LONGEST_EDGE, "patch_size": PATCH}  # fmt: skip
    config = Mistral3Config(
        text_config=text,
        vision_config=vision,
        image_token_index=tokenizer.convert_tokens_to_ids("[IMG]"),
        spatial_merge_size=MERGE,
        vision_feature_layer=-1,
    )
    model = Mistral3ForConditionalGeneration(config)
    image_processor = PixtralImageProcessorPil(
        size={"longest_edge": LONGEST_EDGE}, patch_size={"height": PATCH, "width": PATCH}
    )
    processor = PixtralProcessor(
        image_processor, tokenizer, patch_size=PATCH, spatial_merge_size=MERGE, chat_template=MISTRAL3_TEMPLATE
    )
    save_checkpoint(out, model, tokenizer, tokenizer.eos_token, processor=processor)


MISTRAL3 = register_tiny(TinyFamily("mistral3", "mistralai/Mistral-Small-3.1-24B-Instruct-2503", build))
