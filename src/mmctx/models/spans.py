"""Where an option's tokens are: the text and token bookkeeping every scoring backend shares.

The definition (see `mmctx.models.base`): an option's log-likelihood is the summed
log-probability of exactly the option's tokens given the full prompt. These functions find
those tokens in the *text* token space, where image expansion cannot shift them:

- `continuations`: what the chat template puts between the generation prompt and the answer
  (the *lead*: a space, an empty ``<think></think>`` block) is context; the option as the
  template rendered it is what is scored.
- `option_tokens`: a token straddling lead and option (``" red"`` after ``"Assistant:"``)
  belongs to the option, as in lm-eval.
- `option_spans`: the shared context of all options and, per option, its continuation.

Pure functions of strings, token ids and a tokenizer (anything called like a transformers
tokenizer): no model, no torch. The HF backend and the vLLM backend both call them, so both
score the same tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmctx.prompts.messages import ImagePart, Prompt, TextPart


class ModelError(RuntimeError):
    """The model cannot run this job (missing chat template, not loadable, …)."""


def answer_turn(option: str) -> dict:
    """The option as an assistant turn of a chat-template conversation."""
    return {"role": "assistant", "content": [{"type": "text", "text": option}]}


def continuations(
    prompt_text: str, answered: Sequence[str], options: Sequence[str], model: str
) -> list[tuple[str, str]]:
    """Per option, ``(lead, text)``: what the template puts after the generation prompt before
    the answer (context), and the option as rendered (the part that is scored).

    ``answered[i]`` is the conversation rendered with ``options[i]`` as the assistant's reply
    (no generation prompt); ``prompt_text`` is it rendered with the generation prompt.

    A template may open an answered turn differently from its generation prompt (LLaVA-OneVision
    writes ``assistant `` + newline + answer, but ``assistant`` + newline as the prompt). The model
    is asked with the generation prompt, so the option is scored as it would produce it: right
    after that prompt, with no lead. The answered turn must still open where the prompt's last
    turn does, and hold the option.
    """
    out = []
    for full, option in zip(answered, options):
        if not full.startswith(prompt_text):
            shared = common_prefix(full, prompt_text)
            turn_start = prompt_text.rfind("\n", 0, len(prompt_text) - 1) + 1  # the generation prompt's own line
            rendered = option if option in full[shared:] else option.strip()
            if shared < turn_start or not rendered or rendered not in full[shared:]:
                raise ModelError(
                    f"{model}: chat template's generation prompt is not a prefix of the answered conversation"
                )
            out.append(("", rendered))
            continue
        rest = full[len(prompt_text) :]
        rendered = option if option in rest else option.strip()  # templates may trim the content
        at = rest.find(rendered) if rendered else -1
        if at < 0:
            raise ModelError(f"{model}: option {option!r} not found after the generation prompt")
        out.append((rest[:at], rendered))
    return out


def adds_special_tokens(tokenizer: Any, texts: Sequence[str]) -> bool:
    """Whether the processor call on chat-template-rendered ``texts`` should add special tokens.

    transformers' own rule (``ProcessorMixin.apply_chat_template(tokenize=True)``): not when the
    rendered text already starts with the BOS token. A template that writes BOS (Gemma 3,
    Mistral 3, Llama) would otherwise get a second one from a tokenizer that prepends it; a
    template that writes none (Idefics2 with a Mistral tokenizer) still gets the tokenizer's.
    """
    bos = getattr(tokenizer, "bos_token", None)
    return not (bos and texts and all(t.startswith(bos) for t in texts))


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """``text`` tokenised alone: no special tokens added."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def option_tokens(tokenizer: Any, context: str, option: str) -> tuple[list[int], int]:
    """Tokens of ``context + option`` and how many at the end cover the option's characters.

    A token that straddles the boundary (``" red"`` after ``"Assistant:"``) belongs to the
    option, as in lm-eval; a template's lead that tokenises on its own stays context.
    """
    enc = tokenizer(context + option, add_special_tokens=False, return_offsets_mapping=True)
    return enc["input_ids"], sum(1 for _, end in enc["offset_mapping"] if end > len(context))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def common_suffix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many trailing items ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def option_spans(
    tokenizer: Any, prompt_text: str, conts: Sequence[tuple[str, str]], model: str
) -> tuple[int, list[list[int]], list[int]]:
    """Token bookkeeping in text space.

    Returns ``(drop, suffixes, starts)``: the shared context is the processed prompt minus
    its last ``drop`` tokens (tokens a boundary merge makes option-dependent); option i
    continues it with ``suffixes[i]``, of which tokens from ``starts[i]`` on are the
    option's own. Tokens before that are the template's lead: context, not scored.
    """
    prompt_ids = text_ids(tokenizer, prompt_text)
    encoded = [option_tokens(tokenizer, prompt_text + lead, text) for lead, text in conts]
    shared = min(common_prefix(prompt_ids, full) for full, _ in encoded)
    suffixes = [full[shared:] for full, _ in encoded]
    starts = [len(full) - n_option - shared for full, n_option in encoded]
    if min(starts) < 0:
        raise ModelError(f"{model}: an option's tokens reach into the shared prompt")
    return len(prompt_ids) - shared, suffixes, starts


def chat_conversation(prompt: Prompt) -> tuple[list[dict], list[ImagePart]]:
    """The typed prompt as a chat-template conversation (images as ``{"type": "image"}`` parts,
    the form HF processors' templates take) and its images, in the order the model sees them."""
    conversation, images = [], []
    for message in prompt:
        content = []
        for part in message.content:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                content.append({"type": "image"})
                images.append(part)
        conversation.append({"role": message.role, "content": content})
    return conversation, images
