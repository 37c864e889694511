"""The HF backend on tiny real checkpoints: fast option scores against the naive reference."""

from __future__ import annotations

import pytest
from fixtures.conversations import few_shot, square_images

from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend, ModelError
from mmctx.models.spans import encode_prompt

FAMILIES = ("idefics3", "llava")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


OPTIONS = ("green", "red", "dark blue", "There are 3 circles.")


@pytest.fixture(scope="module", params=FAMILIES)
def backend(request, tiny_models):
    return HFBackend(str(tiny_models[request.param]), device="cpu", dtype="float32", batch_size=4)


@pytest.mark.parametrize("path", ["packed", "copied", "per_option"])
def test_fast_scores_equal_naive_forward_per_option(backend, images, path):
    req = ScoreRequest(few_shot(images), OPTIONS)
    backend.option_path = path
    fast = backend.score([req])[0]
    backend.option_path = None
    naive = backend.score_naive(req)
    assert fast.error is None
    assert fast.token_counts == naive.token_counts
    assert all(n > 0 for n in fast.token_counts)
    for a, b in zip(fast.loglikelihoods, naive.loglikelihoods):
        assert abs(a - b) < 1e-4
    # Random weights still give different options different scores: the test can fail.
    assert len({round(x, 3) for x in fast.loglikelihoods}) == len(OPTIONS)


def test_packing_is_verified_once_and_eager_attention_packs_too(tiny_models, images):
    """The first scored query checks packing against one forward per option before trusting it."""
    for attn in ("sdpa", "eager"):
        b = HFBackend(str(tiny_models["llava"]), device="cpu", dtype="float32", attn_implementation=attn)
        assert b._attn_impl == attn and b.option_path is None
        req = ScoreRequest(few_shot(images), OPTIONS)
        first = b.score([req])[0]
        assert b.option_path == "packed" and b.option_check.differences["packed"] <= 1e-4
        second = b.score([req])[0]
        naive = b.score_naive(req)
        for x, y, z in zip(first.loglikelihoods, second.loglikelihoods, naive.loglikelihoods):
            assert abs(x - y) < 1e-4 and abs(y - z) < 1e-4


def test_batch_size_one_and_n_give_same_scores(backend, images):
    req = ScoreRequest(few_shot(images), OPTIONS)
    backend.batch_size = 1
    one = backend.score([req])[0]
    backend.batch_size = 4
    many = backend.score([req])[0]
    assert one.token_counts == many.token_counts
    for a, b in zip(one.loglikelihoods, many.loglikelihoods):
        assert abs(a - b) < 1e-5


def test_option_tokens_are_exactly_the_option_after_image_expansion(backend, images):
    """The counted tokens are the option's own, however many image tokens precede them."""
    one_image = few_shot(images)[-1:]
    three_images = few_shot(images)
    a = backend.score([ScoreRequest(one_image, OPTIONS)])[0]
    b = backend.score([ScoreRequest(three_images, OPTIONS)])[0]
    assert a.token_counts == b.token_counts
    assert b.prompt_tokens > a.prompt_tokens + 2 * 4  # image tokens were expanded into the prompt
    # The count is what the option adds after the template's lead (e.g. the space after "Assistant:"),
    # nothing of the end-of-turn marker; a token merging lead and option belongs to the option.
    tok = backend.tokenizer
    prompt = backend._template(backend._hf_messages(one_image)[0], generation_prompt=True)
    for option, count in zip(OPTIONS, a.token_counts):
        lead, text = backend._continuations(backend._hf_messages(one_image)[0], prompt, (option,))[0]
        assert text == option
        full = tok(prompt + lead + text, add_special_tokens=False)["input_ids"]
        assert tok.decode(full[-count:]).strip() == option
        assert tok.decode(full[-count + 1 :]).strip() != option  # not one token more or less


def test_leading_space_boundary_is_handled(tiny_models, images):
    """A generation prompt ending in a space merges with the option's first token; scores stay exact."""
    b = HFBackend(str(tiny_models["idefics3"]), device="cpu", dtype="float32")
    b.processor.chat_template = b.processor.chat_template.replace("{{ 'Assistant:' }}", "{{ 'Assistant: ' }}")
    req = ScoreRequest(few_shot(images), ("red", "blue"))
    prompt = b._template(b._hf_messages(req.messages)[0], generation_prompt=True)
    assert prompt.endswith("Assistant: ")
    conts = b._continuations(b._hf_messages(req.messages)[0], prompt, req.options)
    drop, _, _ = b._option_spans(encode_prompt(b.tokenizer, prompt), conts)
    assert drop >= 1  # the trailing space token is option-dependent and was moved out of the shared prefix
    fast, naive = b.score([req])[0], b.score_naive(req)
    assert fast.token_counts == naive.token_counts
    for x, y in zip(fast.loglikelihoods, naive.loglikelihoods):
        assert abs(x - y) < 1e-4


def test_text_the_template_inserts_before_the_answer_is_context_not_option(tiny_models, images):
    """A Qwen3-style template adds an empty think block to answered turns: it must not be scored."""
    plain = HFBackend(str(tiny_models["idefics3"]), device="cpu", dtype="float32")
    think = HFBackend(str(tiny_models["idefics3"]), device="cpu", dtype="float32")
    think.processor.chat_template = think.processor.chat_template.replace(
        "{% for line in message['content'] %}",
        "{% if message['role'] == 'assistant' %}<think>\n\n</think>\n\n{% endif %}{% for line in message['content'] %}",
    )
    req = ScoreRequest(few_shot(images)[-1:], OPTIONS)
    prompt = think._template(think._hf_messages(req.messages)[0], generation_prompt=True)
    leads = [lead for lead, _ in think._continuations(think._hf_messages(req.messages)[0], prompt, OPTIONS)]
    assert all("</think>" in lead for lead in leads)
    fast, naive = think.score([req])[0], think.score_naive(req)
    assert fast.token_counts == naive.token_counts
    for x, y in zip(fast.loglikelihoods, naive.loglikelihoods):
        assert abs(x - y) < 1e-4
    # The scored tokens decode to the option alone: nothing of the think block.
    for (lead, text), count in zip(
        think._continuations(think._hf_messages(req.messages)[0], prompt, OPTIONS), fast.token_counts
    ):
        full, n = think._option_tokens(prompt + lead, text)
        assert n == count and think.tokenizer.decode(full[-n:]).strip() == text
    assert plain.score([req])[0].token_counts  # the plain template still scores


def test_option_trimmed_by_the_template_is_scored_as_rendered(tiny_models, images):
    b = HFBackend(str(tiny_models["llava"]), device="cpu", dtype="float32")
    b.processor.chat_template = b.processor.chat_template.replace("content['text'] }}", "content['text'] | trim }}")
    req = ScoreRequest(few_shot(images)[-1:], ("red ", " blue"))
    fast = b.score([req])[0]
    assert fast.token_counts == b.score([ScoreRequest(req.messages, ("red", "blue"))])[0].token_counts


def test_bos_added_by_tokenizer_is_not_scored(tmp_path, images):
    """A tokenizer that prepends BOS (as Llama-style ones do) changes nothing about option spans."""
    from tokenizers.processors import TemplateProcessing

    from mmctx.models.tiny import build_tiny_vlm

    path = build_tiny_vlm(tmp_path / "bos", family="llava", seed=1)
    b = HFBackend(str(path), device="cpu", dtype="float32")
    b.tokenizer.bos_token = bos = "<|endoftext|>"  # the release has no BOS token: give it one
    b.tokenizer._tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, b.tokenizer.bos_token_id)]
    )
    req = ScoreRequest(few_shot(images), OPTIONS)
    inputs = b._process([b._template(b._hf_messages(req.messages)[0], True)], [b._hf_messages(req.messages)[1]])
    assert inputs["input_ids"][0, 0].item() == b.tokenizer.bos_token_id  # BOS really is there
    fast, naive = b.score([req])[0], b.score_naive(req)
    assert fast.token_counts == naive.token_counts
    for x, y in zip(fast.loglikelihoods, naive.loglikelihoods):
        assert abs(x - y) < 1e-4


def test_batched_generation_equals_one_at_a_time(backend, images):
    msgs = few_shot(images)
    reqs = [GenerateRequest(msgs, 6), GenerateRequest(msgs[-1:], 6), GenerateRequest(msgs[:3], 6)]
    backend.batch_size = 3
    batched = backend.generate(reqs)
    backend.batch_size = 1
    single = backend.generate(reqs)
    backend.batch_size = 4
    assert [g.text for g in batched] == [g.text for g in single]
    assert all(g.output_tokens <= 6 for g in batched)
    # An untrained model never emits its end-of-turn token this early: every output hits the limit.
    assert all(g.truncated for g in batched if g.output_tokens == 6)
    assert batched[0].prompt_tokens > batched[1].prompt_tokens


def test_context_overflow_is_an_error_not_a_crash(tiny_models, images):
    b = HFBackend(str(tiny_models["llava"]), device="cpu", dtype="float32")
    b.capabilities = type(b.capabilities)(**{**b.capabilities.__dict__, "context_window": 40})
    g = b.generate([GenerateRequest(few_shot(images), 8)])[0]
    s = b.score([ScoreRequest(few_shot(images), OPTIONS)])[0]
    assert g.error and g.error.startswith("context_overflow")
    assert s.error and s.error.startswith("context_overflow")
    assert not s.loglikelihoods


def test_model_without_chat_template_is_refused(tmp_path):
    from mmctx.models.tiny import build_tiny_vlm

    path = build_tiny_vlm(tmp_path / "nochat", family="idefics3", seed=2)
    for f in path.glob("chat_template*"):
        f.unlink()
    cfg = path / "processor_config.json"
    if cfg.exists():
        import json

        data = json.loads(cfg.read_text())
        data.pop("chat_template", None)
        cfg.write_text(json.dumps(data))
    with pytest.raises(ModelError, match="no chat template"):
        HFBackend(str(path), device="cpu")


def test_capabilities_and_identity(backend):
    caps = backend.capabilities
    assert caps.loglikelihood and caps.chat_template and caps.interleaved
    assert caps.context_window == 4096
    assert backend.info.revision.startswith("local-")
    family = {"Idefics3ForConditionalGeneration": "idefics", "LlavaForConditionalGeneration": "llava"}[
        type(backend.model).__name__
    ]
    # Idefics3's paper image settings would resize this checkpoint's images differently from its
    # own: which ones apply is part of its identity. LLaVA has none, so nothing is recorded.
    images = {"image_settings": "checkpoint"} if family == "idefics" else {}
    assert backend.info.settings == {"dtype": "float32", "device": "cpu", "scoring": "3", "adapter": family, **images}


def test_local_revision_follows_weight_and_template_content(tmp_path):
    """A fine-tune that keeps every file size must get a new revision, so no stale cache is reused."""
    import safetensors.torch

    from mmctx.models.revision import folder_digest as _local_revision
    from mmctx.models.tiny import build_tiny_vlm

    path = build_tiny_vlm(tmp_path / "m", family="llava", seed=0)
    before = _local_revision(path)
    assert before == _local_revision(path)
    weights = path / "model.safetensors"
    tensors = safetensors.torch.load_file(weights)
    tensors = {k: v + 0.5 for k, v in tensors.items()}
    safetensors.torch.save_file(tensors, weights, metadata={"format": "pt"})
    after_weights = _local_revision(path)
    assert after_weights != before
    template = next(path.glob("chat_template*"))
    text = template.read_text()
    template.write_text(text.replace("user", "usr").replace("<|im_end|>", "<|im_end|>X"))
    assert _local_revision(path) not in (before, after_weights)


def test_stop_strings_end_generation_and_are_not_truncation(backend, images):
    msgs = few_shot(images)
    texts = [backend.generate([GenerateRequest(msgs, n)])[0].text for n in range(1, 9)]
    # The first generated step whose text is new and printable becomes the stop string.
    k, stop = next(
        (n, texts[n][len(texts[n - 1]) :])
        for n in range(1, 8)
        if texts[n].startswith(texts[n - 1])
        and texts[n][len(texts[n - 1]) :].strip().isprintable()
        and texts[n][len(texts[n - 1]) :].strip()
        and texts[n][len(texts[n - 1]) :] not in texts[n - 1]
        and "\ufffd" not in texts[n][len(texts[n - 1]) :]  # a byte that decodes to no character cannot stop
    )
    stopped = backend.generate([GenerateRequest(msgs, 12, stop=(stop,))])[0]
    assert stopped.text == texts[k]
    assert stopped.output_tokens == k + 1 < 12
    assert not stopped.truncated
    free = backend.generate([GenerateRequest(msgs, 12)])[0]
    assert free.truncated and free.output_tokens == 12


def test_an_answered_turn_that_opens_differently_scores_the_option_right_after_the_generation_prompt():
    from mmctx.models.spans import continuations

    prompt = "<|im_start|>user\nWhich?<|im_end|>\n<|im_start|>assistant\n"
    # LLaVA-OneVision's release: "assistant " + newline + answer when answered, "assistant\n" to prompt
    answered = ["<|im_start|>user\nWhich?<|im_end|>\n<|im_start|>assistant \nred<|im_end|>"]
    assert continuations(prompt, answered, ["red"], model="m") == [("", "red")]
    # An answered conversation that departs before the prompt's last turn is a template mmctx cannot read
    elsewhere = ["<|im_start|>system\nred<|im_end|>"]
    with pytest.raises(ModelError, match="not a prefix"):
        continuations(prompt, elsewhere, ["red"], model="m")
