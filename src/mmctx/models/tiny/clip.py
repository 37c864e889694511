"""A tiny CLIP for curation (joint image + text embeddings)."""

from __future__ import annotations

from pathlib import Path

from mmctx.models.tiny.tokenizer import _BOS, _EOS, _PAD, _UNK, _train_bpe

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
