"""Development script (not part of mmctx): does stage 1 carry arrow ends to the image token?

A fresh tower trained on action scenes alone (pool seed 4600), as `pretrain_vision` trains it,
then the connector fitted as `fit_connector` fits it; scored on the last 300 scenes: the patch
classes, and `arrow_ends_read` (source and target between the two joined shapes, chance 50%).

    python docs/experiments/arrow_roles_probe.py roles|plain STEPS LINEAR_STEPS [NEIGHBOUR_LAYERS]
    python docs/experiments/arrow_roles_probe.py roles 800 400 0,1   # about 6 min on a 2-core CPU

``roles`` adds `arrow_role_labels` to the patch classes; NEIGHBOUR_LAYERS (e.g. ``0,1``) keeps a
head of those tower layers on each patch's neighbourhood (`look_at_neighbours`).
"""

import random
import sys
import tempfile
from pathlib import Path

import torch

from mmctx.data.shapes.pool import generate_pool
from mmctx.reference import vlm as V

roles = sys.argv[1] == "roles"
steps, linear_steps = int(sys.argv[2]), int(sys.argv[3])
layers = [int(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else []
held, arch = 300, V.Architecture()
torch.manual_seed(0)
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    samples = generate_pool(tmp / "pool", 2000, 4600, ["action_recognition"])
    random.Random(0).shuffle(samples)
    tokenizer = V.build_shapes_tokenizer(["The circle points at the star."] * 10, arch.vocab_size)
    V.build_shapes_vlm(tmp / "model", tokenizer, arch, 0)
    model, processor, adapter = V.load_for_training(tmp / "model")
    if layers:
        V.look_at_neighbours(model, layers)
    features = torch.stack([V.patch_features(s.meta, arch.image_size, arch.patch_size) for s in samples])
    coverage = [V.patch_features(s.meta, arch.image_size, arch.patch_size, "coverage") for s in samples]
    labels = torch.stack([V.patch_labels(c, roles) for c in coverage])
    _, pixels = V._pixels(V.Renderer(processor, adapter, tmp / "pool"), samples)
    fit, check = slice(None, -held), slice(-held, None)
    model.train()
    V.pretrain_vision(model, pixels[fit], features[fit], labels[fit], steps, 64, 5e-3, 0, linear_steps)
    model.eval()
    for layer in layers:
        print(
            f"head on the neighbourhood, layer {layer}: {V.neighbour_attention(model, pixels[check][:64], layer):.2f}"
        )
    basis = V.feature_basis(arch.hidden, 0)
    V.fit_connector(model, pixels[fit], features[fit], basis)
    read = V.read_features(model, pixels[check], basis)
    covered, _ = V.patch_accuracy(model, pixels[check], labels[check])
    print(f"covered patches' pairs {covered:.3f}")
    if roles:
        states, start = V.patch_states(model, pixels[check]), sum(V.label_classes())
        for column, name in ((3, "tail"), (4, "head")):
            n = V.label_classes(True)[column]
            guess = states[..., start : start + n].argmax(-1)
            truth = labels[check][..., column]
            print(f"{name} patches named: {float((guess[truth > 0] == truth[truth > 0]).float().mean()):.3f}")
            start += n
    source, target = V.arrow_ends_read(read, [s.meta for s in samples[-held:]])
    print(f"read back from the token: source {source:.3f}, target {target:.3f}")
