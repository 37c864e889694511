"""2-D projections for the curation figures."""

from __future__ import annotations

import numpy as np
import pytest

from mmctx.analysis.projection import pca, project


def test_pca_recovers_the_dominant_direction_with_a_fixed_sign():
    rng = np.random.default_rng(0)
    direction = np.zeros(16)
    direction[3] = 1.0
    x = rng.normal(size=(200, 1)) * 5 * direction + rng.normal(size=(200, 16)) * 0.1
    coords = pca(x)
    assert coords.shape == (200, 2)
    assert abs(np.corrcoef(coords[:, 0], x[:, 3])[0, 1]) > 0.99
    flipped = pca(-x)  # the data mirrored: the sign convention keeps the figure from flipping
    assert np.allclose(np.abs(coords), np.abs(flipped), atol=1e-9)
    assert np.allclose(pca(x), coords)


def test_tsne_runs_on_a_small_pool_and_unknown_methods_are_refused():
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(0, 0.1, size=(20, 8)), rng.normal(3, 0.1, size=(20, 8))])
    coords = project(x, "tsne", seed=0)
    assert coords.shape == (40, 2)
    # Two well-separated clusters stay separated.
    a, b = coords[:20].mean(axis=0), coords[20:].mean(axis=0)
    spread = max(coords[:20].std(axis=0).max(), coords[20:].std(axis=0).max())
    assert np.linalg.norm(a - b) > 3 * spread
    with pytest.raises(ValueError, match="unknown projection"):
        project(x, "mds")
