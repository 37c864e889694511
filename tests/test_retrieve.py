"""Demo retrieval: nearest by cosine with exclusions and ties, seeded random draws."""

from __future__ import annotations

import numpy as np
import pytest

from mmctx.curate.retrieve import random_demos, rerank_demos, similar_demos, top_k


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_similar_demos_are_the_k_nearest_most_similar_first():
    rng = np.random.default_rng(0)
    cands = unit(rng.normal(size=(200, 16)))
    queries = unit(rng.normal(size=(5, 16)))
    nb = similar_demos(queries, cands, k=8)
    sims = queries @ cands.T
    for q in range(5):
        expected = np.argsort(-sims[q], kind="stable")[:8]
        assert nb.indices[q].tolist() == expected.tolist()
        assert np.all(np.diff(nb.scores[q]) <= 0)
        assert np.allclose(nb.scores[q], sims[q, expected], atol=1e-6)
    assert nb.excluded.tolist() == [0] * 5


def test_near_duplicates_and_same_images_are_excluded_and_counted():
    rng = np.random.default_rng(1)
    cands = unit(rng.normal(size=(50, 8)))
    query = cands[[3]] + 1e-4  # practically candidate 3 itself
    same = np.zeros((1, 50), dtype=bool)
    same[0, 7] = True  # another sample showing the query's image
    nb = similar_demos(query, cands, k=5, same_content=same)
    assert 3 not in nb.indices[0] and 7 not in nb.indices[0]
    assert nb.excluded[0] == 2
    lenient = similar_demos(query, cands, k=5, duplicate_cosine=1.01)
    assert lenient.indices[0, 0] == 3


def test_ties_go_to_the_lowest_index():
    scores = np.array([[0.5, 0.9, 0.9, 0.1, 0.9, 0.2]])
    idx, vals = top_k(scores, 3)
    assert idx.tolist() == [[1, 2, 4]]
    idx, _ = top_k(scores, 2)
    assert idx.tolist() == [[1, 2]]


def test_too_few_candidates_after_exclusion_is_an_error():
    cands = unit(np.eye(4))
    with pytest.raises(ValueError, match="fewer than 4 candidates"):
        similar_demos(cands[:1], cands, k=4)  # the query itself is a near-duplicate


def test_rerank_shortlists_by_image_then_orders_by_text():
    img_c = unit(np.array([[1, 0.0], [0.9, 0.1], [0.8, 0.2], [0, 1.0]]))
    txt_c = unit(np.array([[0, 1.0], [1, 0.0], [0.7, 0.7], [1, 0.0]]))
    q = unit(np.array([[1, 0.0]]))
    nb = rerank_demos(q, img_c, q, txt_c, k=2, shortlist=3, duplicate_cosine=1.01)
    # Shortlist by image = {0, 1, 2}; by text within it: 1 (cos 1) then 2 (cos .71); 3 is text-best but not shortlisted.
    assert nb.indices[0].tolist() == [1, 2]


def test_random_demos_are_seeded_per_query_and_independent_of_others():
    cands = [f"d{i}" for i in range(100)]
    a = random_demos("q1", "counting", cands, 8, seed=0)
    assert a == random_demos("q1", "counting", list(reversed(cands)), 8, seed=0)
    assert a != random_demos("q2", "counting", cands, 8, seed=0)
    assert a != random_demos("q1", "counting", cands, 8, seed=1)
    assert len(set(a)) == 8 and set(a) <= set(cands)
    with pytest.raises(ValueError, match="q1"):
        random_demos("q1", "counting", cands[:3], 8, seed=0)


def test_rerank_never_returns_banned_candidates_when_few_are_allowed():
    rng = np.random.default_rng(3)
    cands = unit(rng.normal(size=(40, 8)))
    query = unit(rng.normal(size=(1, 8)))
    same = np.zeros((1, 40), dtype=bool)
    same[0, :10] = True  # ten candidates show the query's image; 30 remain, fewer than the shortlist
    nb = rerank_demos(query, cands, query, cands, k=8, shortlist=32, same_content=same)
    assert not set(nb.indices[0].tolist()) & set(range(10))
    assert len(nb.indices[0]) == 8
