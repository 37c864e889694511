"""Development script (not part of mmctx): the recipe's stage 2 on *exact* image tokens.

The tokens are ``feature_basis @ (token_scale * summed patch_features)``, what stage 1 aims the
connector at, with no tower at all; everything else is `train_shapes_vlm`'s stage 2 (same seed,
`CURRICULUM`, `RESTART`, `WordGrounding`). It tells a task the language model cannot learn from
one the tower does not feed it. Score with ``oracle_rank.py OUT/model exact ...``.

    python docs/experiments/oracle_stage2.py OUT 7000 2500 [exact|positions]   # about 27 min on a 2-core CPU

``positions`` (`oracle_tokens.py`) puts where the arrow's ends are in the token instead of which
shapes they touch; the grounding still asks each shape word for its own arrow ends.
"""

import random
import sys
import time
from pathlib import Path

import torch

from mmctx.data.shapes.pool import generate_pool
from mmctx.reference import vlm as V

sys.path.insert(0, str(Path(__file__).parent))
from oracle_tokens import oracle_token  # noqa: E402

out = Path(sys.argv[1])
seed = 0
steps, restart_steps = int(sys.argv[2]), int(sys.argv[3])
mode = sys.argv[4] if len(sys.argv) > 4 else "exact"
arch = V.Architecture()
mixture = V.Mixture()
t0 = time.perf_counter()
torch.manual_seed(seed)
root = out / "train"
bench = V.training_benchmark(root, seed, 300, 400)
samples = list(bench.queries) + list(bench.demos)
scenes = V._moved(generate_pool(bench.root / V.EXTRA, 1000, V.VISION_SEED_BASE + seed), V.EXTRA)
random.Random(seed).shuffle(scenes)
drill_scenes = V._moved(
    generate_pool(bench.root / V.DRILL, 2000, V.DRILL_SEED_BASE + seed, list(V.DRILL_SCENE_TASKS)), V.DRILL
)
tokenizer = V.build_shapes_tokenizer(V.prompt_corpus(bench), arch.vocab_size)
V.build_shapes_vlm(out / "model", tokenizer, arch, seed)
model, processor, adapter = V.load_for_training(out / "model")
renderer = V.Renderer(processor, adapter, bench.root)
basis = V.feature_basis(arch.hidden, seed)
scale = V.token_scale(V._patches(model))


def exact(ss):
    paths = V._image_paths(renderer, ss)
    f = torch.stack([V.patch_features(s.meta, arch.image_size, arch.patch_size).sum(0) for s in ss])
    return paths, f


paths, feats = exact(samples + scenes)
truth = dict(zip(paths, feats))
images = {p: oracle_token(x.meta, basis, scale, mode) for p, x in zip(paths, samples + scenes)}
dp, _ = exact(drill_scenes)
images.update({p: oracle_token(x.meta, basis, scale, mode) for p, x in zip(dp, drill_scenes)})
print("data", time.perf_counter() - t0, flush=True)
for p in [*model.model.vision_model.parameters(), *model.model.connector.parameters()]:
    p.requires_grad_(False)
V.look_at_images(model, basis, seed)
V.look_at_words(model, tokenizer, basis, seed)
grounding = V.WordGrounding(tokenizer, arch.hidden, truth)
model.train()
rng = random.Random(seed)
losses = []


def train(n, phases, optimiser, schedule, grounded_by, drilled):
    params = [p for g in optimiser.param_groups for p in g["params"]]
    for step in range(n):
        mix = V.mixture_at(step, n, mixture, phases)
        batch = V.draw_batch(rng, bench, renderer, mix, scenes, drilled)
        ids, mask, weights, tokens = V.collate(batch, images, tokenizer.pad_token_id)
        o = V.forward_cached(model, ids, mask, tokens, renderer.image_id, grounded_by is not None)
        loss = V.reply_loss(model, o.last_hidden_state, ids, weights)
        losses.append(float(loss.detach()))
        g = grounded_by.loss(batch, o.hidden_states[V.GROUNDED_LAYER]) if grounded_by else None
        if g is not None:
            loss = loss + g
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        if schedule is not None:
            schedule.step()
        if step % 500 == 0:
            print(step, sum(losses[-100:]) / len(losses[-100:]), time.perf_counter() - t0, flush=True)


language = [p for p in model.parameters() if p.requires_grad]
opt = V._adamw([*language, *grounding.parameters()], 3e-3)
train(steps, V.CURRICULUM, opt, V._schedule(opt, steps), grounding, ())
train(restart_steps, V.RESTART, V._adamw(language, 1e-3), None, None, drill_scenes)
model.eval()
model.save_pretrained(out / "model")
print("done", time.perf_counter() - t0, flush=True)
