"""LLaVA-OneVision, LLaVA-Interleave and Idefics3/SmolVLM: the tiny checkpoints mirror their releases.

Each released chat template is kept here as the hub ships it (the source is named beside each
string), and the prompt mmctx renders for a few-shot, multi-image conversation must equal the
released template's own rendering of it: a tiny checkpoint with a home-made template would hide a
prompt that differs from the release's.
"""

from __future__ import annotations

import math

import pytest
from fixtures.conversations import few_shot, interleaved, render_released, square_images

from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.prompts.messages import Message, TextPart

# https://huggingface.co/llava-hf/llava-onevision-qwen2-0.5b-ov-hf/blob/main/chat_template.json (as kept in
# transformers' tests/models/llava_onevision/test_processor_llava_onevision.py, prepare_processor_dict)
ONEVISION_RELEASED = "{% for message in messages %}{{'<|im_start|>' + message['role'] + ' '}}{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>' }}{% endfor %}{# Render all video then #}{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>' }}{% endfor %}{# Render all text next #}{% if message['role'] != 'assistant' %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\n' + content['text'] }}{% endfor %}{% else %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{% generation %}{{ '\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}{{'<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"  # fmt: skip
# https://huggingface.co/llava-hf/llava-interleave-qwen-0.5b-hf/blob/1abeb3a994bf01d53d492318a1c9517950cd9f1b/chat_template.json
INTERLEAVE_RELEASED = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>' }}{% endfor %}{# Render all text next #}{% if message['role'] != 'assistant' %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\n' + content['text'] }}{% endfor %}{% else %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{% generation %}{{ '\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}{{'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"  # fmt: skip
# https://huggingface.co/HuggingFaceTB/SmolVLM-500M-Instruct/blob/dfffb6e7622a286a500146106027bc181c99a80e/chat_template.json
# (the same string in SmolVLM-256M-Instruct, SmolVLM-Instruct and SmolVLM2)
SMOLVLM_RELEASED = "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"  # fmt: skip

# https://huggingface.co/HuggingFaceM4/Idefics3-8B-Llama3/blob/92a708af3b96e7fe9aeac5d439a1f64083868a05/processor_config.json
IDEFICS3_8B_RELEASED = "<|begin_of_text|>{% for message in messages %}{{message['role'].capitalize()}}{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"  # fmt: skip

RELEASED = {
    "llava_onevision": ONEVISION_RELEASED, "llava": INTERLEAVE_RELEASED, "idefics3": SMOLVLM_RELEASED,
    "idefics3_llama3": IDEFICS3_8B_RELEASED,
}  # fmt: skip
NO_BOS_PREPENDED = ("llava_onevision", "llava", "idefics3")
FAMILIES = tuple(RELEASED)


@pytest.fixture(scope="module")
def checkpoints(tiny_models):
    return {family: tiny_models[family] for family in FAMILIES}  # built once per test session (conftest)


@pytest.fixture(scope="module")
def backends(checkpoints):
    return {
        family: HFBackend(str(path), device="cpu", dtype="float32", batch_size=4)
        for family, path in checkpoints.items()
    }


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_template_is_the_released_string(family, backends):
    assert backends[family].processor.chat_template == RELEASED[family]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("prompt", ["few_shot", "interleaved"])
def test_prompt_equals_the_released_templates_rendering(family, prompt, backends, images):
    backend = backends[family]
    messages = few_shot(images) if prompt == "few_shot" else interleaved(images)
    conversation, pictures = backend._hf_messages(messages)
    assert backend._template(conversation, True) == render_released(RELEASED[family], conversation, True)
    assert len(pictures) == sum(len(m.images) for m in messages)


def test_released_renderings_as_the_hub_documents_them(backends):
    """One image and a question, as each release's model card / transformers' tests show the prompt."""
    one = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is shown in this image?"}]}]
    ov = backends["llava_onevision"]._template(one, True)
    assert ov == "<|im_start|>user <image>\nWhat is shown in this image?<|im_end|><|im_start|>assistant\n"
    interleave = backends["llava"]._template(one, True)
    assert interleave == "<|im_start|>user\n<image>\nWhat is shown in this image?<|im_end|>\n<|im_start|>assistant\n"
    smol = backends["idefics3"]._template(one, True)
    assert smol == "<|im_start|>User:<image>What is shown in this image?<end_of_utterance>\nAssistant:"


@pytest.mark.parametrize("family", NO_BOS_PREPENDED)
def test_fed_ids_start_as_released(family, backends, images):
    """No tokenizer here prepends a BOS, as none of the releases' does: the ids start with the template's own."""
    backend = backends[family]
    conversation, pictures = backend._hf_messages(few_shot(images))
    ids = backend._process([backend._template(conversation, True)], [pictures])["input_ids"][0].tolist()
    assert ids[0] == backend.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert (
        backend.tokenizer("Answer", add_special_tokens=True)["input_ids"]
        == backend.tokenizer("Answer", add_special_tokens=False)["input_ids"]
    )


def test_idefics3_8b_gets_one_bos_from_template_and_tokenizer(backends, images):
    """Idefics3-8B's template writes <|begin_of_text|> and its Llama 3 tokenizer prepends it too: one is fed."""
    backend = backends["idefics3_llama3"]
    bos = backend.tokenizer.bos_token_id
    assert backend.tokenizer("Answer")["input_ids"][0] == bos  # the tokenizer really prepends it
    conversation, pictures = backend._hf_messages(few_shot(images))
    ids = backend._process([backend._template(conversation, True)], [pictures])["input_ids"][0].tolist()
    assert ids[0] == bos and ids[1] != bos and ids.count(bos) == 1


def test_onevision_tiles_one_image_and_not_several(backends, images):
    """anyres: a one-image prompt is tiled (base view + tiles + a newline per row); a multi-image prompt
    gets the base view and one newline an image, as the release's processor and model agree."""
    backend = backends["llava_onevision"]
    processor = backend.processor
    image_token = backend.model.config.image_token_index
    base = processor.num_image_tokens

    one = (Message("user", (images[0], TextPart("What colour is the square?"))),)
    conversation, pictures = backend._hf_messages(one)
    ids = backend._process([backend._template(conversation, True)], [pictures])["input_ids"][0]
    tiled = processor._get_number_of_features(80, 80, 32, 32)
    assert int((ids == image_token).sum()) == tiled > base + 1

    conversation, pictures = backend._hf_messages(few_shot(images))
    ids = backend._process([backend._template(conversation, True)], [pictures])["input_ids"][0]
    assert int((ids == image_token).sum()) == 3 * (base + 1)
    assert math.isqrt(base) ** 2 == base


@pytest.mark.parametrize("family", FAMILIES)
def test_ppl_equals_one_forward_per_option_and_batches_agree(family, backends, images):
    backend = backends[family]
    requests = [
        ScoreRequest(few_shot(images), ("red", "green", "blue")),
        ScoreRequest(interleaved(images), ("the left one", "B")),
        ScoreRequest(few_shot(images)[3:], ("yes", "no")),  # one image: OneVision tiles it
    ]
    batched = backend.score(requests)
    for request, scores in zip(requests, batched):
        assert scores.error is None, scores.error
        naive = backend.score_naive(request)
        assert naive.error is None, naive.error
        assert scores.token_counts == naive.token_counts
        for a, b in zip(scores.loglikelihoods, naive.loglikelihoods):
            assert abs(a - b) < 1e-4
    single = [backend.score([r])[0] for r in requests]
    for a, b in zip(single, batched):
        assert all(abs(x - y) < 1e-4 for x, y in zip(a.loglikelihoods, b.loglikelihoods))


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_decodes_only_new_tokens(family, backends, images):
    backend = backends[family]
    out = backend.generate([GenerateRequest(few_shot(images), max_new_tokens=6)])[0]
    assert out.error is None
    assert "<|im_start|>" not in out.text and "<image>" not in out.text and "colour" not in out.text
    specials = [t for t in backend.tokenizer.all_special_tokens if len(t) > 1]
    assert not any(t in out.text for t in specials)
    assert 0 < out.output_tokens <= 6


def test_onevision_token_costs_in_the_adapter_are_the_releases(backends):
    """`mmctx models` states OneVision's image cost; the numbers are the release's own arithmetic (729-token
    384-px views on a 6×6 grid of 384-px tiles, anyres_max_9)."""
    import copy

    from mmctx.models.adapters import adapter_for

    adapter = adapter_for("llava-hf/llava-onevision-qwen2-0.5b-ov-hf", "llava_onevision")
    assert adapter.family == "llava" and "anyres" in adapter.notes and "730 an image" in adapter.notes
    released = copy.deepcopy(backends["llava_onevision"].processor)
    released.num_image_tokens = 729
    released.image_processor.image_grid_pinpoints = [[384 * h, 384 * w] for h in range(1, 7) for w in range(1, 7)]
    assert released._get_number_of_features(384, 384, 384, 384) == 1485
    assert released._get_number_of_features(480, 640, 384, 384) == 2929
    doc = __import__("mmctx.models.adapters.llava", fromlist=["_"]).__doc__
    assert "1,485" in doc and "2,929" in doc and "730 each" in doc
