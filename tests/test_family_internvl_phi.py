"""InternVL (native -hf) and native Phi-4-multimodal on their tiny checkpoints, through `HFBackend`.

Each family's release is what is checked against: its chat template's rendering of a 2-shot
conversation (each demo's image inside its own user turn), the processor's own
`apply_chat_template(tokenize=True)` ids, the processor's image inputs for the prompt's images
in order, generation decoded from new tokens only, and option log-likelihoods equal to one full
forward per option (fp32, 1e-4) at any batch size.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from fixtures.conversations import few_shot, square_images, with_pixels
from PIL import Image

from mmctx.models.adapters import Adapter
from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.models.spans import ModelError
from mmctx.models.tiny.internvl import TOKENS_PER_TILE
from mmctx.prompts.messages import ImagePart

FAMILIES = ("internvl", "phi4_multimodal")


@pytest.fixture(scope="module")
def checkpoints(tiny_models):
    return {family: tiny_models[family] for family in FAMILIES}  # built once per test session (conftest)


@pytest.fixture(scope="module")
def backends(checkpoints):
    return {family: HFBackend(str(path), device="cpu", dtype="float32") for family, path in checkpoints.items()}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


def _own_inputs(backend: HFBackend, conversation: list[dict], pictures: list[Image.Image]) -> dict:
    """What the processor itself makes of the conversation: `apply_chat_template(tokenize=True)`."""
    return backend.processor.apply_chat_template(
        with_pixels(conversation, pictures), add_generation_prompt=True, tokenize=True, return_dict=True,
        return_tensors="pt",
    )  # fmt: skip


RELEASED_PROMPTS = {
    # OpenGVLab/InternVL3-1B-hf: ChatML, "<IMG_CONTEXT>\n" per image, no default system turn, no BOS.
    "internvl": (
        "<|im_start|>system\nAnswer briefly.<|im_end|>\n"
        "<|im_start|>user\n<IMG_CONTEXT>\nWhat colour is the square?<|im_end|>\n<|im_start|>assistant\nred<|im_end|>\n"
        "<|im_start|>user\n<IMG_CONTEXT>\nWhat colour is the square?<|im_end|>\n<|im_start|>assistant\nblue<|im_end|>\n"
        "<|im_start|>user\n<IMG_CONTEXT>\nWhat colour is the square?<|im_end|>\n<|im_start|>assistant\n"
    ),
    # microsoft/Phi-4-multimodal-instruct (native): nothing between tags, "<|image|>" unnumbered, no BOS.
    "phi4_multimodal": (
        "<|system|>Answer briefly.<|end|>"
        "<|user|><|image|>What colour is the square?<|end|><|assistant|>red<|end|>"
        "<|user|><|image|>What colour is the square?<|end|><|assistant|>blue<|end|>"
        "<|user|><|image|>What colour is the square?<|end|><|assistant|>"
    ),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_prompt_is_the_released_templates_rendering(family, backends, images):
    backend = backends[family]
    conversation, _ = backend._hf_messages(few_shot(images))
    assert backend._template(conversation, generation_prompt=True) == RELEASED_PROMPTS[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_fed_ids_are_the_processors_own_with_no_bos_added(family, backends, images):
    backend = backends[family]
    conversation, pictures = backend._hf_messages(few_shot(images))
    fed = backend._process([backend._template(conversation, True)], [pictures])
    own = _own_inputs(backend, conversation, pictures)
    assert fed["input_ids"][0].tolist() == own["input_ids"][0].tolist()
    # Neither release prepends anything: the ids start with the template's first token.
    first = backend.tokenizer.convert_tokens_to_ids("<|im_start|>" if family == "internvl" else "<|system|>")
    assert fed["input_ids"][0, 0].item() == first


def test_internvl_tiles_reach_the_model_per_image_in_prompt_order(backends, images, tmp_path):
    """Each image's tiles (dynamic grid + thumbnail, ≤ 6 tiles as the adapter sets) follow the prompt's image order."""
    backend = backends["internvl"]
    shown = [Image.new("RGB", (96, 32), "red"), Image.new("RGB", (40, 40), "blue"), Image.new("RGB", (32, 96), "green")]
    paths = []
    for i, im in enumerate(shown):
        im.save(tmp_path / f"{i}.png")
        paths.append(tmp_path / f"{i}.png")
    parts = [ImagePart.from_path(p) for p in paths]
    conversation, pictures = backend._hf_messages(few_shot(parts))
    fed = backend._process([backend._template(conversation, True)], [pictures])
    alone = [backend.processor.image_processor(im, crop_to_patches=True, max_patches=6, return_tensors="pt")
             for im in pictures]  # fmt: skip
    # wide and tall: a 3 × 1 grid + thumbnail; a square smaller than 2 × 2 tiles: one tile, no thumbnail
    assert [int(a["num_patches"][0]) for a in alone] == [4, 1, 4]
    assert torch.equal(fed["pixel_values"], torch.cat([a["pixel_values"] for a in alone]))
    ids = fed["input_ids"][0].tolist()
    runs = _runs(ids, backend.processor.image_token_id)
    assert runs == [TOKENS_PER_TILE * int(a["num_patches"][0]) for a in alone]
    assert ids.count(backend.processor.start_image_token_id) == len(pictures)


def _runs(ids: list[int], token: int) -> list[int]:
    """Lengths of the consecutive runs of ``token`` in ``ids``."""
    runs, n = [], 0
    for t in ids + [None]:
        if t == token:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return runs


def test_phi4_images_reach_the_model_in_prompt_order(backends, images):
    backend = backends["phi4_multimodal"]
    conversation, pictures = backend._hf_messages(few_shot(images))
    pictures = [pictures[0], pictures[1].rotate(90), pictures[2].resize((80, 40))]  # three distinct images
    fed = backend._process([backend._template(conversation, True)], [pictures])
    alone = [backend.processor.image_processor(im, return_tensors="pt") for im in pictures]
    crops = fed["image_pixel_values"]
    assert crops.shape[0] == len(pictures)
    for row, a in zip(crops, alone):
        own = a["image_pixel_values"][0]
        assert torch.equal(row[: own.shape[0]], own)
    runs = _runs(fed["input_ids"][0].tolist(), backend.processor.image_token_id)
    assert runs == [int(a["num_img_tokens"][0]) for a in alone]


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_decodes_only_new_tokens_as_the_model_generates_them(family, backends, images):
    backend = backends[family]
    messages = few_shot(images)
    got = backend.generate([GenerateRequest(messages, max_new_tokens=6)])[0]
    conversation, pictures = backend._hf_messages(messages)
    own = _own_inputs(backend, conversation, pictures)
    with torch.inference_mode():
        out = backend.model.generate(**own, max_new_tokens=6, do_sample=False)
    new = out[0, own["input_ids"].shape[1] :].tolist()
    eos = backend.model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    new = new[: next((i for i, t in enumerate(new) if t in eos), len(new))]
    assert got.error is None and got.prompt_tokens == own["input_ids"].shape[1]
    assert got.text == backend.tokenizer.decode(new, skip_special_tokens=True)
    assert not any(t in got.text for t in backend.tokenizer.all_special_tokens if len(t) > 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_ppl_equals_one_forward_per_option_at_any_batch_size(family, backends, checkpoints, images):
    backend = backends[family]
    requests = [
        ScoreRequest(few_shot(images), ("red", "blue", "dark green", "a small yellow square")),
        ScoreRequest(few_shot(images)[:2] + few_shot(images)[-1:], ("A", "B. blue", "C")),
    ]
    scored = backend.score(requests)
    one = HFBackend(str(checkpoints[family]), device="cpu", dtype="float32", batch_size=1)
    for request, got, alone in zip(requests, scored, one.score(requests)):
        naive = backend.score_naive(request)
        assert got.error is None
        assert max(abs(a - b) for a, b in zip(got.loglikelihoods, naive.loglikelihoods)) <= 1e-4
        assert max(abs(a - b) for a, b in zip(alone.loglikelihoods, got.loglikelihoods)) <= 1e-4
        assert got.token_counts == naive.token_counts
    assert backend.option_check.path in ("packed", "copied")


# ---- family specifics -------------------------------------------------------------------------


def test_internvl_native_checkpoint_takes_the_default_path_with_the_papers_settings(backends):
    backend = backends["internvl"]
    adapter = backend.adapter
    assert adapter.family == "internvl_hf" and type(adapter) is Adapter  # template + processor, no overrides
    assert adapter.dtypes[0] == "float16" and adapter.quantization == ("8bit",)  # FewMMBench A.2
    # The paper's tile cap replaces the checkpoint's, and the run records it.
    assert backend.processor_overrides["max_patches"] == {"checkpoint": 12, "mmctx": 6}
    assert backend.tokenizer.bos_token is None  # as Qwen2.5-VL's tokenizer: no BOS token at all
    assert backend.model.config.get_text_config().model_type == "qwen2"


def test_phi4_native_loads_as_a_causal_lm_with_the_tokenizers_template(backends, checkpoints):
    from transformers import AutoProcessor

    backend = backends["phi4_multimodal"]
    assert backend.adapter.family == "phi4_multimodal"
    assert type(backend.model).__name__ == "Phi4MultimodalForCausalLM"
    assert backend.adapter.dtypes[0] == "float32"  # FewMMBench A.2: half precision was not compatible
    # The release's processor loads without a template; the tokenizer has it; mmctx uses the tokenizer's.
    released = AutoProcessor.from_pretrained(str(checkpoints["phi4_multimodal"]))
    assert released.chat_template is None and released.tokenizer.chat_template
    assert backend.processor.chat_template == released.tokenizer.chat_template
    assert backend.adapter.image_placeholder == backend.processor.image_token == "<|image|>"


def test_phi4_checkpoint_with_a_vision_lora_needs_peft(checkpoints, tmp_path):
    try:
        import peft  # noqa: F401

        pytest.skip("peft is installed: the vision LoRA would be loaded")
    except ImportError:
        pass
    copy = shutil.copytree(checkpoints["phi4_multimodal"], tmp_path / "phi4-with-lora")
    (copy / "vision-lora").mkdir()
    (copy / "vision-lora" / "adapter_config.json").write_text("{}")
    with pytest.raises(ModelError, match=r"vision LoRA in vision-lora/.*needs peft"):
        HFBackend(str(copy), device="cpu", dtype="float32")


def test_internvl_with_a_bos_prepending_tokenizer_gets_one_bos_and_exact_ppl(tmp_path, images):
    """The InternLM2-based -hf conversions: a template without BOS and a tokenizer that prepends it."""
    from mmctx.models.tiny import TinySize
    from mmctx.models.tiny.internvl import build_llama

    torch.manual_seed(0)
    build_llama(tmp_path / "internvl-llama", TinySize())
    backend = HFBackend(str(tmp_path / "internvl-llama"), device="cpu", dtype="float32")
    assert backend.adapter.family == "internvl_hf"
    conversation, pictures = backend._hf_messages(few_shot(images))
    fed = backend._process([backend._template(conversation, True)], [pictures])["input_ids"][0].tolist()
    own = _own_inputs(backend, conversation, pictures)["input_ids"][0].tolist()
    bos = backend.tokenizer.bos_token_id
    assert fed == own and fed[0] == bos and fed[1] != bos  # one BOS, the tokenizer's
    request = ScoreRequest(few_shot(images), ("red", "dark green", "a small yellow square"))
    got, naive = backend.score([request])[0], backend.score_naive(request)
    assert max(abs(a - b) for a, b in zip(got.loglikelihoods, naive.loglikelihoods)) <= 1e-4
