"""Stage 2's steps with their batches drawn inline against made ahead on a thread (`prefetched`).

Draws stage-2 batches of a shapes-world benchmark (drawing, rendering and collating each, as
`train_shapes_vlm` does), caches their image tokens with the shipped VLM's tower, and times
training steps (draw, forward, backward, AdamW) each way, alternating; checks both ways saw
the same batches, and prints the ratio.

    python reference/benchmarks/prefetch_speed.py [--steps 60]
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from _stage2 import language_parameters, stage2, train_only
from mmctx_reference.vlm import Mixture, collate, draw_batch, forward_cached, prefetched, reply_loss


def inline(make, n):
    return (make(i) for i in range(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    with stage2() as s:
        model, renderer = s.model, s.renderer
        language = train_only(model, language_parameters(model))
        optimiser = torch.optim.AdamW(language, lr=1e-5)
        model.train()
        seconds = {"inline": 0.0, "prefetched": 0.0}
        seen: dict[str, list[int]] = {}
        for rounds in range(3):  # alternate, so a machine slowing down weighs on both alike
            for name, batches in (("inline", inline), ("prefetched", prefetched)):
                rng = random.Random(rounds)

                def draw(step: int, rng=rng):
                    return collate(draw_batch(rng, s.pools, renderer, Mixture()), s.images, s.pad)

                started = time.perf_counter()
                sizes = []
                for ids, mask, weights, tokens in batches(draw, args.steps):
                    optimiser.zero_grad()
                    reply_loss(
                        model,
                        forward_cached(model, ids, mask, tokens, renderer.image_id).last_hidden_state,
                        ids,
                        weights,
                    ).backward()
                    optimiser.step()
                    sizes.append(int(mask.sum()))
                if rounds:  # the first round warms up
                    seconds[name] += time.perf_counter() - started
                seen.setdefault(name, []).extend(sizes)
    if seen["inline"] != seen["prefetched"]:
        raise SystemExit("the two ways drew different batches")
    n = 2 * args.steps
    print(
        f"{n} steps of about {Mixture().tokens_per_batch} tokens: inline {seconds['inline'] / n:.3f} s/step, "
        f"prefetched {seconds['prefetched'] / n:.3f} s/step (the same batches)"
    )
    print(f"ratio {seconds['inline'] / seconds['prefetched']:.2f}x")


if __name__ == "__main__":
    main()
