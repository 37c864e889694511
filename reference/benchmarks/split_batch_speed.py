"""A training step on one process with every core against the batch split over two processes
with half the cores each, gradients summed by an all-reduce (gloo, 127.0.0.1): is data
parallelism on one CPU a lever for `mmctx train-reference`'s time?

Both stages' steps, with the shipped VLM: stage 1's (the vision tower's forward, backward and
AdamW on 64 images of a shapes-world benchmark; the loss is a stand-in, the mean square of the
tower's output, since the tower's passes are the step's cost) and stage 2's (the language
model's, on batches drawn as `train_shapes_vlm` draws them, image tokens cached). Each way runs
in fresh processes on the same batches, the two alternating for ``--rounds`` rounds (the
machine's speed drifts); each half's loss is scaled to its share of the whole batch's, and the
split's first gradient must agree with the whole batch's. Prints median seconds a step.

    python reference/benchmarks/split_batch_speed.py [--vision-steps 24] [--language-steps 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _stage2 import language_parameters, stage2, train_only
from mmctx_reference.vlm import Mixture, _pixels, collate, draw_batch, forward_cached, load_for_training, reply_loss

from mmctx.models.shipped import VLM_NAME, shipped

VISION_BATCH = 64
WARM_UP = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vision_loss(model, pixels):
    return model.model.vision_model(pixel_values=pixels).last_hidden_state.pow(2).mean()


def _language_loss(model, image_id, ids, mask, weights, tokens):
    return reply_loss(model, forward_cached(model, ids, mask, tokens, image_id).last_hidden_state, ids, weights)


def _halves(batch, rank: int, image_id: int):
    """Rank's half of a stage-2 batch (conversations, and the image tokens they hold) and the
    share of the whole batch's reply weight it carries."""
    ids, mask, weights, tokens = batch
    n = len(ids)
    rows = slice(0, n // 2) if rank == 0 else slice(n // 2, n)
    images_per_row = (ids == image_id).sum(1) // tokens.shape[1]
    start = int(images_per_row[: rows.start].sum())
    stop = start + int(images_per_row[rows].sum())
    share = float(weights[rows, 1:].sum() / weights[:, 1:].sum())
    width = int(mask[rows].sum(1).max())
    return (ids[rows, :width], mask[rows, :width], weights[rows, :width], tokens[start:stop]), share


def _worker(rank: int, world: int, threads: int, port: int, data: str, out: str) -> None:
    torch.set_num_threads(threads // world)
    saved = torch.load(data, weights_only=False)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model, _, _ = load_for_training(shipped(VLM_NAME))
    model.train()
    image_id = saved["image_id"]

    def steps(params, loss_of, batches) -> tuple[float, list[torch.Tensor]]:
        optimiser = torch.optim.AdamW(train_only(model, params), lr=1e-5)
        first: list[torch.Tensor] = []
        seconds = 0.0
        for i, batch in enumerate(batches):
            started = time.perf_counter()
            optimiser.zero_grad()
            loss_of(batch).backward()
            if world > 1:  # one flat all-reduce of every gradient, as a trainer would do it
                flat = torch.cat([p.grad.reshape(-1) for p in params])
                dist.all_reduce(flat)
                offset = 0
                for p in params:
                    p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                    offset += p.numel()
            if i == 0:
                first = [p.grad.clone() for p in params]
            optimiser.step()
            if i >= WARM_UP:
                seconds += time.perf_counter() - started
        return seconds / (len(batches) - WARM_UP), first

    vision = list(model.model.vision_model.parameters())
    language = language_parameters(model)

    def vision_loss(pixels):
        half = len(pixels) // world
        return _vision_loss(model, pixels[rank * half : (rank + 1) * half]) / world

    def language_loss(batch):
        part, share = _halves(batch, rank, image_id) if world > 1 else (batch, 1.0)
        return _language_loss(model, image_id, *part) * share

    vision_s, vision_grad = steps(vision, vision_loss, saved["pixels"])
    language_s, language_grad = steps(language, language_loss, saved["batches"])
    if rank == 0:
        torch.save({"vision": (vision_s, vision_grad), "language": (language_s, language_grad)}, out)
    if world > 1:
        dist.destroy_process_group()


def _run(world: int, threads: int, data: str, folder: str) -> dict:
    out = str(Path(folder) / f"world{world}.pt")
    mp.spawn(_worker, args=(world, threads, _free_port(), data, out), nprocs=world)
    return torch.load(out, weights_only=False)


def _relative_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """|a - b| / |b| over every gradient flattened into one vector."""
    a_flat, b_flat = torch.cat([x.reshape(-1) for x in a]), torch.cat([y.reshape(-1) for y in b])
    return float((a_flat - b_flat).norm() / b_flat.norm().clamp(min=1e-12))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vision-steps", type=int, default=24)
    parser.add_argument("--language-steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    threads = torch.get_num_threads()  # one a core, as `mmctx train-reference` runs
    if threads < 2:
        raise SystemExit("needs at least two threads, to split them over two processes")
    with stage2() as s:
        rng = random.Random(0)
        batches = [
            collate(draw_batch(rng, s.pools, s.renderer, Mixture()), s.images, s.pad)
            for _ in range(args.language_steps)
        ]
        _, pixels = _pixels(s.renderer, [*s.bench.queries, *s.bench.demos])
        draws = torch.Generator().manual_seed(0)
        vision_batches = [
            pixels[torch.randint(0, len(pixels), (VISION_BATCH,), generator=draws)] for _ in range(args.vision_steps)
        ]
        image_id = s.renderer.image_id
    with tempfile.TemporaryDirectory() as folder:
        data = str(Path(folder) / "data.pt")
        torch.save({"pixels": vision_batches, "batches": batches, "image_id": image_id}, data)
        runs = {world: [] for world in (1, 2)}
        for _ in range(args.rounds):
            for world, results in runs.items():
                results.append(_run(world, threads, data, folder))
    for stage, what in (
        ("vision", f"stage 1, {VISION_BATCH} images"),
        ("language", f"stage 2, {Mixture().tokens_per_batch} tokens"),
    ):
        one_s, one_grad = statistics.median(r[stage][0] for r in runs[1]), runs[1][0][stage][1]
        two_s, two_grad = statistics.median(r[stage][0] for r in runs[2]), runs[2][0][stage][1]
        difference = _relative_difference(two_grad, one_grad)
        if difference > 1e-4:
            raise SystemExit(f"{what}: the split's gradient differs from the whole batch's by {difference:.2e}")
        print(
            f"{what} (median of {args.rounds} rounds): one process, {threads} threads {one_s:.3f} s/step; "
            f"two processes, {threads // 2} thread(s) each {two_s:.3f} s/step "
            f"(first gradients agree to {difference:.1e}); ratio {one_s / two_s:.2f}x"
        )


if __name__ == "__main__":
    main()
