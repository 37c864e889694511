"""2-D projections of a pool's embeddings (the paper's PCA / t-SNE / UMAP figures).

PCA is the default: deterministic, no extra dependency, seconds at 30K points. Signs are
fixed (largest-magnitude loading positive) so a figure does not flip between runs. t-SNE
(scikit-learn) and UMAP (umap-learn) are optional and slow at scale (~40 s and more at 30K);
both run on a 50-component PCA first.
"""

from __future__ import annotations

import numpy as np

METHODS = ("pca", "tsne", "umap")


def pca(x: np.ndarray, components: int = 2) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    vt = vt[:components]
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(axis=1)])
    return centred @ (vt * signs[:, None]).T


def project(x: np.ndarray, method: str = "pca", seed: int = 0) -> np.ndarray:
    """``(n, 2)`` coordinates of the rows of ``x``."""
    if method == "pca":
        return pca(x)
    reduced = pca(x, min(50, x.shape[1], len(x)))
    if method == "tsne":
        try:
            from sklearn.manifold import TSNE
        except ImportError as exc:
            raise RuntimeError("t-SNE needs scikit-learn: pip install 'mmctx[figures]'") from exc
        perplexity = min(30.0, max(2.0, (len(x) - 1) / 3))
        return TSNE(n_components=2, init="pca", random_state=seed, perplexity=perplexity).fit_transform(reduced)
    if method == "umap":
        try:
            import umap
        except ImportError as exc:
            raise RuntimeError("UMAP needs umap-learn: pip install 'mmctx[umap]'") from exc
        return umap.UMAP(n_components=2, random_state=seed).fit_transform(reduced)
    raise ValueError(f"unknown projection {method!r}; choose from {METHODS}")
