"""Tiny, randomly initialised image-text-to-text checkpoints built offline.

No weights can be downloaded on the machines mmctx is developed on, so tests and the built-in
demo model are real transformers checkpoints built here: a BPE tokenizer trained with
`tokenizers`, a tiny config of a standard architecture, `save_pretrained`, and then loaded
back through the very same `from_pretrained` path as any hub model. Their weights are random:
a model built here answers at chance level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Family = Literal["idefics3", "llava", "qwen2_vl"]
FAMILIES: tuple[str, ...] = ("idefics3", "llava", "qwen2_vl")

# Chat templates in the style of each family's released checkpoints.
IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}{{ '<image>\n' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen2-VL's released template: a default system turn, each image as vision_start/pad/end.
QWEN2_VL_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_SPECIAL = {
    "idefics3": ["<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>", "<image>", "<global-img>"]
    + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)],
    "llava": ["<|im_start|>", "<|im_end|>", "<image>"],
    "qwen2_vl": ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"],
}
_UNK, _PAD, _BOS, _EOS = "<unk>", "<pad>", "<s>", "</s>"


def _corpus() -> list[str]:
    """Text the tokenizer is trained on: the prompt vocabulary of mmctx presets and shapes-world."""
    words = (
        "There is a are the an one two three four five six seven eight nine ten zero no not "
        "red green blue yellow purple orange black white grey gray pink brown "
        "circle circles square squares triangle triangles star stars diamond diamonds shape shapes object objects "
        "small large big left right above below top bottom edge closest closer farther next moved disappeared "
        "points at it is Which What Where How many colour color image sentence caption captions option options "
        "Answer answer with letter from given choices directly Yes No True False Does this accurately describe "
        "Think step by step then give final reasoning because so therefore frame frames first second third "
        "User Assistant user assistant system of to in on and or relative question choose that matches"
    ).split()
    letters = [f"{c}." for c in "ABCDEFGH"] + list("ABCDEFGH") + [str(i) for i in range(10)]
    sentences = [" ".join(words[i : i + 12]) for i in range(0, len(words), 3)]
    return sentences + letters + [w.capitalize() for w in words] + ["(A) (B) (C) (D): ? , . ! \n"]


def _train_bpe(special: list[str], vocab_size: int, lowercase: bool = False):
    """A byte-level BPE trained on `_corpus()`; ``lowercase`` for CLIP-style text towers."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=_UNK))
    if lowercase:
        tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    return tok


def build_tokenizer(family: Family, vocab_size: int = 512):
    """A byte-level BPE tokenizer with the family's special tokens, wrapped for transformers."""
    from transformers import PreTrainedTokenizerFast

    tok = _train_bpe([_UNK, _PAD, _BOS, _EOS] + _SPECIAL[family], vocab_size)
    # Only the family's start-of-text token is prepended, as the released checkpoints do.
    extra = [t for t in _SPECIAL[family] if t not in ("<|im_start|>",)]
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=_UNK,
        pad_token=_PAD,
        bos_token=_BOS,
        eos_token=_EOS,
        additional_special_tokens=extra,
        model_max_length=4096,
    )


def _text_config(vocab: int, hidden: int, layers: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )


def build_tiny_vlm(
    out: Path,
    family: Family = "idefics3",
    seed: int = 0,
    image_size: int = 64,
    hidden: int = 64,
    layers: int = 2,
) -> Path:
    """Write a tiny random-weight checkpoint of ``family`` (model + processor + chat template) to ``out``.

    ``hidden`` and ``layers`` size the language model; benchmarks use a larger one so that
    model compute, not Python overhead, dominates what they time.
    """
    import torch

    if family not in FAMILIES:
        raise ValueError(f"unknown tiny family {family!r}; choose from {', '.join(FAMILIES)}")
    out = Path(out)
    torch.manual_seed(seed)
    tokenizer = build_tokenizer(family)
    if family == "idefics3":
        model, processor = _idefics3(tokenizer, image_size, _text_config(len(tokenizer), hidden, layers))
    elif family == "llava":
        model, processor = _llava(tokenizer, image_size, _text_config(len(tokenizer), hidden, layers))
    elif family == "qwen2_vl":
        model, processor = _qwen2_vl(tokenizer, hidden, layers)
    else:  # pragma: no cover - FAMILIES lists every branch above
        raise AssertionError(family)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids(
        "<end_of_utterance>" if family == "idefics3" else "<|im_end|>"
    )
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    if isinstance(processor, tuple):  # Qwen2-VL: the processor's parts, saved as the hub lays them out
        image_processor, chat_template = processor
        image_processor.save_pretrained(out)
        tokenizer.save_pretrained(out)
        (out / "chat_template.jinja").write_text(chat_template)
    else:
        processor.save_pretrained(out)
    return out


def _idefics3(tokenizer, image_size: int, text_config):
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    patch, scale = 16, 2
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": image_size,
        "patch_size": patch,
    }
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    config = Idefics3Config(
        vision_config=vision,
        text_config=text_config.to_dict(),
        scale_factor=scale,
        image_token_id=image_token,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Idefics3ForConditionalGeneration(config)
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": image_size},
        max_image_size={"longest_edge": image_size},
    )
    seq_len = (image_size // patch) ** 2 // (scale**2)
    processor = Idefics3Processor(image_processor, tokenizer, image_seq_len=seq_len, chat_template=IDEFICS3_TEMPLATE)
    return model, processor


def _llava(tokenizer, image_size: int, text_config):
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    patch = 16
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=patch,
        projection_dim=32,
    )
    config = LlavaConfig(
        vision_config=vision.to_dict(),
        text_config=text_config.to_dict(),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        pad_token_id=tokenizer.pad_token_id,
    )
    config.model_type = "llava"
    model = LlavaForConditionalGeneration(config)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # the CLS token the vision tower adds and "default" drops
        chat_template=CHATML_TEMPLATE,
    )
    return model, processor


def _qwen2_vl(tokenizer, hidden: int, layers: int):
    """Qwen2-VL with multimodal RoPE: image tokens take fewer positions than they are tokens.

    Returns the model and the processor's parts (image processor, chat template):
    transformers' `Qwen2VLProcessor` cannot be built without torchvision (its video
    processor needs it), so the parts are saved as the hub's checkpoints lay them out and
    `AutoProcessor` (or mmctx's Qwen adapter, where torchvision is missing) puts them together.
    """
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    head_dim = hidden // 4
    third = head_dim // 2 // 3
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        # Temporal, height and width sections of each head's rotary frequencies.
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                            "mrope_section": [head_dim // 2 - 2 * third, third, third]},
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.pad_token_id,
    }  # fmt: skip
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": hidden, "num_heads": 2, "mlp_ratio": 2,
              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}  # fmt: skip
    ids = tokenizer.convert_tokens_to_ids
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )
    model = Qwen2VLForConditionalGeneration(config)
    # 4 to 16 visual tokens an image (one per 28×28 px) unless a loader caps them otherwise.
    image_processor = Qwen2VLImageProcessorPil(min_pixels=4 * 28 * 28, max_pixels=16 * 28 * 28)
    return model, (image_processor, QWEN2_VL_TEMPLATE)


# --- A tiny CLIP for curation (joint image + text embeddings) -------------------------------

CLIP_MAX_TOKENS = 77  # the context length of every released CLIP text tower


def build_clip_tokenizer(vocab_size: int = 1024):
    """A lower-casing byte-level BPE tokenizer that wraps every text in ``<s> … </s>``, as CLIP's does.

    CLIP pools the text tower at the first end-of-text token, so the template must add one
    to every sequence (truncation keeps it: special tokens are added after truncating).
    """
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok = _train_bpe([_UNK, _PAD, _BOS, _EOS], vocab_size, lowercase=True)
    bos, eos = tok.token_to_id(_BOS), tok.token_to_id(_EOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{_BOS} $A {_EOS}", pair=f"{_BOS} $A {_EOS} $B {_EOS}", special_tokens=[(_BOS, bos), (_EOS, eos)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=_UNK,
        pad_token=_PAD,
        bos_token=_BOS,
        eos_token=_EOS,
        model_max_length=CLIP_MAX_TOKENS,
    )


def build_tiny_clip(out: Path, seed: int = 0, image_size: int = 64) -> Path:
    """Write a tiny random-weight `CLIPModel` + `CLIPProcessor` to ``out`` and return ``out``.

    Loadable with ``CLIPModel.from_pretrained(out)`` and ``AutoProcessor.from_pretrained(out)``.
    Random weights: its embeddings are deterministic but carry no meaning until trained.
    """
    import torch
    from transformers import CLIPConfig, CLIPModel, CLIPProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    out = Path(out)
    torch.manual_seed(seed)
    tokenizer = build_clip_tokenizer()
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "max_position_embeddings": CLIP_MAX_TOKENS,
        "projection_dim": 32,
        # The pooled token is the first end-of-text; the ids must match the tokenizer's.
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": image_size,
        "patch_size": 16,
        "projection_dim": 32,
    }
    model = CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=32))
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor = CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
