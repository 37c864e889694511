"""Development helper (not part of mmctx): the image tokens the oracle scripts use.

``exact``: the scene's summed `patch_features` along `feature_basis`, scaled by `token_scale`,
which is what stage 1 aims the connector at. ``positions``: the same, except that the per-shape
arrow ends are replaced by where the arrow's tail and head are. Those are what a tower could
see locally, and the language model would then have to bind them to shapes itself.
"""

import math

import torch

from mmctx.data.shapes import SHAPES
from mmctx.data.shapes.world import FRAME, Scene, frame_origin, strip_width
from mmctx.reference import vlm as V

NAMES = V.feature_names()
ENDS = [NAMES.index(f"{s} arrow {e}") for e in ("tail", "head") for s in SHAPES]
SLOTS = [NAMES.index(n) for n in ("circle arrow tail", "square arrow tail", "circle arrow head", "square arrow head")]


def arrow_positions(meta):
    scene = Scene.from_dict(meta)
    out = torch.zeros(4)
    width = strip_width(len(scene.frames))
    for i, frame in enumerate(scene.frames):
        by = {o.id: o for o in frame.objects}
        for a, b in frame.arrows:
            src, dst = by[a], by[b]
            ux, uy = dst.x - src.x, dst.y - src.y
            n = math.hypot(ux, uy)
            ux, uy = ux / n, uy / n
            tx, ty = src.x + ux * (src.r + 2), src.y + uy * (src.r + 2)
            hx, hy = dst.x - ux * (dst.r + 2), dst.y - uy * (dst.r + 2)
            out += torch.tensor(
                [
                    2 * (frame_origin(i) + tx) / width - 1,
                    2 * ty / FRAME - 1,
                    2 * (frame_origin(i) + hx) / width - 1,
                    2 * hy / FRAME - 1,
                ]
            )
    return out


def token_features(meta, f):
    f = f.clone()
    f[ENDS] = 0
    f[SLOTS] = arrow_positions(meta)
    return f


def oracle_token(meta, basis, scale, mode: str = "exact"):
    """One image's token (1 × hidden) for ``mode`` ``exact`` or ``positions``."""
    f = V.patch_features(meta, 96, 8).sum(0)
    if mode == "positions":
        f = token_features(meta, f)
    elif mode != "exact":
        raise ValueError(f"mode must be 'exact' or 'positions', not {mode!r}")
    return (basis @ (scale * f))[None]


def exact_features(meta):
    """The scene's summed `patch_features`, as `with_exact_arrow_ends` takes them."""
    return V.patch_features(meta, 96, 8).sum(0)


def sharpen_ends(model, basis, factor: float) -> None:
    """Multiply what the connector writes along the arrow-end directions by ``factor``: the
    fitted connector reads the ends back at about half their size (least squares shrinks them)."""
    import torch

    ends = basis[:, ENDS]
    proj = model.model.connector.modality_projection.proj
    with torch.no_grad():
        proj.weight += (factor - 1) * ends @ (ends.T @ proj.weight)
