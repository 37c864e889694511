"""Option scores are exact on every path a model can take, or the path is not taken.

The reference here is independent of the backend's scoring code: one full forward per option
through the processor, the model computing its own positions, and the option's tokens found
by character offsets. Qwen2-VL's multimodal RoPE (text after an image sits at "index + rope
delta") is the position scheme a shared-prefix scorer most easily gets wrong.
"""

from __future__ import annotations

import pytest
import torch
from fixtures.conversations import few_shot, square_images

from mmctx.models.base import ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.prompts.messages import Message, TextPart

TOLERANCE = 1e-4  # README: fast scores match the unshared reference within 1e-4 (fp32, CPU)
PATHS = ("packed", "copied", "per_option")
ONE_TOKEN = ("A", "B", "C")  # one token each in the tiny tokenizers, as colour words are in real ones
SEVERAL_TOKENS = ("dark blue", "red and green", "There are 3 circles.")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


def qwen(tiny_models, **kwargs) -> HFBackend:
    return HFBackend(str(tiny_models["qwen2_vl"]), device="cpu", dtype="float32", batch_size=4, **kwargs)


def reference(backend: HFBackend, request: ScoreRequest) -> list[float]:
    """Summed log-probability of each option's tokens: one forward over prompt + option, no cache."""
    processor, tokenizer = backend.processor, backend.tokenizer
    conversation, image_list = backend._hf_messages(request.messages)
    prompt = processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    scores = []
    for option in request.options:
        # What the template writes between the generation prompt and an answer (LLaVA-Interleave's
        # release: a second newline) is context: read it off the template's own answered turn.
        answered = processor.apply_chat_template(
            conversation + [{"role": "assistant", "content": [{"type": "text", "text": option}]}], tokenize=False
        )
        context = prompt + answered[len(prompt) : answered.index(option, len(prompt))]
        text = context + option
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        n_option = sum(1 for _, end in offsets if end > len(context))
        kwargs = {"images": [image_list]} if image_list else {}
        inputs = processor(text=[text], return_tensors="pt", **kwargs)
        ids = inputs["input_ids"][0]
        with torch.inference_mode():
            logprobs = backend.model(**inputs).logits[0].float().log_softmax(-1)
        scores.append(sum(float(logprobs[p - 1, ids[p]]) for p in range(len(ids) - n_option, len(ids))))
    return scores


def assert_exact(got, want):
    assert got.error is None
    assert len(got.loglikelihoods) == len(want)
    for a, b in zip(got.loglikelihoods, want):
        assert abs(a - b) <= TOLERANCE, (got.loglikelihoods, want)


def test_the_tiny_qwen2_vl_really_shifts_positions_after_images(tiny_models, images):
    """The test model is only a test of M-RoPE if its images take fewer positions than tokens."""
    b = qwen(tiny_models)
    conversation, image_list = b._hf_messages(few_shot(images))
    prompt = b._template(conversation, generation_prompt=True)
    inputs = b.processor(text=[prompt], images=[image_list], return_tensors="pt")
    _, deltas = b.model.model.get_rope_index(
        inputs["input_ids"], inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
    )
    assert int(deltas[0, 0]) < -10


@pytest.mark.parametrize("path", PATHS)
def test_every_path_equals_the_reference_on_qwen2_vl(tiny_models, images, path):
    b = qwen(tiny_models)
    b.option_path = path
    request = ScoreRequest(few_shot(images), SEVERAL_TOKENS)
    scores = b.score([request])[0]
    assert all(n >= 2 for n in scores.token_counts)
    assert_exact(scores, reference(b, request))


def test_first_query_of_one_token_options_still_checks_options_of_several_tokens(tiny_models, images):
    """Colour words are one token each; the once-per-model check must test longer options anyway."""
    for family in ("llava", "qwen2_vl"):
        b = HFBackend(str(tiny_models[family]), device="cpu", dtype="float32", batch_size=4)
        first = ScoreRequest(few_shot(images), ONE_TOKEN)
        assert b.score([first])[0].token_counts == (1, 1, 1)
        check = b.option_check
        assert check is not None and check.tolerance == TOLERANCE
        assert len(check.probe_token_counts) >= 2 and min(check.probe_token_counts) >= 2
        assert len(set(check.probe_token_counts)) > 1  # options of different lengths share one packed row
        assert check.path == "packed" and check.differences["packed"] <= TOLERANCE
        later = ScoreRequest(few_shot(images), SEVERAL_TOKENS)
        assert_exact(b.score([later])[0], reference(b, later))


def test_a_text_only_query_after_an_image_query_uses_no_stale_position_shift(tiny_models, images):
    b = qwen(tiny_models)
    b.score([ScoreRequest(few_shot(images), SEVERAL_TOKENS)])
    text_only = ScoreRequest((Message("user", (TextPart("What colour is the sky?"),)),), SEVERAL_TOKENS)
    for path in ("packed", "copied"):
        b.option_path = path
        assert_exact(b.score([text_only])[0], reference(b, text_only))


def test_a_position_scheme_the_fast_paths_miss_is_caught_and_scored_one_option_at_a_time(tiny_models, images):
    """Without the model's rope delta the shared-prefix paths are off; the check must notice and fall back."""
    b = qwen(tiny_models)
    b._position_shift = lambda: 0  # as for a family whose position scheme the backend does not know
    request = ScoreRequest(few_shot(images), SEVERAL_TOKENS)
    scores = b.score([request])[0]
    assert b.option_path == "per_option"
    assert b.option_check.differences["packed"] > 10 * TOLERANCE
    assert_exact(scores, reference(b, request))


def test_probe_options_cycle_through_the_query_options(tiny_models):
    b = HFBackend(str(tiny_models["llava"]), device="cpu", dtype="float32")
    probe = b._probe_options(ScoreRequest((), ("A", "B", "C", "D")))
    assert probe == ("A B", "B C D", "C D A B")
    assert b._probe_options(ScoreRequest((), ("Yes", " "))) == ("Yes Yes", "Yes Yes Yes", "Yes Yes Yes Yes")
