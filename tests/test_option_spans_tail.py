"""Option spans from the prompt tokenised once equal the straightforward ones, token for token.

The reference is `mmctx.models.spans.option_spans`: every option tokenised with the whole
prompt before it. The HF backend tokenises the prompt once and each option only from the
prompt's last restart token on (`encode_options`); these tests hold the two equal on every
tiny family's real tokenizer and chat template, on the shipped model, on templates that trim
the answer or open it with a think block, and on tokenizers unlike the tiny ones (SentencePiece
style), and check that a tokenizer the shortcut cannot be proven for is tokenised whole.
"""

from __future__ import annotations

import random

import pytest
from fixtures.conversations import few_shot, interleaved, square_images

from mmctx.models.base import ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.models.spans import (
    common_prefix,
    encode_options,
    encode_prompt,
    option_spans,
    option_tokens,
    restart_tokens,
    spans_of,
)
from mmctx.models.tiny import FAMILIES
from mmctx.prompts.messages import Message, TextPart

OPTION_SETS = (
    ("A", "B", "C", "D"),
    ("red", " red", "red ", "  dark blue"),  # leading and trailing spaces: templates may keep or trim them
    ("There are 3 circles.", "Yes", "No, the square is left of the star."),
)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


def conversations(images) -> list[tuple[Message, ...]]:
    text_only = (Message("user", (TextPart("What colour is the sky?"),)),)
    return [few_shot(images), interleaved(images), text_only]


def assert_spans_equal(backend: HFBackend, messages, options) -> int:
    """The backend's spans equal the reference's for ``options``; returns how many prompt tokens were reused."""
    conversation, _ = backend._hf_messages(messages)
    prompt_text = backend._template(conversation, generation_prompt=True)
    conts = backend._continuations(conversation, prompt_text, options)
    prompt = encode_prompt(backend.tokenizer, prompt_text)
    assert backend._option_spans(prompt, conts) == option_spans(backend.tokenizer, prompt_text, conts, model="m")
    encoded = encode_options(backend.tokenizer, prompt, conts, backend._restarts)
    for (lead, text), e in zip(conts, encoded):
        full, n_option = option_tokens(backend.tokenizer, prompt_text + lead, text)
        assert prompt.ids[: e.kept] + e.ids == full and e.n_option == n_option
    return encoded[0].kept


@pytest.mark.parametrize("family", [*FAMILIES, "builtin:shapes-vlm"])
def test_every_family_gets_the_reference_spans_from_the_prompt_tokenised_once(family, tiny_models, images):
    if family.startswith("builtin:"):
        backend = HFBackend.from_spec(family, device="cpu", dtype="float32")
    else:
        backend = HFBackend(str(tiny_models[family]), device="cpu", dtype="float32")
    for messages in conversations(images):
        for options in OPTION_SETS:
            kept = assert_spans_equal(backend, messages, options)
            assert kept > 0  # every family's template writes a restart token: the shortcut was taken


def test_templates_that_trim_the_answer_open_it_with_a_think_block_or_end_in_a_space(tiny_models, images):
    trimming = HFBackend(str(tiny_models["llava"]), device="cpu", dtype="float32")
    trimming.processor.chat_template = trimming.processor.chat_template.replace(
        "content['text'] }}", "content['text'] | trim }}"
    )
    thinking = HFBackend(str(tiny_models["idefics3"]), device="cpu", dtype="float32")
    thinking.processor.chat_template = thinking.processor.chat_template.replace(
        "{% for line in message['content'] %}",
        "{% if message['role'] == 'assistant' %}<think>\n\n</think>\n\n{% endif %}{% for line in message['content'] %}",
    )
    spaced = HFBackend(str(tiny_models["idefics3"]), device="cpu", dtype="float32")
    spaced.processor.chat_template = spaced.processor.chat_template.replace("{{ 'Assistant:' }}", "{{ 'Assistant: ' }}")
    for backend in (trimming, thinking, spaced):
        for messages in conversations(images):
            for options in OPTION_SETS:
                assert_spans_equal(backend, messages, options)
    # The variants really are what they claim to be.
    prompt = thinking._template(thinking._hf_messages(few_shot(images))[0], True)
    leads = [lead for lead, _ in thinking._continuations(thinking._hf_messages(few_shot(images))[0], prompt, ("A",))]
    assert "</think>" in leads[0]
    assert spaced._template(spaced._hf_messages(few_shot(images))[0], True).endswith("Assistant: ")


def test_llava_onevision_answered_turn_opens_differently_and_scores_as_the_reference(tiny_models, images):
    """Its answered turn writes "assistant \\n", its generation prompt "assistant\\n" (no lead)."""
    backend = HFBackend(str(tiny_models["llava_onevision"]), device="cpu", dtype="float32")
    request = ScoreRequest(few_shot(images), OPTION_SETS[1])
    conversation, _ = backend._hf_messages(request.messages)
    prompt = backend._template(conversation, True)
    assert not backend._template(conversation + [{"role": "assistant", "content": []}], False).startswith(prompt)
    assert all(lead == "" for lead, _ in backend._continuations(conversation, prompt, request.options))
    assert assert_spans_equal(backend, request.messages, request.options) > 0
    fast, naive = backend.score([request])[0], backend.score_naive(request)
    assert fast.token_counts == naive.token_counts


# ---- tokenizers unlike the tiny ones -------------------------------------------------------------

SPECIAL = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "<|im_start|>", "<|im_end|>"]


def sentencepiece_like(kind: str):
    """A BPE tokenizer in the SentencePiece style: ``metaspace`` (▁ prepended to the first word only,
    as Mistral's and Llama 3's converted ones do) or ``legacy`` (▁ prepended to every piece, by the
    normaliser, as Llama 2's legacy one does)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from mmctx.models.tiny.tokenizer import _corpus

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    if kind == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL, show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def random_case(rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    """A prompt of words, spaces, newlines and special tokens, and options with varied leads."""
    pieces = ["red", " blue", "circle", "  ", "\n", "A.", "?", "[INST]", "[/INST]", "<|im_start|>", "<|im_end|>", "é"]
    prompt = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
    leads = ["", " ", "\n", "<think>\n\n</think>\n\n", "[/INST]"]
    texts = ["red", " red", "Yes", " two words", "A", "\nB", "<|im_end|>x", "é!"]
    return prompt, [(rng.choice(leads), rng.choice(texts)) for _ in range(rng.randint(1, 4))]


@pytest.mark.parametrize("kind", ["metaspace", "legacy"])
def test_sentencepiece_style_tokenizers_get_the_reference_spans(kind):
    tokenizer = sentencepiece_like(kind)
    restarts = restart_tokens(tokenizer)
    assert {tokenizer.convert_tokens_to_ids(t) for t in SPECIAL} <= restarts.keys()
    rng, shortcut = random.Random(0), 0
    for _ in range(400):
        prompt_text, conts = random_case(rng)
        encoded = encode_options(tokenizer, encode_prompt(tokenizer, prompt_text), conts, restarts)
        prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
        assert spans_of(prompt_ids, encoded, "m") == option_spans(tokenizer, prompt_text, conts, "m")
        shortcut += encoded[0].kept > 0
    assert shortcut > 200  # most random prompts hold a special token: the shortcut was exercised


def test_added_tokens_that_could_reach_across_the_cut_are_no_restart(tmp_path):
    from tokenizers import AddedToken

    tokenizer = sentencepiece_like("metaspace")
    tokenizer.add_tokens(
        [AddedToken("<x>", normalized=False), AddedToken("a<x>b", normalized=False)]
        + [AddedToken("<l>", lstrip=True, normalized=False), AddedToken("<n>", normalized=True)]
    )
    restarts = restart_tokens(tokenizer)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<x>", "a<x>b", "<l>", "<n>", "[INST]")}
    assert ids["<x>"] not in restarts  # "a<x>" + "b…": "a<x>b" can start before the cut and reach past it
    assert ids["a<x>b"] in restarts and ids["[INST]"] in restarts
    assert ids["<l>"] not in restarts and ids["<n>"] not in restarts
    # With "a<x>" at the end of the prompt, an option "b" merges across what would have been the cut.
    prompt = encode_prompt(tokenizer, "[INST]hi a<x>")
    encoded = encode_options(tokenizer, prompt, [("", "b")], restarts)
    assert spans_of(prompt.ids, encoded, "m") == option_spans(tokenizer, prompt.text, [("", "b")], "m")


def test_a_restart_id_that_merges_reach_from_other_text_is_no_cut():
    """ "▁red" added as a token keeps its vocabulary id, which the merges also give " red": an id alone
    does not show that the tokenizer split there."""
    from tokenizers import AddedToken

    tokenizer = sentencepiece_like("metaspace")
    tokenizer.add_tokens([AddedToken("▁red", normalized=False)])
    red, inst = tokenizer.convert_tokens_to_ids("▁red"), tokenizer.convert_tokens_to_ids("[INST]")
    restarts = restart_tokens(tokenizer)
    prompt = encode_prompt(tokenizer, "x[INST] red")
    assert red in restarts and prompt.ids[-1] == red
    conts = [("", "dish"), ("", " blue")]
    encoded = encode_options(tokenizer, prompt, conts, restarts)
    assert [e.kept for e in encoded] == [prompt.ids.index(inst)] * 2
    assert spans_of(prompt.ids, encoded, "m") == option_spans(tokenizer, prompt.text, conts, "m")


class ContextDependent:
    """A tokenizer whose output after a restart token depends on what precedes it: in a text that does
    not open with ``[INST]`` it reads "red" as "RED". Tokenising from the cut then does not reproduce the
    prompt's tokens, so nothing of the prompt may be reused."""

    def __init__(self, inner):
        self.inner, self.is_fast, self.added_tokens_decoder = inner, True, inner.added_tokens_decoder

    def __call__(self, text: str, **kwargs):
        return self.inner(text if text.startswith("[INST]") else text.replace("red", "RED"), **kwargs)


def test_a_tokenizer_the_tail_check_refutes_is_tokenised_whole():
    tokenizer = ContextDependent(sentencepiece_like("metaspace"))
    prompt = encode_prompt(tokenizer, "[INST]red[/INST]red")
    assert restart_tokens(tokenizer)
    encoded = encode_options(tokenizer, prompt, [("", " red"), (" ", "blue")], restart_tokens(tokenizer))
    assert [e.kept for e in encoded] == [0, 0]
    assert spans_of(prompt.ids, encoded, "m") == option_spans(
        tokenizer, prompt.text, [("", " red"), (" ", "blue")], "m"
    )


def test_common_prefix_equals_the_item_by_item_count():
    def counted(a, b) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    rng = random.Random(1)
    for _ in range(2000):
        a = [rng.randint(0, 2) for _ in range(rng.randint(0, 40))]
        b = a[: rng.randint(0, len(a))] + [rng.randint(0, 2) for _ in range(rng.randint(0, 5))]
        assert common_prefix(a, b) == counted(a, b) == common_prefix(b, a)
        assert common_prefix("".join(map(str, a)), "".join(map(str, b))) == counted(a, b)
