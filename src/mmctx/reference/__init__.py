"""Reference models trained offline on shapes-world, so curation has encoders with real signal."""

from mmctx.reference.clip import HELDOUT_SEED_BASE, TRAIN_SEED_BASE, pair_text, shapes_pairs, train_shapes_clip

__all__ = ["HELDOUT_SEED_BASE", "TRAIN_SEED_BASE", "pair_text", "shapes_pairs", "train_shapes_clip"]
