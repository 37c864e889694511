"""Family adapters: which adapter serves each of FewMMBench's 26 models, and what each one does.

Three kinds of test, named by what they run against:
* registry tests: pure id / model-type matching and the per-paper fields;
* real-checkpoint and real-processor tests: the default-path families (Idefics, LLaVA) through
  `HFBackend` on the tiny checkpoints built offline, and the transformers image processors of
  Qwen2-VL, Idefics2 and InternVL (-hf) with the adapters' ``processor_kwargs``;
* stub-processor tests: the remote-code families (InternVL chat, Phi, xGen-MM), whose processors
  live in their hub repos and cannot be downloaded here, against `tests.fixtures.stub_processors`.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from fixtures.stub_processors import (
    StubImageProcessor,
    StubInternVLModel,
    StubPhi3VProcessor,
    StubPhi4MMProcessor,
    StubTokenizer,
    StubXGenMMModel,
)
from PIL import Image

from mmctx.models.adapters import DEFAULT, adapter_for, all_adapters
from mmctx.models.adapters.internvl import SYSTEM as INTERNVL_SYSTEM
from mmctx.models.adapters.internvl import tiles
from mmctx.models.adapters.xgen_mm import SYSTEM as XGEN_SYSTEM
from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend, ModelError
from mmctx.prompts.messages import ImagePart, Message, TextPart

# Table 3 of the paper, abbreviation → hub id → family. "-I" of InternVL3 is the SFT
# "-Instruct" release; the plain name is the final (MPO) one. xGen-MM "-I" is the
# instruct-interleave r-v1.5 checkpoint.
PAPER_MODELS = {
    "QW2.5VL-3B-I": ("Qwen/Qwen2.5-VL-3B-Instruct", "qwen_vl"),
    "QW2.5VL-7B-I": ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen_vl"),
    "QW2VL-2B": ("Qwen/Qwen2-VL-2B", "qwen_vl"),
    "QW2VL-2B-I": ("Qwen/Qwen2-VL-2B-Instruct", "qwen_vl"),
    "QW2VL-7B": ("Qwen/Qwen2-VL-7B", "qwen_vl"),
    "QW2VL-7B-I": ("Qwen/Qwen2-VL-7B-Instruct", "qwen_vl"),
    "IVL3-1B": ("OpenGVLab/InternVL3-1B", "internvl"),
    "IVL3-1B-I": ("OpenGVLab/InternVL3-1B-Instruct", "internvl"),
    "IVL3-2B": ("OpenGVLab/InternVL3-2B", "internvl"),
    "IVL3-2B-I": ("OpenGVLab/InternVL3-2B-Instruct", "internvl"),
    "IVL3-8B": ("OpenGVLab/InternVL3-8B", "internvl"),
    "IVL3-8B-I": ("OpenGVLab/InternVL3-8B-Instruct", "internvl"),
    "IVL3-9B": ("OpenGVLab/InternVL3-9B", "internvl"),
    "IVL3-9B-I": ("OpenGVLab/InternVL3-9B-Instruct", "internvl"),
    "IVL2.5-4B-M": ("OpenGVLab/InternVL2_5-4B-MPO", "internvl"),
    "IVL2.5-8B-M": ("OpenGVLab/InternVL2_5-8B-MPO", "internvl"),
    "IVL2.5-4B": ("OpenGVLab/InternVL2_5-4B", "internvl"),
    "IVL2.5-8B": ("OpenGVLab/InternVL2_5-8B", "internvl"),
    "ID3-8B": ("HuggingFaceM4/Idefics3-8B-Llama3", "idefics"),
    "ID2-8B": ("HuggingFaceM4/idefics2-8b", "idefics"),
    "P4M-I": ("microsoft/Phi-4-multimodal-instruct", "phi"),
    "P3.5V-I": ("microsoft/Phi-3.5-vision-instruct", "phi"),
    "LLV-I-QW-7B": ("llava-hf/llava-interleave-qwen-7b-hf", "llava"),
    "LLV-I-QW-0.5B": ("llava-hf/llava-interleave-qwen-0.5b-hf", "llava"),
    "XG-MM-P3-I": ("Salesforce/xgen-mm-phi3-mini-instruct-interleave-r-v1.5", "xgen_mm"),
    "XG-MM-P3-B": ("Salesforce/xgen-mm-phi3-mini-base-r-v1.5", "xgen_mm_base"),
}
REMOTE_FAMILIES = ("internvl", "phi", "xgen_mm", "xgen_mm_base")


# ---- registry ----------------------------------------------------------------------------


def test_registry_maps_the_papers_26_models_to_their_family():
    assert len(PAPER_MODELS) == 26
    for abbreviation, (model_id, family) in PAPER_MODELS.items():
        # Without --trust-remote-code the config of a remote-code repo cannot load: the id decides.
        assert adapter_for(model_id).family == family, abbreviation
        assert adapter_for(f"/models/{model_id.split('/')[1]}").family == family, abbreviation


def test_model_type_selects_the_family_when_the_id_says_nothing():
    expected = {
        "qwen2_vl": "qwen_vl", "qwen2_5_vl": "qwen_vl", "internvl": "internvl_hf", "internvl_chat": "internvl",
        "idefics2": "idefics", "idefics3": "idefics", "smolvlm": "idefics", "llava": "llava",
        "llava_onevision": "llava", "llava_next": "llava", "phi3_v": "phi", "phi4mm": "phi", "xgenmm": "xgen_mm",
    }  # fmt: skip
    for model_type, family in expected.items():
        assert adapter_for("/checkpoints/run-17", model_type).family == family, model_type


def test_native_checkpoints_of_remote_code_families_are_not_claimed_by_their_remote_adapters():
    assert adapter_for("OpenGVLab/InternVL3-8B-hf").family == "internvl_hf"
    assert adapter_for("OpenGVLab/InternVL3-8B-hf", "internvl").family == "internvl_hf"
    assert adapter_for("OpenGVLab/InternVL3-8B", "internvl").family == "internvl_hf"  # a converted copy
    assert adapter_for("OpenGVLab/InternVL3-8B", "internvl_chat").family == "internvl"
    for native in ("OpenGVLab/InternVL3_5-8B-HF", "OpenGVLab/InternVL2_5-8B-MPO-hf", "OpenGVLab/InternVL3-1B-hf"):
        assert adapter_for(native).family == "internvl_hf", native  # the id alone, before the config loads
    # The native transformers Phi-4-MM (a converted revision) has its own adapter; an id alone is remote code.
    assert adapter_for("microsoft/Phi-4-multimodal-instruct", "phi4_multimodal").family == "phi4_multimodal"
    assert adapter_for("/checkpoints/run-17", "phi4_multimodal").family == "phi4_multimodal"
    assert adapter_for("microsoft/Phi-4-multimodal-instruct").family == "phi"
    assert adapter_for("microsoft/Phi-4-multimodal-instruct", "phi4mm").family == "phi"
    # The two xGen-MM formats share a model type; the id tells them apart.
    assert adapter_for("Salesforce/xgen-mm-phi3-mini-base-r-v1.5", "xgenmm").family == "xgen_mm_base"


@pytest.mark.parametrize(
    "model_id",
    [
        "google/paligemma-3b-mix-224",
        "mistralai/Pixtral-12B-2409",
        "HuggingFaceM4/idefics-9b-instruct",  # Idefics v1: no chat template, not this adapter
        "microsoft/Phi-3-mini-4k-instruct",  # text-only Phi
        "Salesforce/blip2-opt-2.7b",
        "someone/my-finetune",
    ],
)
def test_unknown_ids_get_the_default_adapter(model_id):
    assert adapter_for(model_id) is DEFAULT


def test_family_names_are_unique_and_fields_follow_the_paper():
    adapters = {a.family: a for a in all_adapters()}
    assert len(adapters) == len(all_adapters())
    # FewMMBench A.2: fp16 for Qwen, InternVL, Idefics, LLaVA (+8-bit InternVL, 4-bit Idefics2 and
    # LLaVA); Phi and xGen-MM in fp32.
    expected = {
        "qwen_vl": ("float16", ()), "internvl": ("float16", ("8bit",)), "internvl_hf": ("float16", ("8bit",)),
        "idefics": ("float16", ("4bit",)), "llava": ("float16", ("4bit",)), "phi": ("float32", ()),
        "xgen_mm": ("float32", ()), "xgen_mm_base": ("float32", ()), "phi4_multimodal": ("float32", ()),
    }  # fmt: skip
    for family, (dtype, quantization) in expected.items():
        a = adapters[family]
        assert a.dtypes[0] == dtype and a.quantization == quantization, family
        assert a.needs_remote_code == (family in REMOTE_FAMILIES), family
        assert a.notes, family
    assert adapters["phi"].auto_class == adapters["phi4_multimodal"].auto_class == "AutoModelForCausalLM"
    for family in REMOTE_FAMILIES:  # `mmctx models` says how far these are tested
        assert "stub processors only" in adapters[family].notes, family
    assert adapters["internvl"].auto_class == "AutoModel"
    assert adapters["xgen_mm"].auto_class == "AutoModelForVision2Seq"


# ---- a 2-shot interleaved conversation ----------------------------------------------------------


def colour_image(colour, size=(80, 60)) -> Image.Image:
    return Image.new("RGB", size, colour)


def two_shot(question: str = "What colour is the square?") -> list[dict]:
    """HF chat messages: system, two demos (user with image + assistant answer), then the query."""

    def user(text):
        return {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}

    def assistant(text):
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}

    return [
        {"role": "system", "content": [{"type": "text", "text": "Answer briefly."}]},
        user(f"Demo one. {question}"),
        assistant("red"),
        user(f"Demo two. {question}"),
        assistant("blue"),
        user(f"The query. {question}"),
    ]


def in_order(text: str, *pieces: str) -> bool:
    position = 0
    for piece in pieces:
        position = text.find(piece, position)
        if position < 0:
            return False
        position += len(piece)
    return True


# ---- Phi (stub processors) ----------------------------------------------------------------------


def test_phi4_render_numbers_images_globally_with_turns_in_order():
    """Stub-processor test (Phi-4-MM's processor is remote code): the raw prompt string."""
    phi = adapter_for("microsoft/Phi-4-multimodal-instruct")
    text = phi.render(StubPhi4MMProcessor(), two_shot(), generation_prompt=True)
    assert text == (
        "<|system|>Answer briefly.<|end|>"
        "<|user|><|image_1|>Demo one. What colour is the square?<|end|><|assistant|>red<|end|>"
        "<|user|><|image_2|>Demo two. What colour is the square?<|end|><|assistant|>blue<|end|>"
        "<|user|><|image_3|>The query. What colour is the square?<|end|><|assistant|>"
    )
    answered = phi.render(StubPhi4MMProcessor(), two_shot() + [{"role": "assistant", "content": [
        {"type": "text", "text": "green"}]}], generation_prompt=False)  # fmt: skip
    assert answered == text + "green<|end|>"


def test_phi35_render_uses_its_chat_templates_newlines():
    """Stub-processor test (Phi-3.5-vision's processor is remote code): newline after every tag."""
    text = adapter_for("microsoft/Phi-3.5-vision-instruct").render(StubPhi3VProcessor(), two_shot(), True)
    assert text.startswith("<|system|>\nAnswer briefly.<|end|>\n<|user|>\n<|image_1|>\nDemo one.")
    assert in_order(text, "<|image_1|>\nDemo one", "<|assistant|>\nred<|end|>\n", "<|image_2|>\nDemo two",
                    "<|assistant|>\nblue<|end|>\n", "<|image_3|>\nThe query")  # fmt: skip
    assert text.endswith("The query. What colour is the square?<|end|>\n<|assistant|>\n")
    # Several images in one turn keep counting.
    turn = [{"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "Same?"}]}]
    assert "<|image_1|>\n<|image_2|>\nSame?" in adapter_for("microsoft/Phi-3.5-vision-instruct").render(
        StubPhi3VProcessor(), turn, True
    )


def test_phi_inputs_pass_images_flat_and_in_order_and_add_input_mode_for_phi4():
    """Stub-processor test: the stubs check tag numbering against the image list, as the real ones do."""
    phi = adapter_for("microsoft/Phi-4-multimodal-instruct")
    images = [colour_image(c) for c in ("red", "blue", "green")]
    p4 = StubPhi4MMProcessor()
    text = phi.render(p4, two_shot(), True)
    out = phi.inputs(p4, [text, text], [images, images[::-1]])
    assert p4.calls[-1][1] == images + images[::-1]
    assert out["input_mode"].tolist() == [1] and out["input_ids"].shape[0] == 2
    assert phi.inputs(StubPhi4MMProcessor(), ["<|user|>hi<|end|><|assistant|>"], [[]])["input_mode"].tolist() == [0]

    p3 = StubPhi3VProcessor()
    out = phi.inputs(p3, [phi.render(p3, two_shot(), True)], [images])
    assert p3.calls[-1][1] == images and out["pixel_values"].shape[0] == 3 and "input_mode" not in out
    with pytest.raises(ModelError, match="batch size 1"):
        phi.inputs(p3, [text, text], [images, images])


# ---- InternVL remote code (stub tokenizer) ------------------------------------------------------


def test_internvl_render_writes_the_internvl2_5_conversation_template():
    """Stub-processor test (the remote repos have only a tokenizer): ChatML, <image> per image."""
    internvl = adapter_for("OpenGVLab/InternVL3-8B")
    text = internvl.render(StubTokenizer(), two_shot(), generation_prompt=True)
    assert text == (
        "<|im_start|>system\nAnswer briefly.<|im_end|>\n"
        "<|im_start|>user\n<image>\nDemo one. What colour is the square?<|im_end|>\n"
        "<|im_start|>assistant\nred<|im_end|>\n"
        "<|im_start|>user\n<image>\nDemo two. What colour is the square?<|im_end|>\n"
        "<|im_start|>assistant\nblue<|im_end|>\n"
        "<|im_start|>user\n<image>\nThe query. What colour is the square?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # Without a system turn, InternVL's own default system message (as model.chat uses).
    assert internvl.render(StubTokenizer(), two_shot()[1:], True).startswith(
        f"<|im_start|>system\n{INTERNVL_SYSTEM}<|im_end|>\n<|im_start|>user\n<image>\nDemo one."
    )


def test_internvl_inputs_expand_each_image_by_its_tiles_in_order():
    """Stub-processor test: <img><IMG_CONTEXT>×(256·tiles)</img> per image, tiles stacked in image order."""
    internvl = adapter_for("OpenGVLab/InternVL2_5-8B-MPO")
    tok = StubTokenizer(("<img>", "</img>", "<IMG_CONTEXT>", "<|im_start|>", "<|im_end|>"))
    wide, square, tall = (
        colour_image("red", (1280, 960)),
        colour_image("blue", (300, 300)),
        colour_image("green", (400, 900)),
    )
    n_tiles = [len(tiles(im)) for im in (wide, square, tall)]
    assert n_tiles == [7, 1, 3]  # 3×2 grid + thumbnail; one tile; 1×2 grid + thumbnail
    text = internvl.render(tok, two_shot(), True)
    out = internvl.inputs(tok, [text], [[wide, square, tall]])
    expanded = tok.calls[-1][0]
    blocks = re.findall(r"<img>((?:<IMG_CONTEXT>)*)</img>", expanded)
    assert [b.count("<IMG_CONTEXT>") for b in blocks] == [256 * n for n in n_tiles]
    assert "<image>" not in expanded and in_order(expanded, "</img>\nDemo one", "</img>\nDemo two", "</img>\nThe query")
    assert out["pixel_values"].shape == (sum(n_tiles), 3, 448, 448)
    assert out["image_flags"].shape == (sum(n_tiles), 1)
    # Tiles keep image order: the first 7 are red, the 8th blue (ImageNet-normalised).
    assert out["pixel_values"][6, 0].mean() > 2 and out["pixel_values"][7, 2].mean() > 2
    context_id = tok.convert_tokens_to_ids("<IMG_CONTEXT>")
    assert int((out["input_ids"] == context_id).sum()) == 256 * sum(n_tiles)
    with pytest.raises(ModelError, match="placeholders"):
        internvl.inputs(tok, [text], [[wide]])
    model = StubInternVLModel()
    assert internvl.prepare(model, tok) is tok and model.img_context_token_id == context_id


def test_internvl_tiling_matches_transformers_internvl_image_processor():
    """Real-processor test: tile counts equal the native InternVL (GotOcr2) processor's with the -hf kwargs."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    kwargs = adapter_for("OpenGVLab/InternVL3-1B-hf").processor_kwargs
    native = GotOcr2ImageProcessorPil(size={"height": 448, "width": 448}, **kwargs)
    for size in [(1280, 960), (300, 300), (400, 900), (2000, 400), (640, 480), (1000, 1000)]:
        image = colour_image("red", size)
        assert len(tiles(image, 448, kwargs["max_patches"])) == native([image])["num_patches"][0], size


# ---- xGen-MM (stub processors) ------------------------------------------------------------------


def test_xgen_mm_instruct_render_is_phi3_chat_with_image_placeholders():
    """Stub-processor test (xGen-MM's processors are remote code)."""
    xgen = adapter_for("Salesforce/xgen-mm-phi3-mini-instruct-interleave-r-v1.5")
    text = xgen.render(None, two_shot(), True)
    assert text == (
        "<|system|>\nAnswer briefly.<|end|>\n"
        "<|user|>\n<image> Demo one. What colour is the square?<|end|>\n<|assistant|>\nred<|end|>\n"
        "<|user|>\n<image> Demo two. What colour is the square?<|end|>\n<|assistant|>\nblue<|end|>\n"
        "<|user|>\n<image> The query. What colour is the square?<|end|>\n<|assistant|>\n"
    )
    assert xgen.render(None, two_shot()[1:], True).startswith(f"<|system|>\n{XGEN_SYSTEM}<|end|>\n<|user|>\n<image> ")


def test_xgen_mm_base_render_is_interleaved_chunks():
    """Stub-processor test: <image>text answer<|endofchunk|> per demo, the query left open."""
    base = adapter_for("Salesforce/xgen-mm-phi3-mini-base-r-v1.5")
    text = base.render(None, two_shot(), True)
    assert text == (
        "Answer briefly.\n"
        "<image>Demo one. What colour is the square? red<|endofchunk|>"
        "<image>Demo two. What colour is the square? blue<|endofchunk|>"
        "<image>The query. What colour is the square?"
    )
    answered = base.render(
        None, two_shot() + [{"role": "assistant", "content": [{"type": "text", "text": "green"}]}], False
    )
    assert answered == text + " green<|endofchunk|>"


def test_xgen_mm_prepare_and_inputs_follow_the_model_card():
    """Stub-processor test: update_special_tokens, one anyres call per image, sizes per prompt."""
    xgen = adapter_for("Salesforce/xgen-mm-phi3-mini-instruct-interleave-r-v1.5")
    model, tokenizer, image_processor = StubXGenMMModel(), StubTokenizer(("<|user|>", "<|end|>")), StubImageProcessor()

    class Loaded:  # what the backend holds: here a processor that already has both parts
        pass

    loaded = Loaded()
    loaded.tokenizer, loaded.image_processor = tokenizer, image_processor
    processor = xgen.prepare(model, loaded)
    assert processor.tokenizer is tokenizer and processor.image_processor is image_processor
    assert "<image>" in tokenizer.special and set(model.token_ids) == {"<image>", "<|endofchunk|>"}

    images = [colour_image("red", (80, 60)), colour_image("blue", (50, 70))]
    texts = [xgen.render(processor, two_shot()[:4], True), xgen.render(processor, two_shot()[:2], True)]
    out = xgen.inputs(processor, texts, [images, images[:1]])
    assert out["input_ids"].shape[0] == 2
    assert [len(p) for p in out["pixel_values"]] == [2, 1]
    assert out["image_size"] == [[(80, 60), (50, 70)], [(80, 60)]]
    assert [c["images"] for c in image_processor.calls] == [[images[0]], [images[1]], [images[0]]]
    assert all(c["image_aspect_ratio"] == "anyres" for c in image_processor.calls)
    assert int((out["input_ids"][0] == tokenizer.convert_tokens_to_ids("<image>")).sum()) == 2


# ---- processor_kwargs against transformers' own image processors -------------------------------


def test_qwen_pixel_caps_override_the_hub_config_and_fit_nine_images(tmp_path):
    """Real-processor test: a hub-style preprocessor_config with its own min/max_pixels, loaded with the kwargs."""
    from transformers import AutoImageProcessor

    (tmp_path / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136, "max_pixels": 12845056,
        "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    }))  # fmt: skip
    kwargs = adapter_for("Qwen/Qwen2.5-VL-7B-Instruct").processor_kwargs
    processor = AutoImageProcessor.from_pretrained(tmp_path, **kwargs)
    assert (processor.size.shortest_edge, processor.size.longest_edge) == (kwargs["min_pixels"], kwargs["max_pixels"])
    grid = processor([colour_image("red", (1920, 1440))] * 9 + [colour_image("red", (40, 40))], return_tensors="pt")
    tokens = (grid["image_grid_thw"].prod(-1) // 4).tolist()  # 2×2 patches merged into one token
    assert max(tokens) <= 512 and sum(tokens[:9]) <= 9 * 512 and tokens[9] >= 64


def test_idefics2_processor_kwargs_turn_splitting_off_and_the_paper_settings_cap_the_edge(tmp_path):
    """Real-processor test: a checkpoint config that splits images and allows 980 px. Splitting is
    off either way (a many-image prompt must fit); the 448-px edge is the paper's setting, applied
    only when asked, and otherwise the checkpoint's own 980 px holds.

    (idefics2-8b's released processor config has ``do_image_splitting: false``; fine-tunes and the
    base checkpoints differ, and the adapter's value holds whatever the checkpoint says.)
    """
    from transformers import AutoImageProcessor

    (tmp_path / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Idefics2ImageProcessor", "do_image_splitting": True,
        "size": {"longest_edge": 980, "shortest_edge": 378},
    }))  # fmt: skip
    adapter = adapter_for("HuggingFaceM4/idefics2-8b")
    images = [[colour_image("red", (1600, 1200)), colour_image("blue", (200, 900))]]
    own = AutoImageProcessor.from_pretrained(tmp_path, **adapter.processor_kwargs)(images, return_tensors="pt")
    paper_kwargs = adapter.with_paper_settings().processor_kwargs
    paper = AutoImageProcessor.from_pretrained(tmp_path, **paper_kwargs)(images, return_tensors="pt")
    assert own["pixel_values"].shape[:2] == paper["pixel_values"].shape[:2] == (1, 2)  # one view an image
    assert max(own["pixel_values"].shape[-2:]) == 980
    assert max(paper["pixel_values"].shape[-2:]) <= 448


# ---- default-path families on the tiny real checkpoints ------------------------------------------


@pytest.fixture(scope="module")
def image_parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapter-imgs")
    parts = []
    for i, colour in enumerate([(255, 0, 0), (0, 0, 255), (0, 160, 0)]):
        path = root / f"{i}.png"
        colour_image(colour, (80, 64)).save(path)
        parts.append(ImagePart.from_path(path))
    return parts


def few_shot(images) -> tuple[Message, ...]:
    q = TextPart("What colour is the square?")
    return (
        Message("system", (TextPart("Answer briefly."),)),
        Message("user", (images[0], q)),
        Message("assistant", (TextPart("red"),)),
        Message("user", (images[1], q)),
        Message("assistant", (TextPart("blue"),)),
        Message("user", (images[2], q)),
    )


@pytest.mark.parametrize("tiny, family", [("idefics3", "idefics"), ("llava", "llava"), ("qwen2_vl", "qwen_vl")])
def test_default_path_families_run_on_tiny_checkpoints(tiny_models, image_parts, tiny, family):
    """Real-checkpoint test: the adapter's processor_kwargs are accepted, then generate and score run."""
    backend = HFBackend(str(tiny_models[tiny]), adapter=family, device="cpu", dtype="float32")
    assert backend.adapter.family == family and backend.info.settings["adapter"] == family
    assert adapter_for(str(tiny_models[tiny]), backend.model.config.model_type).family == family  # picked unasked too
    if family == "idefics":
        image_processor = backend.processor.image_processor
        # Splitting off; the checkpoint's own edge, not the paper's 448 px (image_settings="paper").
        assert image_processor.do_image_splitting is False and image_processor.size.longest_edge != 448
        assert backend.info.settings["image_settings"] == "checkpoint"
    if family == "qwen_vl":  # loads whether or not torchvision (for the unused video processor) is installed
        caps = adapter_for("Qwen/Qwen2-VL-7B-Instruct").processor_kwargs
        assert backend.processor.image_processor.size.longest_edge == caps["max_pixels"]
    generation = backend.generate([GenerateRequest(few_shot(image_parts), max_new_tokens=3)])[0]
    assert generation.error is None and generation.prompt_tokens > 0 and generation.output_tokens >= 1
    scores = backend.score([ScoreRequest(few_shot(image_parts), ("green", "red"))])[0]
    assert scores.error is None and len(scores.loglikelihoods) == 2
    assert all(torch.isfinite(torch.tensor(scores.loglikelihoods))) and all(n > 0 for n in scores.token_counts)


@pytest.mark.parametrize("family", REMOTE_FAMILIES)
def test_remote_code_families_are_refused_without_trust_remote_code(tiny_models, family):
    with pytest.raises(ModelError, match="--trust-remote-code"):
        HFBackend(str(tiny_models["llava"]), adapter=family, device="cpu", dtype="float32")
