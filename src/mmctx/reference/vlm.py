"""A tiny interleaved VLM (Idefics3) trained on shapes-world conversations, offline and reproducibly.

`build_tiny_vlm` gives a random-weight checkpoint that answers at chance; this trains one of
the same family so the embedded demo measures something real. The model is trained on
conversations rendered *exactly* the way evaluation renders them: mmctx's own prompt builder
(preset ``fewmmbench``) turns a query and its demonstrations into typed messages, the HF
backend's adapter renders those through the processor's chat template, and the gold reply is
appended in the form the preset's demos answer (a letter, the option's text, or a rationale
ending in ``Answer: <letter>``). The loss covers only assistant replies (every demo's and the
query's, each up to its ``<end_of_utterance>``), so the model learns to answer the way the
demonstrations answer, and in-context turns carry signal.

Why a tokenizer of its own: the tiny tokenizer of `mmctx.models.tiny` is trained on a short
word list and splits most prompt words into 2–3 pieces. Trained here on the very texts the
presets and shapes-world produce, one word is about one token, so sequences are 2–3× shorter:
training is that much faster, and a CoT answer fits the demo's generation limit.

Seeds. Benchmarks are built with small seeds (0, 1, …) and the CLIP uses 1000+/2000+; the VLM's
training conversations come from a shapes-world benchmark built with seed
``TRAIN_SEED_BASE + seed`` (≥ 3000), so no evaluation scene is ever trained on.

    metrics = train_shapes_vlm(Path("runs/shapes-vlm"), seed=0)
    backend = load_backend("runs/shapes-vlm")

Status (measured with development scripts that are not part of mmctx): this recipe does not yet
reach the reference model's quality bars, so no shapes-vlm is
shipped. The vision pre-stage works (a throw-away linear probe named the colour–shape pair of 92% of
held-out object cells, 94% the shape), but the language model stays on its no-information
plateau (reply loss ≈ 0.45, letter answers at the majority-letter rate) for as long as a CPU
budget allows: even with perfect image tokens (each cell's colour, shape and size word
embeddings summed in place of the connector's output) 4,000 zero-shot steps did not teach it to
map the looked-up answer to an option letter, and a text-only lookup ("small red circle . … What
colour is the circle?") stayed at chance after 600 steps. A 2-layer model of the same family
needs ~2,000–3,600 steps of 64 sequences just for one-hop associative recall.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from mmctx.prompts.presets import AnswerStyle
from mmctx.schema import Benchmark, Sample

TRAIN_SEED_BASE = 3000  # training conversations: benchmark seed 3000 + seed (disjoint from benchmarks and CLIP)
PRESET = "fewmmbench"  # the preset the demo (and `mmctx run`'s default) renders prompts with
MAX_SHOTS = 8  # the paper grid's largest number of demonstrations
STYLES: tuple[AnswerStyle, ...] = ("letter", "text", "cot")


@dataclass(frozen=True)
class Architecture:
    """Sizes of the Idefics3 built here (the vision tower sees shapes-world frames at native 96 px)."""

    image_size: int = 96
    patch_size: int = 8  # 12 × 12 patches an image
    scale_factor: int = 3  # pixel shuffle: 16 image tokens an image
    vision_hidden: int = 64
    vision_layers: int = 2
    vision_heads: int = 2
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 384
    vocab_size: int = 1024

    @property
    def image_tokens(self) -> int:
        return (self.image_size // self.patch_size) ** 2 // self.scale_factor**2


# --- tokenizer and model ---------------------------------------------------------------------


def prompt_corpus(bench: Benchmark) -> list[str]:
    """Every text the presets can show about ``bench``'s samples: items in all styles, answers, rationales.

    The tokenizer is trained on it, so prompt words are single tokens.
    """
    from mmctx.data.shapes import scene_rationale
    from mmctx.prompts.build import item_text, shown_options
    from mmctx.prompts.presets import get_preset

    preset = get_preset(PRESET)
    texts = [preset.preamble, "User: Assistant: System: Answer: "]
    for sample in list(bench.queries) + list(bench.demos):
        shown = shown_options(sample, preset, 0)
        texts += [item_text(sample, shown, preset, style) for style in STYLES]
        texts += list(sample.choices)
        texts.append((sample.rationale or scene_rationale(sample)).reasoning)
    return texts


def build_shapes_tokenizer(texts: Sequence[str], vocab_size: int = 1024):
    """A byte-level BPE over ``texts`` with the Idefics3 special tokens, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from mmctx.models.tiny import _BOS, _EOS, _PAD, _SPECIAL, _UNK

    special = [_UNK, _PAD, _BOS, _EOS] + _SPECIAL["idefics3"]
    tok = Tokenizer(models.BPE(unk_token=_UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=_UNK,
        pad_token=_PAD,
        bos_token=_BOS,
        eos_token=_EOS,
        additional_special_tokens=[t for t in _SPECIAL["idefics3"] if t != "<|im_start|>"],
        model_max_length=4096,
    )


def build_shapes_vlm(out: Path, tokenizer, arch: Architecture = Architecture(), seed: int = 0) -> Path:
    """Write a random-weight Idefics3 of ``arch`` with ``tokenizer`` and the Idefics3 chat template to ``out``."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor, LlamaConfig
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    from mmctx.models.tiny import IDEFICS3_TEMPLATE

    torch.manual_seed(seed)
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=arch.hidden,
        intermediate_size=arch.intermediate,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    vision = {
        "hidden_size": arch.vision_hidden,
        "intermediate_size": arch.vision_hidden * 2,
        "num_hidden_layers": arch.vision_layers,
        "num_attention_heads": arch.vision_heads,
        "image_size": arch.image_size,
        "patch_size": arch.patch_size,
    }
    config = Idefics3Config(
        vision_config=vision,
        text_config=text.to_dict(),
        scale_factor=arch.scale_factor,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Idefics3ForConditionalGeneration(config)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<end_of_utterance>")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": arch.image_size},
        max_image_size={"longest_edge": arch.image_size},
    )
    processor = Idefics3Processor(
        image_processor, tokenizer, image_seq_len=arch.image_tokens, chat_template=IDEFICS3_TEMPLATE
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def load_for_training(path: Path):
    """(model, processor, adapter) as the HF backend loads them: same adapter, same processor kwargs."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from mmctx.models.adapters import adapter_for

    adapter = adapter_for(str(path), "idefics3")
    processor = AutoProcessor.from_pretrained(path, **adapter.processor_kwargs)
    processor = adapter.prepare(None, processor)
    model = AutoModelForImageTextToText.from_pretrained(path)
    return model, processor, adapter


# --- training conversations ------------------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    """One training sequence: expanded token ids, which positions are reply tokens, its images."""

    ids: tuple[int, ...]
    reply: tuple[bool, ...]  # True where the token is part of an assistant reply (loss is taken there)
    final: tuple[bool, ...]  # True on the query's own reply
    images: tuple[str, ...]


def with_rationale(sample: Sample) -> Sample:
    """``sample`` carrying its scene-graph rationale (queries have none stored; CoT replies need one)."""
    from mmctx.data.shapes import scene_rationale

    return sample if sample.rationale is not None else sample.model_copy(update={"rationale": scene_rationale(sample)})


def reply_text(sample: Sample, shown, style: AnswerStyle) -> str:
    """The gold reply in the form the preset's demos answer (`mmctx.prompts.build`)."""
    from mmctx.prompts.build import _answer_text

    return _answer_text(sample, shown, style)


class Renderer:
    """Turns (query, demos, style, option seed) into a `Conversation`, the way the HF backend would.

    Text goes through the adapter's chat-template rendering and the tokenizer; each ``<image>``
    becomes the processor's expansion (checked against the processor itself on the first
    conversations). Pixel values are computed once per image file and cached.
    """

    def __init__(self, processor, adapter, root: Path):
        from mmctx.prompts.presets import get_preset

        self.processor, self.adapter, self.root = processor, adapter, Path(root)
        self.tokenizer = processor.tokenizer
        self.preset = get_preset(PRESET)
        self.image_id = self.tokenizer.convert_tokens_to_ids("<image>")
        self.end_id = self.tokenizer.convert_tokens_to_ids("<end_of_utterance>")
        self.pixels: dict[str, object] = {}
        self.expansion = self._expansion()
        self.checked = 0

    def _expansion(self) -> list[int]:
        """Token ids the processor puts in place of one ``<image>``."""
        from PIL import Image

        blank = Image.new("RGB", (96, 96), "white")
        ids = self.processor(text=["<image>"], images=[[blank]], return_tensors="pt")["input_ids"][0].tolist()
        return ids

    def pixel_values(self, path: str):
        if path not in self.pixels:
            from PIL import Image

            with Image.open(path) as im:
                rgb = im.convert("RGB")
            self.pixels[path] = self.processor.image_processor(images=[[rgb]], return_tensors="pt")["pixel_values"][
                0, 0
            ]
        return self.pixels[path]

    def render(self, query: Sample, demos: list[Sample], style: AnswerStyle, seed: int) -> Conversation:
        """``query`` after ``demos`` as `build_prompt` asks it, with the gold reply appended."""
        from mmctx.models.spans import answer_turn, chat_conversation
        from mmctx.prompts.build import build_prompt, shown_options

        built = build_prompt(query, demos, self.preset, style, seed, self.root)
        conversation, parts = chat_conversation(built.messages)
        conversation = conversation + [answer_turn(reply_text(query, shown_options(query, self.preset, seed), style))]
        return self.encode(conversation, tuple(p.path for p in parts))

    def encode(self, conversation: list[dict], images: tuple[str, ...]) -> Conversation:
        """A chat-template conversation (ending in an assistant turn) as ids and reply masks."""
        full = self.adapter.render(self.processor, conversation, False)
        spans = []
        for i, message in enumerate(conversation):
            if message["role"] == "assistant":
                start = len(self.adapter.render(self.processor, conversation[:i], True))
                end = full.index("<end_of_utterance>", start) + len("<end_of_utterance>")
                spans.append((start, end))
        enc = self.tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
        ids, reply, final = [], [], []
        for token, (a, b) in zip(enc["input_ids"], enc["offset_mapping"]):
            if token == self.image_id:
                ids += self.expansion
                reply += [False] * len(self.expansion)
                final += [False] * len(self.expansion)
                continue
            inside = [k for k, (start, end) in enumerate(spans) if b > start and a < end]
            ids.append(token)
            reply.append(bool(inside))
            final.append(bool(inside) and inside[0] == len(spans) - 1)
        if self.checked < 3:  # the processor itself must agree with the expansion done here
            self._check(full, images, ids)
        return Conversation(tuple(ids), tuple(reply), tuple(final), images)

    def _check(self, full: str, images: tuple[str, ...], ids: list[int]) -> None:
        from PIL import Image

        rgb = []
        for path in images:
            with Image.open(path) as im:
                rgb.append(im.convert("RGB"))
        expected = self.adapter.inputs(self.processor, [full], [rgb])["input_ids"][0].tolist()
        if expected != ids:
            raise RuntimeError("training tokenisation disagrees with the processor's")
        self.checked += 1


# --- the auxiliary scene loss ----------------------------------------------------------------


def scene_labels() -> list[str]:
    """What each image-token cell is labelled with: every (colour, shape) and (size, shape) pair,
    and where arrows start and end."""
    from mmctx.data.shapes import COLOURS, SHAPES, SIZES

    pairs = [f"{c} {s}" for c in COLOURS for s in SHAPES] + [f"{z} {s}" for z in SIZES for s in SHAPES]
    return pairs + ["arrow tail", "arrow head"]


def cell_targets(meta: dict, grid: int, image_size: int):
    """Multi-hot labels of the ``grid × grid`` image-token cells of a shapes-world image.

    The processor squashes every image to a square (multi-frame strips included), and each
    image token covers one cell of that square (`pixel_shuffle` keeps row-major order); an
    object labels the cell holding its centre, an arrow the cells next to its two ends.
    """
    import torch

    labels = {name: i for i, name in enumerate(scene_labels())}
    frames = meta["frames"]
    frame, sep = meta.get("frame_size", 96), meta.get("separator", 2)
    width = len(frames) * frame + (len(frames) - 1) * sep
    out = torch.zeros(grid * grid, len(labels))

    def cell(i: int, x: float, y: float) -> int:
        px, py = (i * (frame + sep) + x) * image_size / width, y * image_size / frame
        return min(max(int(py * grid / image_size), 0), grid - 1) * grid + min(
            max(int(px * grid / image_size), 0), grid - 1
        )

    for i, f in enumerate(frames):
        objects = {o["id"]: o for o in f["objects"]}
        for o in f["objects"]:
            at = cell(i, o["x"], o["y"])
            out[at, labels[f"{o['colour']} {o['shape']}"]] = 1
            out[at, labels[f"{o['size']} {o['shape']}"]] = 1
        for src, dst in f.get("arrows", []):
            a, b = objects[src], objects[dst]
            dx, dy = b["x"] - a["x"], b["y"] - a["y"]
            norm = math.hypot(dx, dy) or 1.0
            ta, tb = (a["r"] + 4) / norm, 1 - (b["r"] + 4) / norm
            out[cell(i, a["x"] + ta * dx, a["y"] + ta * dy), labels["arrow tail"]] = 1
            out[cell(i, a["x"] + tb * dx, a["y"] + tb * dy), labels["arrow head"]] = 1
    return out


class SceneHead:
    """A linear probe from each image token (the connector's output) to its cell's scene labels.

    Used only while training and never saved: it makes the vision tower learn, quickly and
    densely, what is where, which the text replies alone teach far too slowly (a from-scratch
    tower needs ~1,000 batches before shapes, unlike colours, come out of it at all).
    """

    def __init__(self, model, arch: Architecture):
        import torch

        self.grid = arch.image_size // arch.patch_size // arch.scale_factor
        self.linear = torch.nn.Linear(arch.hidden, len(scene_labels()))
        self.captured = None
        model.model.connector.register_forward_hook(self._capture)

    def _capture(self, module, inputs, output) -> None:
        self.captured = output

    def loss(self, targets):
        """Binary cross-entropy of the last forward's image tokens against ``targets`` (images × cells × labels)."""
        import torch

        logits = self.linear(self.captured.view(targets.shape[0], targets.shape[1], -1))
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, targets)


def pretrain_vision(
    model, head: SceneHead, pixels, targets, steps: int, batch_size: int, lr: float, seed: int
) -> list[float]:
    """Stage 1: vision tower + connector + probe on the scene labels alone (cheap: no text)."""
    import torch

    params = [*model.model.vision_model.parameters(), *model.model.connector.parameters(), *head.linear.parameters()]
    optimiser = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    draws = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(pixels), (batch_size,), generator=draws)
        model.model.get_image_features(pixel_values=pixels[idx][:, None])
        loss = head.loss(targets[idx])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
    return losses


# --- training --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mixture:
    """What a training batch is: P(shots = 0), and the answer style mix (zero-shot / few-shot)."""

    zero_shot: float = 0.5
    zero_shot_styles: tuple[float, float, float] = (0.5, 0.35, 0.15)  # letter, text, cot
    few_shot_styles: tuple[float, float, float] = (0.4, 0.3, 0.3)
    tokens_per_batch: int = 2048  # few-shot batches hold fewer, longer sequences


def draw_batch(rng: random.Random, bench: Benchmark, renderer: Renderer, mixture: Mixture) -> list[Conversation]:
    """A batch of conversations of one shape (same shots and style), so little is padding."""
    zero = rng.random() < mixture.zero_shot
    weights = mixture.zero_shot_styles if zero else mixture.few_shot_styles
    style: AnswerStyle = rng.choices(STYLES, weights=weights)[0]
    shots = 0 if zero else rng.randint(1, MAX_SHOTS)
    strategy = rng.choice(("random", "similar"))
    pool = list(bench.queries) + (list(bench.demos) if zero else [])
    batch: list[Conversation] = []
    tokens = 0
    while tokens < mixture.tokens_per_batch:
        query = with_rationale(rng.choice(pool))
        demos = bench.demos_for(query, strategy, shots, need_rationale=style == "cot") if shots else []
        if shots:
            demos = rng.sample(demos, len(demos))
        conv = renderer.render(query, demos, style, seed=rng.randrange(1 << 30))
        batch.append(conv)
        tokens += len(conv.ids)
    return batch


def collate(batch: list[Conversation], renderer: Renderer, pad_id: int, final_weight: float):
    """Right-padded ids, attention mask, per-token loss weights, pixel values (zero images pad) and
    the images in the order the model sees them (row by row, padding images skipped)."""
    import torch

    n, width = len(batch), max(len(c.ids) for c in batch)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    weights = torch.zeros((n, width))
    max_images = max(len(c.images) for c in batch)
    first = renderer.pixel_values(batch[0].images[0])
    pixels = torch.zeros((n, max_images, *first.shape))
    for row, c in enumerate(batch):
        ids[row, : len(c.ids)] = torch.tensor(c.ids)
        mask[row, : len(c.ids)] = 1
        reply, final = torch.tensor(c.reply, dtype=torch.float), torch.tensor(c.final, dtype=torch.float)
        weights[row, : len(c.ids)] = reply + (final_weight - 1) * final
        for j, path in enumerate(c.images):
            pixels[row, j] = renderer.pixel_values(path)
    return ids, mask, weights, pixels, [path for c in batch for path in c.images]


def reply_loss(model, ids, mask, weights, pixels):
    """Weighted mean next-token cross-entropy over reply tokens."""
    import torch

    logits = model(input_ids=ids, attention_mask=mask, pixel_values=pixels).logits
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1), reduction="none"
    )
    w = weights[:, 1:].reshape(-1)
    return (losses * w).sum() / w.sum().clamp(min=1e-6)


def training_benchmark(root: Path, seed: int, queries_per_task: int, pool_per_task: int) -> Benchmark:
    """The shapes-world benchmark the conversations come from: seed ``TRAIN_SEED_BASE + seed``."""
    from mmctx.data.shapes import build_benchmark

    return build_benchmark(
        Path(root), queries_per_task=queries_per_task, seed=TRAIN_SEED_BASE + seed, pool_per_task=pool_per_task
    )


def _schedule(optimiser, steps: int):
    """Linear warm-up over 5% of the steps, then cosine decay to zero."""
    import torch

    warmup = max(1, steps // 20)
    return torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )


def train_shapes_vlm(
    out: Path,
    seed: int = 0,
    steps: int = 1500,
    vision_steps: int = 2000,
    lr: float = 2e-3,
    vision_lr: float = 2e-3,
    vision_batch: int = 64,
    aux_weight: float = 0.5,
    queries_per_task: int = 300,
    pool_per_task: int = 400,
    arch: Architecture = Architecture(),
    mixture: Mixture = Mixture(),
    final_weight: float = 2.0,
    progress: bool = True,
    work: Path | None = None,
) -> dict:
    """Train an Idefics3 of ``arch`` on shapes-world and save it (model + processor) to ``out``.

    Stage 1 (``vision_steps`` batches of ``vision_batch`` images) trains the vision tower and the
    connector on the scene labels of `cell_targets` through a throw-away `SceneHead`. Stage 2
    (``steps`` batches of about ``mixture.tokens_per_batch`` tokens) trains everything on
    rendered conversations (`draw_batch`), the reply loss plus ``aux_weight`` × the scene loss.
    Everything is drawn from generators seeded with ``seed`` and ``torch.manual_seed(seed)``.

    Returns metrics: ``train_seconds`` (both stages), ``total_seconds`` (data, tokenizer and
    pixels too), ``parameters``, per-step ``losses`` and ``vision_losses``, seeds, data sizes.
    """
    import torch

    from mmctx.curate.embed import _progress

    out = Path(out)
    started_total = time.perf_counter()
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory(prefix="mmctx-shapes-vlm-") as tmp:
        root = Path(work) if work is not None else Path(tmp) / "train"
        bench = training_benchmark(root, seed, queries_per_task, pool_per_task)
        samples = list(bench.queries) + list(bench.demos)
        tokenizer = build_shapes_tokenizer(prompt_corpus(bench), arch.vocab_size)
        build_shapes_vlm(out, tokenizer, arch, seed)
        model, processor, adapter = load_for_training(out)
        renderer = Renderer(processor, adapter, bench.root)
        head = SceneHead(model, arch)
        paths = [str((bench.root / s.images[0]).resolve()) for s in samples]
        targets = {p: cell_targets(s.meta, head.grid, arch.image_size) for p, s in zip(paths, samples)}
        pixels = torch.stack([renderer.pixel_values(p) for p in paths])

        started = time.perf_counter()
        model.train()
        with _progress(progress) as bar:
            task = bar.add_task("shapes VLM: vision tower", total=1)
            vision_losses = pretrain_vision(
                model,
                head,
                pixels,
                torch.stack([targets[p] for p in paths]),
                vision_steps,
                vision_batch,
                vision_lr,
                seed,
            )
            bar.advance(task)
        vision_seconds = time.perf_counter() - started

        rng = random.Random(seed)
        params = [*model.parameters(), *head.linear.parameters()]
        optimiser = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
        schedule = _schedule(optimiser, steps)
        losses: list[float] = []
        aux_losses: list[float] = []
        with _progress(progress) as bar:
            task = bar.add_task("shapes VLM: conversations", total=steps)
            for _ in range(steps):
                batch = draw_batch(rng, bench, renderer, mixture)
                ids, mask, weights, batch_pixels, images = collate(
                    batch, renderer, tokenizer.pad_token_id, final_weight
                )
                loss = reply_loss(model, ids, mask, weights, batch_pixels)
                aux = head.loss(torch.stack([targets[p] for p in images]))
                optimiser.zero_grad()
                (loss + aux_weight * aux).backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimiser.step()
                schedule.step()
                losses.append(float(loss.detach()))
                aux_losses.append(float(aux.detach()))
                bar.advance(task)
        train_seconds = time.perf_counter() - started
    model.eval()
    model.save_pretrained(out)  # the processor saved by `build_shapes_vlm` stays as built (96 px)
    return {
        "train_seconds": train_seconds,
        "vision_seconds": vision_seconds,
        "total_seconds": time.perf_counter() - started_total,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps,
        "vision_steps": vision_steps,
        "vision_batch": vision_batch,
        "tokens_per_batch": mixture.tokens_per_batch,
        "mixture": asdict(mixture),
        "architecture": {**asdict(arch), "image_tokens": arch.image_tokens},
        "vocab_size": len(tokenizer),
        "lr": lr,
        "vision_lr": vision_lr,
        "aux_weight": aux_weight,
        "final_weight": final_weight,
        "queries_per_task": queries_per_task,
        "pool_per_task": pool_per_task,
        "seed": seed,
        "train_seed": TRAIN_SEED_BASE + seed,
        "train_samples": len(samples),
        "train_queries": len(bench.queries),
        "losses": losses,
        "aux_losses": aux_losses,
        "vision_losses": vision_losses,
        "path": str(out),
    }
