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


def save_checkpoint(out: Path, model, tokenizer, eos_token: str, processor=None, parts: tuple = (),
                    chat_template: str | None = None) -> None:
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
