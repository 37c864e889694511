"""Pieces the tiny family builders share."""

from __future__ import annotations

from pathlib import Path


def llama_text_config(vocab: int, hidden: int, layers: int, **extra):
    """A tiny Llama language model: the text tower of Idefics3 and LLaVA-style checkpoints."""
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
        **extra,
    )


# Qwen's tokenizers (Qwen1.5, Qwen2, Qwen2.5-VL): no BOS token at all, "<|im_end|>" ends a turn,
# "<|endoftext|>" pads; `build_tokenizer(special, **QWEN_TOKENS)`.
QWEN_TOKENS = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}


def qwen2_text_config(tokenizer, hidden: int, layers: int) -> dict:
    """A tiny Qwen2 language model: the text tower of LLaVA-Interleave and LLaVA-OneVision checkpoints."""
    ids = tokenizer.convert_tokens_to_ids
    return {
        "model_type": "qwen2", "vocab_size": len(tokenizer), "hidden_size": hidden,
        "intermediate_size": hidden * 2, "num_hidden_layers": layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "eos_token_id": ids("<|im_end|>"), "pad_token_id": tokenizer.pad_token_id,
    }  # fmt: skip


def siglip_vision_config(image_size: int, patch_size: int) -> dict:
    """A tiny SigLIP vision tower without its pooling head (the LLaVA families use patch features)."""
    return {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "image_size": image_size, "patch_size": patch_size,
            "vision_use_head": False}  # fmt: skip


def save_checkpoint(
    out: Path, model, tokenizer, eos_token: str, processor=None, parts: tuple = (), chat_template: str | None = None
) -> None:
    """Save ``model`` with generation ids set, then its processor, or its parts as the hub lays them out.

    ``parts`` (an image processor, …) plus the tokenizer and ``chat_template`` stand in for a
    processor that cannot be built in this environment, or that a release ships in pieces.
    """
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids(eos_token)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    if processor is not None:
        processor.save_pretrained(out)
        return
    for part in parts:
        part.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if chat_template is not None:
        (Path(out) / "chat_template.jinja").write_text(chat_template)
