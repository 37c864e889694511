"""mmctx's reference models, trained offline on shapes-world: shapes-clip and shapes-vlm.

A distribution of its own beside mmctx (``pip install -e ./reference``): mmctx ships the trained
checkpoints and loads them (`mmctx.models.shipped`, ``builtin:shapes-vlm``,
``clip:builtin:shapes-clip``) without this package; this package is how they are trained.
`mmctx train-reference --out DIR` trains both from a seed on a CPU (`mmctx_reference.train`).
"""

from mmctx.models.shipped import CLIP_NAME, REFERENCE_MODELS, VLM_NAME, MissingReferenceModel, shipped
from mmctx_reference.clip import HELDOUT_SEED_BASE, TRAIN_SEED_BASE, pair_text, shapes_pairs, train_shapes_clip

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
