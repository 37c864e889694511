"""The tokenizers of the tiny checkpoints: byte-level BPE trained offline on mmctx's prompt vocabulary."""

from __future__ import annotations

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


def _train_bpe(special: list[str], vocab_size: int, lowercase: bool = False, corpus: list[str] | None = None):
    """A byte-level BPE trained on ``corpus`` (default `_corpus()`); ``lowercase`` for CLIP-style text towers."""
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
    tok.train_from_iterator(_corpus() if corpus is None else corpus, trainer=trainer)
    return tok


def build_tokenizer(
    special: list[str],
    *,
    prepend: tuple[str, ...] = ("<|im_start|>",),
    vocab_size: int = 512,
    bos_token: str = _BOS,
    eos_token: str = _EOS,
    pad_token: str = _PAD,
    add_bos: bool = False,
    named_tokens: dict[str, str] | None = None,
    corpus: list[str] | None = None,
):
    """A byte-level BPE tokenizer with a family's special tokens, wrapped for transformers.

    ``special`` are the family's own tokens; those in ``prepend`` are trained as special but not
    listed as additional special tokens (a start-of-turn token the template writes). ``add_bos``
    makes the tokenizer prepend its BOS token to every encoding, as Llama/Gemma/Mistral
    tokenizers do: a family whose released tokenizer does so must mirror it, or a double BOS
    (template + tokenizer) goes unseen. ``named_tokens`` become tokenizer attributes a family's
    processor reads (Gemma 3's ``boi_token``, ``image_token``, …). ``corpus`` replaces the default
    training text (the reference model trains its tokenizer on its own data).
    """
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    base = [t for t in (_UNK, pad_token, bos_token, eos_token) if t]
    tok = _train_bpe(list(dict.fromkeys(base + special)), vocab_size, corpus=corpus)
    if add_bos:
        bos = tok.token_to_id(bos_token)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos_token} $A", pair=f"{bos_token} $A {bos_token} $B", special_tokens=[(bos_token, bos)]
        )
    extra = [t for t in special if t not in prepend and t not in base]
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=_UNK,
        pad_token=pad_token,
        bos_token=bos_token,
        eos_token=eos_token,
        additional_special_tokens=extra,
        model_max_length=4096,
        **({"extra_special_tokens": named_tokens} if named_tokens else {}),
    )
