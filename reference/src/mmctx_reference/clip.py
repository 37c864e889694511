"""A tiny CLIP trained contrastively on shapes-world image–text pairs, offline and reproducibly.

`build_tiny_clip` gives a random-weight `CLIPModel` whose embeddings carry no meaning; this
trains it on shapes-world so that similarity-based curation (query selection, demo retrieval)
has an encoder with real image–text signal, without any download.

Seeds. shapes-world benchmarks are built with small seeds (0, 1, …). So that training never
sees an evaluation scene, the training pool uses seed ``TRAIN_SEED_BASE + seed`` (≥ 1000) and
the held-out pairs that recall is measured on use ``HELDOUT_SEED_BASE + seed`` (≥ 2000);
neither range is used for benchmarks.

    metrics = train_shapes_clip(Path("runs/shapes-clip"), seed=0)
    encoder = CLIPEncoder("runs/shapes-clip")
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from mmctx.schema import Sample

TRAIN_SEED_BASE = 1000  # training pools: seed 1000 + seed (benchmarks use small seeds)
HELDOUT_SEED_BASE = 2000  # held-out recall pairs: seed 2000 + seed, disjoint from training
RECALL_CANDIDATES = 64  # image→text recall@1 is computed among this many pairs at a time


def pair_text(sample: Sample) -> str | None:
    """The sample's correct statement about its image, or None when it has none.

    - ``caption_foil``: the correct caption;
    - ``mcqa``: the question followed by its correct answer (``"What colour is the square? yellow."``);
    - ``binary``: the statement when the answer is Yes (a false statement is not a caption);
    - ``open``: the context and question are not a description, so None.
    """
    if sample.format == "caption_foil":
        return sample.answer.strip() or None
    if sample.format == "mcqa":
        answer = sample.answer.strip().rstrip(".")
        return f"{sample.question.strip()} {answer}." if answer else None
    if sample.format == "binary":
        return sample.statement.strip() if sample.answer.strip().lower() == "yes" else None
    return None


def shapes_pairs(root: Path, per_task: int, seed: int) -> tuple[list[Path], list[str]]:
    """(image paths, texts) of a shapes-world pool of ``per_task`` samples per generator, drawn under ``root``."""
    from mmctx.data.shapes import generate_pool

    images, texts = [], []
    for sample in generate_pool(Path(root), per_task=per_task, seed=seed):
        text = pair_text(sample)
        if text is None or not sample.images:
            continue
        images.append(Path(root) / sample.images[0])
        texts.append(text)
    return images, texts


def _encode_pairs(processor, images: list[Path], texts: list[str]):
    """Pixel values and padded token ids of every pair, computed once."""
    from PIL import Image

    rgb = []
    for path in images:
        with Image.open(path) as im:
            rgb.append(im.convert("RGB"))
    pixels = processor.image_processor(images=rgb, return_tensors="pt")["pixel_values"]
    tokens = processor.tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    return pixels, tokens["input_ids"], tokens["attention_mask"]


def _recall_at_1(model, pixels, ids, mask, texts: list[str], candidates: int = RECALL_CANDIDATES) -> float:
    """Image→text recall@1 among consecutive groups of ``candidates`` pairs.

    A retrieval counts as a hit when the retrieved text equals the image's own text (shapes-world
    repeats short captions such as "There is a circle.", and those are equally right).
    """
    import torch

    hits = total = 0
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(texts), candidates):
            sl = slice(start, start + candidates)
            if len(texts[sl]) < 2:
                continue
            img = model.get_image_features(pixel_values=pixels[sl])
            txt = model.get_text_features(input_ids=ids[sl], attention_mask=mask[sl])
            img = getattr(img, "pooler_output", img)
            txt = getattr(txt, "pooler_output", txt)
            img = torch.nn.functional.normalize(img, dim=-1)
            txt = torch.nn.functional.normalize(txt, dim=-1)
            best = (img @ txt.T).argmax(dim=1).tolist()
            group = texts[sl]
            hits += sum(group[j] == group[i] for i, j in enumerate(best))
            total += len(group)
    return hits / max(total, 1)


def recall_chance(texts: list[str], candidates: int = RECALL_CANDIDATES) -> float:
    """What a uniform guess scores under `_recall_at_1`: repeated captions make it more than 1/candidates."""
    expected = total = 0.0
    for start in range(0, len(texts), candidates):
        group = texts[start : start + candidates]
        if len(group) < 2:
            continue
        expected += sum(group.count(t) / len(group) for t in group)
        total += len(group)
    return expected / max(total, 1)


def train_shapes_clip(
    out: Path,
    seed: int = 0,
    steps: int = 600,  # held-out recall@1 peaks near here: 1500 steps fit training better, not held-out
    batch_size: int = 64,
    pool_per_task: int = 200,
    progress: bool = True,
    lr: float = 1e-3,
    image_size: int = 96,  # shapes-world frames are 96 px: no detail is resized away
    heldout_per_task: int = 50,
) -> dict:
    """Train the tiny CLIP of `build_tiny_clip` on shapes-world pairs and save it to ``out``.

    The training pool is ``generate_pool(per_task=pool_per_task, seed=TRAIN_SEED_BASE + seed)``;
    every sample with a correct statement (`pair_text`) gives one image–text pair. Training is
    CLIP's own symmetric contrastive loss (``return_loss=True``) with AdamW, ``steps`` batches of
    ``batch_size`` pairs drawn by a generator seeded with ``seed``; ``torch.manual_seed(seed)``
    fixes everything else, so the same seed gives the same loss curve on the same machine.

    ``out`` holds a normal checkpoint (``save_pretrained`` of model and processor) that
    ``CLIPEncoder(str(out))`` loads. Returns metrics: ``train_seconds``, ``parameters``,
    ``losses`` (per step), ``recall_at_1`` and ``recall_at_1_untrained`` (image→text among
    groups of `RECALL_CANDIDATES` held-out pairs from seed ``HELDOUT_SEED_BASE + seed``),
    the seeds used and the pair counts.
    """
    import torch
    from transformers import AutoProcessor, CLIPModel

    from mmctx.models.tiny import build_tiny_clip

    out = Path(out)
    build_tiny_clip(out, seed=seed, image_size=image_size)
    processor = AutoProcessor.from_pretrained(out)
    model = CLIPModel.from_pretrained(out)
    train_seed, heldout_seed = TRAIN_SEED_BASE + seed, HELDOUT_SEED_BASE + seed

    with tempfile.TemporaryDirectory(prefix="mmctx-shapes-clip-") as tmp:
        train_images, train_texts = shapes_pairs(Path(tmp) / "train", pool_per_task, train_seed)
        held_images, held_texts = shapes_pairs(Path(tmp) / "heldout", heldout_per_task, heldout_seed)
        pixels, ids, mask = _encode_pairs(processor, train_images, train_texts)
        h_pixels, h_ids, h_mask = _encode_pairs(processor, held_images, held_texts)

    # Held-out pairs in a fixed shuffled order, so each recall group mixes tasks.
    order = torch.randperm(len(held_texts), generator=torch.Generator().manual_seed(heldout_seed))
    h_pixels, h_ids, h_mask = h_pixels[order], h_ids[order], h_mask[order]
    held_texts = [held_texts[i] for i in order.tolist()]
    recall_untrained = _recall_at_1(model, h_pixels, h_ids, h_mask, held_texts)

    torch.manual_seed(seed)
    batches = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98), eps=1e-6)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / steps) ** 0.5
    )
    losses: list[float] = []
    n = len(train_texts)
    started = time.perf_counter()
    model.train()
    from mmctx.curate.embed import _progress

    with _progress(progress) as bar:
        task = bar.add_task("training shapes CLIP", total=steps)
        for _ in range(steps):
            idx = torch.randperm(n, generator=batches)[:batch_size]
            # Trim padding to the batch's longest text: fewer tokens, same result.
            length = int(mask[idx].sum(dim=1).max())
            output = model(
                input_ids=ids[idx, :length],
                attention_mask=mask[idx, :length],
                pixel_values=pixels[idx],
                return_loss=True,
            )
            optimiser.zero_grad()
            output.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            with torch.no_grad():  # CLIP clamps its temperature at 100
                model.logit_scale.clamp_(0, 4.6052)
            losses.append(float(output.loss.detach()))
            bar.advance(task)
    train_seconds = time.perf_counter() - started

    recall = _recall_at_1(model, h_pixels, h_ids, h_mask, held_texts)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return {
        "train_seconds": train_seconds,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps,
        "batch_size": batch_size,
        "train_seed": train_seed,
        "heldout_seed": heldout_seed,
        "train_pairs": n,
        "heldout_pairs": len(held_texts),
        "recall_candidates": RECALL_CANDIDATES,
        "recall_chance": recall_chance(held_texts),
        "losses": losses,
        "recall_at_1": recall,
        "recall_at_1_untrained": recall_untrained,
        "path": str(out),
    }


__all__ = [
    "HELDOUT_SEED_BASE",
    "RECALL_CANDIDATES",
    "TRAIN_SEED_BASE",
    "pair_text",
    "shapes_pairs",
    "train_shapes_clip",
]
