"""Tiny Qwen3-VL (the architecture of Qwen/Qwen3-VL-*-Instruct): its own classes, DeepStack, interleaved M-RoPE.

Mirrors the release where defects hide:

* the chat template, verbatim (long: tools, tool responses with images, content lists in
  system and assistant turns). Unlike Qwen2-VL's it writes no default system turn;
* Qwen's tokenizer BOS behaviour (none written, none added);
* `Qwen3VLProcessor` over the release's ``preprocessor_config.json``, whose pixel range is a
  ``size`` of ``shortest_edge``/``longest_edge`` (no ``min_pixels``/``max_pixels`` keys), with
  16-px patches merged 2×2: one visual token per 32×32 px (here 4 to 16 tokens an image);
* the model's own classes (`Qwen3VLConfig`, `Qwen3VLForConditionalGeneration`): learned vision
  position embeddings resampled to each image's grid, DeepStack (features of several vision
  blocks added to the first language-model layers' image positions) and interleaved M-RoPE.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.qwen2_vl import (
    TINY_MAX_TOKENS,
    TINY_MIN_TOKENS,
    qwen_text_config,
    qwen_tokenizer,
    save_release_layout,
    vision_token_ids,
)

# https://huggingface.co/Qwen/Qwen3-VL-8B-Instruct/blob/main/chat_template.json (the same string in the
# 2B/4B/32B Instruct releases), as kept byte for byte in public copies on GitHub (NVIDIA TAO's
# cosmos-rl conversation dataset, which states it is byte-identical to the release's, and a C++ chat
# template test; the two agree).
QWEN3_VL_TEMPLATE = "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0].role == 'system' %}\n        {%- if messages[0].content is string %}\n            {{- messages[0].content }}\n        {%- else %}\n            {%- for content in messages[0].content %}\n                {%- if 'text' in content %}\n                    {{- content.text }}\n                {%- endif %}\n            {%- endfor %}\n        {%- endif %}\n        {{- '\\n\\n' }}\n    {%- endif %}\n    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0].role == 'system' %}\n        {{- '<|im_start|>system\\n' }}\n        {%- if messages[0].content is string %}\n            {{- messages[0].content }}\n        {%- else %}\n            {%- for content in messages[0].content %}\n                {%- if 'text' in content %}\n                    {{- content.text }}\n                {%- endif %}\n            {%- endfor %}\n        {%- endif %}\n        {{- '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- set image_count = namespace(value=0) %}\n{%- set video_count = namespace(value=0) %}\n{%- for message in messages %}\n    {%- if message.role == \"user\" %}\n        {{- '<|im_start|>' + message.role + '\\n' }}\n        {%- if message.content is string %}\n            {{- message.content }}\n        {%- else %}\n            {%- for content in message.content %}\n                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}\n                    {%- set image_count.value = image_count.value + 1 %}\n                    {%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}\n                    <|vision_start|><|image_pad|><|vision_end|>\n                {%- elif content.type == 'video' or 'video' in content %}\n                    {%- set video_count.value = video_count.value + 1 %}\n                    {%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}\n                    <|vision_start|><|video_pad|><|vision_end|>\n                {%- elif 'text' in content %}\n                    {{- content.text }}\n                {%- endif %}\n            {%- endfor %}\n        {%- endif %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role + '\\n' }}\n        {%- if message.content is string %}\n            {{- message.content }}\n        {%- else %}\n            {%- for content_item in message.content %}\n                {%- if 'text' in content_item %}\n                    {{- content_item.text }}\n                {%- endif %}\n            {%- endfor %}\n        {%- endif %}\n        {%- if message.tool_calls %}\n            {%- for tool_call in message.tool_calls %}\n                {%- if (loop.first and message.content) or (not loop.first) %}\n                    {{- '\\n' }}\n                {%- endif %}\n                {%- if tool_call.function %}\n                    {%- set tool_call = tool_call.function %}\n                {%- endif %}\n                {{- '<tool_call>\\n{\"name\": \"' }}\n                {{- tool_call.name }}\n                {{- '\", \"arguments\": ' }}\n                {%- if tool_call.arguments is string %}\n                    {{- tool_call.arguments }}\n                {%- else %}\n                    {{- tool_call.arguments | tojson }}\n                {%- endif %}\n                {{- '}\\n</tool_call>' }}\n            {%- endfor %}\n        {%- endif %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {%- if message.content is string %}\n            {{- message.content }}\n        {%- else %}\n            {%- for content in message.content %}\n                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}\n                    {%- set image_count.value = image_count.value + 1 %}\n                    {%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}\n                    <|vision_start|><|image_pad|><|vision_end|>\n                {%- elif content.type == 'video' or 'video' in content %}\n                    {%- set video_count.value = video_count.value + 1 %}\n                    {%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}\n                    <|vision_start|><|video_pad|><|vision_end|>\n                {%- elif 'text' in content %}\n                    {{- content.text }}\n                {%- endif %}\n            {%- endfor %}\n        {%- endif %}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"  # fmt: skip

PIXELS_PER_TOKEN = 32 * 32  # 16-px patches, merged 2×2
HEAD_DIM = 16


def preprocessor() -> dict:
    """Qwen3-VL's released ``preprocessor_config.json`` (256² to 4096² px), with the pixel range lowered."""
    return {
        "size": {
            "longest_edge": TINY_MAX_TOKENS * PIXELS_PER_TOKEN,
            "shortest_edge": TINY_MIN_TOKENS * PIXELS_PER_TOKEN,
        },
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast",
    }


def build(out: Path, size: TinySize) -> None:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    tokenizer = qwen_tokenizer()
    # The release: head_dim 128, sections 24/20/20 of its 64 frequencies, interleaved; here 4/2/2 of 8.
    rope = {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2], "mrope_interleaved": True}
    text = qwen_text_config(tokenizer, size, head_dim=HEAD_DIM, rope_parameters=rope)
    vision = {
        "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": size.hidden,
        "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
        # a 4×4 learned grid, resampled to every image's patch grid as the release's 48×48 is
        "num_position_embeddings": 16,
        # the release adds vision blocks 8, 16 and 24 to language layers 0, 1 and 2; here both blocks
        "deepstack_visual_indexes": [0, 1],
    }  # fmt: skip
    config = Qwen3VLConfig(text_config=text, vision_config=vision, **vision_token_ids(tokenizer))
    model = Qwen3VLForConditionalGeneration(config)
    save_release_layout(out, model, tokenizer, preprocessor(), QWEN3_VL_TEMPLATE)


QWEN3_VL = register_tiny(
    TinyFamily(
        "qwen3_vl", "Qwen/Qwen3-VL-8B-Instruct", build, notes="DeepStack; interleaved M-RoPE; no default system turn"
    )
)
