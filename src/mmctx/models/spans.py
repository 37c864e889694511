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

`option_spans` tokenises the whole prompt again with every option: the definition, kept as the
reference. `encode_prompt`, `encode_options` and `spans_of` give the same spans token for token
with the long prompt tokenised once per query and each option only from the prompt's last
`restart_tokens` token on (an added token that a fast tokenizer splits on before anything else,
so that what follows it tokenises alike whatever precedes it); that tokenising from there
reproduces the prompt's own tokens is checked on every query, and a prompt where it does not,
or with no such token, has every option tokenised whole.

Pure functions of strings, token ids and a tokenizer (anything called like a transformers
tokenizer): no model, no torch. The HF backend and the vLLM backend both call them, so both
score the same tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


def common_prefix(a: Sequence, b: Sequence) -> int:
    """How many leading items ``a`` and ``b`` (strings or token ids) share.

    A binary search on slice equality: the comparisons run in C, and a prompt's ids are long.
    """
    low, high = 0, min(len(a), len(b))  # the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


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


# ---- the same spans, tokenising the long prompt once per query ------------------------------


@dataclass(frozen=True)
class EncodedPrompt:
    """The generation prompt tokenised once (`text_ids`), with each token's character span."""

    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]


def encode_prompt(tokenizer: Any, text: str) -> EncodedPrompt:
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return EncodedPrompt(text, enc["input_ids"], [tuple(o) for o in enc["offset_mapping"]])


def restart_tokens(tokenizer: Any) -> dict[int, str]:
    """Added tokens (id: text) from which a tokenizer's output does not depend on the text before them.

    A `tokenizers` (fast) tokenizer first splits its input at added tokens, then normalises,
    pre-tokenises and merges each piece on its own; so from an added token that the split
    matched on, tokenising the rest of the text alone gives the same tokens, provided that
    - the token is matched on the raw text (not ``normalized``), reaches no further left than its
      own text (not ``lstrip``) and needs no word boundary before it (not ``single_word``);
    - no added token contains its text after a first character: such a token could start
      earlier, in the prompt, and run into whatever text is appended.
    Any other tokenizer (and one that encodes special tokens as text) has none.
    """
    added = getattr(tokenizer, "added_tokens_decoder", None)
    if not getattr(tokenizer, "is_fast", False) or not added or getattr(tokenizer, "split_special_tokens", False):
        return {}
    inner = "\0".join(t.content[1:] for t in added.values())
    return {
        i: t.content
        for i, t in added.items()
        if t.content and "\0" not in t.content and t.content not in inner
        and not (t.normalized or t.lstrip or t.single_word)
    }  # fmt: skip


@dataclass(frozen=True)
class OptionTokens:
    """`option_tokens` of one option, stored as the prompt's first ``kept`` tokens then ``ids``."""

    kept: int
    ids: list[int]
    n_option: int


def encode_options(
    tokenizer: Any, prompt: EncodedPrompt, conts: Sequence[tuple[str, str]], restarts: dict[int, str]
) -> list[OptionTokens]:
    """Per ``(lead, text)``, `option_tokens` of ``prompt.text + lead`` and ``text``, equal to it
    token for token, tokenising only the tail from the prompt's last restart token on.

    The restart token must stand in the prompt as its own text (not an id the model's merges
    reach from other text), and tokenising from it must reproduce the prompt's own tokens: both
    are checked, not assumed; where either fails, or the prompt holds no restart token, each
    option is tokenised whole.
    """
    cut = next((k for k in range(len(prompt.ids) - 1, -1, -1) if _stands_as_added(prompt, k, restarts)), None)
    if cut is not None:
        tail = prompt.text[prompt.offsets[cut][0] :]
        if text_ids(tokenizer, tail) == prompt.ids[cut:]:
            tails = [option_tokens(tokenizer, tail + lead, text) for lead, text in conts]
            if all(ids[:1] == prompt.ids[cut : cut + 1] for ids, _ in tails):
                return [OptionTokens(cut, ids, n) for ids, n in tails]
    return [OptionTokens(0, *option_tokens(tokenizer, prompt.text + lead, text)) for lead, text in conts]


def _stands_as_added(prompt: EncodedPrompt, k: int, restarts: dict[int, str]) -> bool:
    text = restarts.get(prompt.ids[k])
    return text is not None and prompt.text.startswith(text, prompt.offsets[k][0])


def spans_of(
    prompt_ids: list[int], encoded: Sequence[OptionTokens], model: str
) -> tuple[int, list[list[int]], list[int]]:
    """`option_spans`' ``(drop, suffixes, starts)`` from the prompt's ids and each option's tokens.

    Only the options' own ids are compared with the prompt's: the ``kept`` tokens are its own.
    """
    shared = min(e.kept + common_prefix(prompt_ids[e.kept :], e.ids) for e in encoded)
    suffixes = [prompt_ids[shared : e.kept] + e.ids[max(shared - e.kept, 0) :] for e in encoded]
    starts = [e.kept + len(e.ids) - e.n_option - shared for e in encoded]
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
