"""A language-model step of stage 2: the vocabulary projection at the reply's positions alone
(`reply_loss`) against at every position, as the model's own forward computes it.

Draws stage-2 batches of a shapes-world benchmark, caches their image tokens with the shipped
VLM's tower, checks both ways give the same loss, then times training steps (forward,
backward, AdamW) each way, alternating, and prints the ratio.

    python reference/benchmarks/reply_logits_speed.py [--steps 30]
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from _stage2 import language_parameters, stage2, train_only
from mmctx_reference.vlm import Mixture, collate, draw_batch, forward_cached, reply_loss


def every_position_loss(model, ids, mask, tokens, image_id, weights):
    """The loss as before `reply_loss`: the vocabulary projection at every position (what the
    model's own forward computes), then the reply's positions weighted."""
    logits = model.lm_head(forward_cached(model, ids, mask, tokens, image_id).last_hidden_state)
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1), reduction="none"
    )
    w = weights[:, 1:].reshape(-1)
    return (losses * w).sum() / w.sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    with stage2() as s:
        model, renderer, rng = s.model, s.renderer, random.Random(0)
        batches = [collate(draw_batch(rng, s.pools, renderer, Mixture()), s.images, s.pad) for _ in range(args.steps)]
    language = train_only(model, language_parameters(model))
    image_id = renderer.image_id

    def reply_only(ids, mask, weights, tokens):
        return reply_loss(model, forward_cached(model, ids, mask, tokens, image_id).last_hidden_state, ids, weights)

    def every_position(ids, mask, weights, tokens):
        return every_position_loss(model, ids, mask, tokens, image_id, weights)

    with torch.no_grad():
        a, b = reply_only(*batches[0]), every_position(*batches[0])
    if abs(float(a) - float(b)) > 1e-4:
        raise SystemExit(f"the losses differ: {float(a)} against {float(b)}")
    optimiser = torch.optim.AdamW(language, lr=1e-5)
    model.train()
    seconds = {"reply only": 0.0, "every position": 0.0}
    for rounds in range(2):  # alternate, so a machine slowing down weighs on both alike
        for name, loss_of in (("every position", every_position), ("reply only", reply_only)):
            started = time.perf_counter()
            for batch in batches:
                optimiser.zero_grad()
                loss_of(*batch).backward()
                optimiser.step()
            if rounds:  # the first round warms up
                seconds[name] += time.perf_counter() - started
    n = len(batches)
    print(
        f"{n} steps of {Mixture().tokens_per_batch} tokens: every position {seconds['every position'] / n:.3f} s/step, "
        f"reply only {seconds['reply only'] / n:.3f} s/step (same loss: {float(a):.4f})"
    )
    print(f"ratio {seconds['every position'] / seconds['reply only']:.2f}x")


if __name__ == "__main__":
    main()
