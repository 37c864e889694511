"""Reference models trained offline on shapes-world, both shipped: shapes-clip and shapes-vlm.

`mmctx train-reference --out DIR` trains both from a seed on a CPU (`mmctx.reference.train`);
``clip:builtin:shapes-clip`` and ``builtin:shapes-vlm`` load the shipped copies (`mmctx.reference.shipped`).
"""

from mmctx.reference.clip import HELDOUT_SEED_BASE, TRAIN_SEED_BASE, pair_text, shapes_pairs, train_shapes_clip
from mmctx.reference.shipped import CLIP_NAME, REFERENCE_MODELS, VLM_NAME, MissingReferenceModel, shipped

__all__ = [
    "CLIP_NAME",
    "HELDOUT_SEED_BASE",
    "REFERENCE_MODELS",
    "TRAIN_SEED_BASE",
    "VLM_NAME",
    "MissingReferenceModel",
    "pair_text",
    "shapes_pairs",
    "shipped",
    "train_shapes_clip",
]
