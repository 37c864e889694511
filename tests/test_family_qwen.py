"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL on their tiny checkpoints, through `HFBackend`.

Each release is what is checked against: its chat template kept here as the hub ships it (the
source is named beside each string) and its rendering of few-shot and interleaved conversations,
the processor's own `apply_chat_template(tokenize=True)` ids (Qwen's tokenizer has no BOS),
the processor's image inputs for the prompt's images in order, generation decoded from new tokens
only, option log-likelihoods equal to one full forward per option (fp32, 1e-4) at any batch
size, and the adapter's pixel caps against each version's released ``preprocessor_config.json``.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from fixtures.conversations import few_shot, interleaved, render_released, square_images, with_pixels
from PIL import Image

from mmctx.models.adapters import adapter_for
from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")

# https://huggingface.co/Qwen/Qwen2-VL-7B-Instruct/blob/main/chat_template.json, and byte for byte
# https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/chat_template.json
QWEN2_VL_RELEASED = "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"  # fmt: skip
# Qwen3-VL's template (https://huggingface.co/Qwen/Qwen3-VL-8B-Instruct/blob/main/chat_template.json) is
# kept verbatim in mmctx.models.tiny.qwen3_vl; here it is checked by what it renders.
RELEASED_ONE_IMAGE = {
    # the Qwen2-VL model card's prompt: a default system turn
    "qwen2_vl": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n<|im_start|>assistant\n",
    "qwen2_5_vl": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n<|im_start|>assistant\n",
    # Qwen3-VL: no default system turn
    "qwen3_vl": "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n"
    "<|im_start|>assistant\n",
}

# Each version's released preprocessor_config.json (Qwen/Qwen2-VL-7B-Instruct, Qwen/Qwen2.5-VL-7B-Instruct,
# Qwen/Qwen3-VL-8B-Instruct): Qwen2/2.5 state min/max_pixels, Qwen3 a size of shortest/longest edge.
_CLIP = {"image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
RELEASED_PREPROCESSOR = {
    "qwen2_vl": {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
                 **_CLIP, "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2VLProcessor"},
    "qwen2_5_vl": {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
                   **_CLIP, "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor"},
    "qwen3_vl": {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "temporal_patch_size": 2,
                 "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                 "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"},
}  # fmt: skip


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


# ---- the release's template, tokenizer and processor ---------------------------------------------


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl"])
def test_tiny_template_is_the_released_string(family, backends):
    assert backends[family].processor.chat_template == QWEN2_VL_RELEASED


def test_tiny_qwen3_template_is_the_released_one(backends):
    """Qwen3-VL's long template: no default system turn, content lists in every role, tools, and
    ``{%- ... -%}`` whitespace control around each image; it renders the model card's prompt."""
    from mmctx.models.tiny.qwen3_vl import QWEN3_VL_TEMPLATE

    template = backends["qwen3_vl"].processor.chat_template
    assert template == QWEN3_VL_TEMPLATE and template.startswith("{%- if tools %}")
    assert (
        render_released(template, [{"role": "user", "content": "hi"}], True)
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    system = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, {"role": "user", "content": "hi"}]
    assert (
        render_released(template, system, False)
        == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_released_rendering_as_the_model_card_shows_it(family, backends):
    one = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe this image."}]}]
    assert backends[family]._template(one, True) == RELEASED_ONE_IMAGE[family]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("prompt", ["few_shot", "interleaved"])
def test_prompt_equals_the_released_templates_rendering(family, prompt, backends, images):
    backend = backends[family]
    messages = few_shot(images) if prompt == "few_shot" else interleaved(images)
    conversation, pictures = backend._hf_messages(messages)
    rendered = backend._template(conversation, True)
    assert rendered == render_released(backend.processor.chat_template, conversation, True)
    if family != "qwen3_vl":
        assert rendered == render_released(QWEN2_VL_RELEASED, conversation, True)
    assert rendered.count("<|vision_start|><|image_pad|><|vision_end|>") == len(pictures) == 3
    # each demo's image inside its own user turn
    turns = rendered.split("<|im_start|>")
    assert [t.count("<|image_pad|>") for t in turns if t.startswith("user")] == (
        [1, 1, 1] if prompt == "few_shot" else [1, 2]
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_fed_ids_equal_the_processors_own_and_carry_no_bos(family, backends, images):
    backend = backends[family]
    assert backend.tokenizer.bos_token is None  # Qwen's tokenizers have none, and add none
    conversation, pictures = backend._hf_messages(few_shot(images))
    fed = backend._process([backend._template(conversation, True)], [pictures])
    own = backend.processor.apply_chat_template(
        with_pixels(conversation, pictures), add_generation_prompt=True, tokenize=True, return_dict=True,
        return_tensors="pt",
    )  # fmt: skip
    assert fed["input_ids"].tolist() == own["input_ids"].tolist()
    assert fed["input_ids"][0, 0] == backend.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert torch.equal(fed["image_grid_thw"], own["image_grid_thw"])


@pytest.mark.parametrize("family", FAMILIES)
def test_image_inputs_are_the_prompts_images_in_order(family, backends, images):
    """The processor's patches for the prompt are each image's own patches, in prompt order."""
    backend = backends[family]
    conversation, pictures = backend._hf_messages(interleaved(images))
    fed = backend._process([backend._template(conversation, True)], [pictures])
    alone = [backend.processor.image_processor([p], return_tensors="pt") for p in pictures]
    assert fed["image_grid_thw"].shape[0] == len(pictures) == 3
    assert torch.equal(fed["pixel_values"], torch.cat([a["pixel_values"] for a in alone]))
    merge = backend.processor.image_processor.merge_size**2
    image_id = backend.processor.image_token_id
    assert int((fed["input_ids"] == image_id).sum()) == int(fed["image_grid_thw"].prod(-1).sum()) // merge


# ---- the model's own computation -------------------------------------------------------------


def test_the_tiny_models_mirror_the_releases_layout(backends):
    q25 = backends["qwen2_5_vl"].model.config.vision_config
    assert q25.window_size == 56 and list(q25.fullatt_block_indexes) == [1] and q25.depth == 2  # windowed + full
    q3 = backends["qwen3_vl"].model
    assert type(q3).__name__ == "Qwen3VLForConditionalGeneration"
    assert list(q3.config.vision_config.deepstack_visual_indexes) == [0, 1]
    assert q3.config.get_text_config().rope_parameters["mrope_interleaved"] is True


@pytest.mark.parametrize("family", FAMILIES)
def test_ppl_equals_one_forward_per_option_at_any_batch_size(family, backends, checkpoints, images):
    backend = backends[family]
    requests = [
        ScoreRequest(few_shot(images), ("red", "blue", "dark green", "a small yellow square")),
        ScoreRequest(interleaved(images), ("the left one", "B")),
    ]
    scored = backend.score(requests)
    one = HFBackend(str(checkpoints[family]), device="cpu", dtype="float32", batch_size=1)
    for request, got, alone in zip(requests, scored, one.score(requests)):
        naive = backend.score_naive(request)
        assert got.error is None and naive.error is None, (got.error, naive.error)
        assert max(abs(a - b) for a, b in zip(got.loglikelihoods, naive.loglikelihoods)) <= 1e-4
        assert max(abs(a - b) for a, b in zip(alone.loglikelihoods, got.loglikelihoods)) <= 1e-4
        assert got.token_counts == naive.token_counts
    check = backend.usage()["option_scoring"]
    assert check["path"] in ("packed", "copied", "per_option") and check["path"] == backend.option_path


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_decodes_only_new_tokens(family, backends, images):
    backend = backends[family]
    messages = few_shot(images)
    got = backend.generate([GenerateRequest(messages, max_new_tokens=6)])[0]
    conversation, pictures = backend._hf_messages(messages)
    own = backend.processor.apply_chat_template(
        with_pixels(conversation, pictures), add_generation_prompt=True, tokenize=True, return_dict=True,
        return_tensors="pt",
    )  # fmt: skip
    with torch.inference_mode():
        out = backend.model.generate(**own, max_new_tokens=6, do_sample=False)
    new = out[0, own["input_ids"].shape[1] :].tolist()
    eos = backend.tokenizer.convert_tokens_to_ids("<|im_end|>")
    new = new[: new.index(eos)] if eos in new else new
    assert got.error is None and got.prompt_tokens == own["input_ids"].shape[1]
    assert got.text == backend.tokenizer.decode(new, skip_special_tokens=True)
    assert not any(t in got.text for t in backend.tokenizer.all_special_tokens if len(t) > 1)


# ---- the adapter: every version, its pixel caps as data ----------------------------------------


@pytest.mark.parametrize(
    "model_id, model_type, family",
    [
        ("Qwen/Qwen2-VL-7B-Instruct", "qwen2_vl", "qwen_vl"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_5_vl", "qwen_vl"),
        ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl", "qwen3_vl"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", "qwen3_vl_moe", "qwen3_vl"),
        ("some-org/finetune", "qwen3_vl", "qwen3_vl"),  # by config type alone
        ("Qwen/Qwen3-VL-4B-Instruct", None, "qwen3_vl"),  # by id alone
    ],
)
def test_every_qwen_version_gets_a_qwen_adapter(model_id, model_type, family):
    adapter = adapter_for(model_id, model_type)
    assert adapter.family == family and type(adapter).__name__ == "QwenVLAdapter"
    assert set(adapter.processor_kwargs) == {"min_pixels", "max_pixels"}


@pytest.mark.parametrize("family", FAMILIES)
def test_pixel_caps_hold_against_the_released_preprocessor_config(family, checkpoints, backends, tmp_path):
    """The tiny checkpoint with its version's released preprocessor_config.json: whatever the release
    allows (12.8 M / 16.8 M px), the adapter's caps decide how many visual tokens an image takes:
    at most 512, at least 64. transformers warns about the caps on every call (documented in the
    adapter), and the run records both values."""
    release = shutil.copytree(checkpoints[family], tmp_path / family)
    (release / "preprocessor_config.json").write_text(json.dumps(RELEASED_PREPROCESSOR[family]))
    backend = HFBackend(str(release), device="cpu", dtype="float32")
    side = 28 if family != "qwen3_vl" else 32
    caps = backend.adapter.processor_kwargs
    assert (caps["min_pixels"], caps["max_pixels"]) == (64 * side * side, 512 * side * side)
    size = backend.processor.image_processor.size
    assert (size.shortest_edge, size.longest_edge) == (caps["min_pixels"], caps["max_pixels"])
    pictures = [Image.new("RGB", (1920, 1440), "red")] * 9 + [Image.new("RGB", (40, 40), "blue")]
    text = "<|vision_start|><|image_pad|><|vision_end|>" * len(pictures)
    with pytest.warns(FutureWarning, match="min_pixels"):
        out = backend._process([text], [pictures])
    tokens = (out["image_grid_thw"].prod(-1) // 4).tolist()
    assert max(tokens) <= 512 and min(tokens[:9]) > 400 and tokens[9] >= 64
    assert int((out["input_ids"] == backend.processor.image_token_id).sum()) == sum(tokens)
    released_min = 3136 if family != "qwen3_vl" else 65536
    released_max = 12845056 if family != "qwen3_vl" else 16777216
    overrides = backend.processor_overrides
    assert overrides["max_pixels"] == {"checkpoint": released_max, "mmctx": caps["max_pixels"]}
    if released_min != caps["min_pixels"]:
        assert overrides["min_pixels"] == {"checkpoint": released_min, "mmctx": caps["min_pixels"]}
    else:  # Qwen3-VL's released minimum is the cap itself: nothing changed, nothing recorded
        assert "min_pixels" not in overrides
