"""Tiny Idefics3-8B-Llama3 (HuggingFaceM4/Idefics3-8B-Llama3, the Idefics3 of FewMMBench's runs).

The same architecture and processor as the SmolVLM tiny (`mmctx.models.tiny.idefics3`); what
differs is where a defect hides:

* the chat template, verbatim: it writes ``<|begin_of_text|>`` itself;
* a Llama 3 tokenizer that *also* prepends ``<|begin_of_text|>`` when called: a processor call
  that adds special tokens to template-rendered text feeds two BOS tokens;
* image splitting on as released (1456-px longest edge cut into 364-px tiles plus a global view,
  169 tokens a view; 256 / 64 px and 4 tokens here); mmctx's idefics adapter turns it off.

The pad token (``<|reserved_special_token_0|>``) follows the Llama 3 vision releases; generation
stops at ``<end_of_utterance>``, the turn end the template writes.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny import TinyFamily, TinySize, register_tiny
from mmctx.models.tiny.idefics3 import SPECIAL, _idefics3
from mmctx.models.tiny.parts import llama_text_config, save_checkpoint
from mmctx.models.tiny.tokenizer import build_tokenizer

# https://huggingface.co/HuggingFaceM4/Idefics3-8B-Llama3/blob/92a708af3b96e7fe9aeac5d439a1f64083868a05/processor_config.json
# (the same string in its chat_template.json and in hf-internal-testing/tiny-processor-idefics3)
IDEFICS3_LLAMA3_TEMPLATE = (
    "<|begin_of_text|>{% for message in messages %}{{message['role'].capitalize()}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
LLAMA3_SPECIAL = [t for t in SPECIAL if t != "<|im_start|>"]


def build(out: Path, size: TinySize) -> None:
    tokenizer = build_tokenizer(
        LLAMA3_SPECIAL, prepend=(), bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>",
        pad_token="<|reserved_special_token_0|>", add_bos=True,
    )  # fmt: skip
    text_config = llama_text_config(len(tokenizer), size.hidden, size.layers, bos_token_id=tokenizer.bos_token_id)
    model, processor = _idefics3(
        tokenizer, size.image_size, text_config, splitting=True, template=IDEFICS3_LLAMA3_TEMPLATE
    )
    save_checkpoint(out, model, tokenizer, "<end_of_utterance>", processor=processor)


IDEFICS3_LLAMA3 = register_tiny(
    TinyFamily("idefics3_llama3", "HuggingFaceM4/Idefics3-8B-Llama3", build, notes="BOS in template and tokenizer")
)
