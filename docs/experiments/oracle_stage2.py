"""Development script (not part of mmctx): the recipe's stage 2 on *oracle* image tokens.

`train_shapes_vlm` itself runs, with stage 1 skipped (0 + 0 steps) and its cached image tokens
swapped for `oracle_tokens.oracle_token`'s: ``exact`` is the scene's summed `patch_features`
along `feature_basis`, scaled by `token_scale`, which is what stage 1 aims the connector at,
with no tower at all. Everything else is the recipe's stage 2 (same seed, `CURRICULUM`,
`RESTART`, `WordGrounding`). That tells a task the language model cannot learn apart from one
the tower does not feed it. Score with ``oracle_rank.py OUT/model exact ...``.

    python docs/experiments/oracle_stage2.py OUT 7000 2500 [exact|positions|shipped|tower=DIR]   # 17–30 min on a 2-core CPU

``shipped`` takes the tokens from the shipped model's own tower and connector instead, and
saves the trained language model with them: a full run without its stage 1. ``tower=DIR`` does
the same with the tower of the model in DIR (another run's). Score either with
``oracle_rank.py OUT/model tower ...``. ``tower=DIR+exact-ends`` swaps the tower tokens'
arrow-end features for the exact ones (score with ``oracle_rank.py OUT/model tower+exact-ends``);
``tower=DIR+ends*K`` multiplies what the connector writes along them by K, saved in the model.

``positions`` (`oracle_tokens.py`) puts where the arrow's ends are in the token instead of which
shapes they touch; the grounding still asks each shape word for its own arrow ends.
"""

import sys
import time
from pathlib import Path

from mmctx.reference import vlm as V

sys.path.insert(0, str(Path(__file__).parent))
from oracle_tokens import exact_features, oracle_token, sharpen_ends  # noqa: E402

out, steps, restart_steps = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
mode = sys.argv[4] if len(sys.argv) > 4 else "exact"
seed = 0
metas: dict[str, dict] = {}  # image path → its scene, seen as `train_shapes_vlm` loads the images
pixels_of = V._pixels


def remembering_pixels(renderer, samples):
    paths, pixels = pixels_of(renderer, samples)
    metas.update({p: s.meta for p, s in zip(paths, samples)})
    return paths, pixels


def oracle_tokens(model, paths, pixels):
    if tower is not None:
        tokens = tokens_of(tower, paths, pixels)
        if change == "exact-ends":
            basis, scale = V.feature_basis(V.Architecture().hidden, seed), V.token_scale(V._patches(model))
            tokens = V.with_exact_arrow_ends(tokens, {p: exact_features(metas[p]) for p in tokens}, basis, scale)
        return tokens
    basis, scale = V.feature_basis(V.Architecture().hidden, seed), V.token_scale(V._patches(model))
    return {p: oracle_token(metas[p], basis, scale, mode) for p in paths}


tokens_of = V.cached_image_tokens
tower, change = None, ""
if mode == "shipped" or mode.startswith("tower="):
    from mmctx.reference.shipped import VLM_NAME, shipped

    source, _, change = (str(shipped(VLM_NAME)) if mode == "shipped" else mode.split("=", 1)[1]).partition("+")
    tower = V.load_for_training(source)[0].eval()
    if change.startswith("ends*"):
        sharpen_ends(tower, V.feature_basis(V.Architecture().hidden, seed), float(change[5:]))
V._pixels, V.cached_image_tokens = remembering_pixels, oracle_tokens
started = time.perf_counter()
metrics = V.train_shapes_vlm(
    out / "model", seed=seed, steps=steps, restart_steps=restart_steps, vision_steps=0, linear_steps=0
)
if tower is not None:  # the language model just trained, on the tower its tokens came from
    model = V.load_for_training(out / "model")[0]
    model.model.vision_model.load_state_dict(tower.model.vision_model.state_dict())
    model.model.connector.load_state_dict(tower.model.connector.state_dict())
    model.save_pretrained(out / "model")
losses = metrics["losses"]
print("first loss", losses[0], "last 100", sum(losses[-100:]) / len(losses[-100:]))
print("done", time.perf_counter() - started, flush=True)
