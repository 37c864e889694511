"""Context-complexity rows and correlations (CLBench-V §6.1), and the tokenizers they count with."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from mmctx.analysis.complexity import (
    WHITESPACE,
    ComplexityRow,
    complexity_rows,
    correlations,
    load_tokenizer,
)
from mmctx.reporting.complexity import write_complexity_report

TEXTS = ["a b", "a b c d", "one two three", "x " * 10, "long " * 40, "w " * 7, "q"]
SCORES = [1.0, 0.0, 0.5, 1.0, 0.0, 0.25, 1.0]
IMAGES = [1, 2, 1, 3, 8, 2, 1]
SUBSETS = ["ZeroBench"] * 4 + ["Financial Report ROE", "CourtSI", "CourtSI"]


def _inputs():
    results, requests = [], []
    for i, (text, score, images, subset) in enumerate(zip(TEXTS, SCORES, IMAGES, SUBSETS)):
        outcome = "scored" if i != 4 else "context_overflow"
        results.append({"id": str(i), "subset": subset, "table_level": "L0", "outcome": outcome,
                        "score": score if outcome == "scored" else 0.0, "images": images})  # fmt: skip
        requests.append({"id": str(i), "subset": subset, "prompt_text": text, "images": images})
    return results, requests


def _rows():
    name, count = load_tokenizer(WHITESPACE)
    results, requests = _inputs()
    return complexity_rows(results, requests, count, tokenizer=name)


def test_whitespace_tokenizer():
    name, count = load_tokenizer("whitespace")
    assert name == "whitespace"
    assert count("  a\tb\nc  ") == 3 and count("") == 0


def test_rows_join_and_count():
    rows = _rows()
    assert [r.tokens for r in rows] == [2, 4, 3, 10, 40, 7, 1]
    assert [r.images for r in rows] == IMAGES
    assert rows[4].score == 0.0 and rows[4].outcome == "context_overflow"
    assert {r.tokenizer for r in rows} == {"whitespace"}


def test_rows_missing_request_raises():
    results, requests = _inputs()
    with pytest.raises(ValueError, match="ZeroBench/0"):
        complexity_rows(results, requests[1:], len)


def test_correlations_match_scipy_by_hand():
    rows = _rows()
    out = correlations(rows)
    tokens = np.array([2, 4, 3, 10, 40, 7, 1], dtype=float)
    images = np.array(IMAGES, dtype=float)
    score = np.array([1.0, 0.0, 0.5, 1.0, 0.0, 0.25, 1.0])
    assert out["n"] == 7 and out["tokenizer"] == "whitespace"
    # Pearson by hand with numpy; Spearman as Pearson on ranks.
    assert out["tokens_pearson"] == pytest.approx(np.corrcoef(tokens, score)[0, 1])
    assert out["images_pearson"] == pytest.approx(np.corrcoef(images, score)[0, 1])
    ranks = np.corrcoef(stats.rankdata(tokens), stats.rankdata(score))[0, 1]
    assert out["tokens_spearman"] == pytest.approx(ranks)
    assert out["images_spearman"] == pytest.approx(stats.spearmanr(images, score)[0])
    assert out["tokens_pearson_p"] == pytest.approx(stats.pearsonr(tokens, score)[1])


def test_exclusion_changes_n_and_values():
    rows = _rows()
    full = correlations(rows)
    excl = correlations(rows, exclude_subsets=["financial_report roe"])
    assert excl["n"] == 6 and excl["excluded"] == ["financial_report roe"]
    kept = [0, 1, 2, 3, 5, 6]
    tokens = np.array([2, 4, 3, 10, 40, 7, 1], dtype=float)[kept]
    score = np.array([1.0, 0.0, 0.5, 1.0, 0.0, 0.25, 1.0])[kept]
    assert excl["tokens_pearson"] == pytest.approx(np.corrcoef(tokens, score)[0, 1])
    assert excl["tokens_pearson"] != pytest.approx(full["tokens_pearson"])


def test_undefined_is_none():
    rows = [ComplexityRow(str(i), "s", "L0", i, 1, float(i % 2), "scored", "whitespace") for i in range(5)]
    out = correlations(rows)  # image count is constant
    assert out["images_pearson"] is None and out["images_spearman"] is None and out["images_pearson_p"] is None
    assert out["tokens_pearson"] is not None
    assert correlations(rows[:2])["tokens_pearson"] is None  # n < 3
    assert correlations([])["n"] == 0
    json.dumps(out)  # no NaN needed


def test_real_tokenizer_offline(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["the cat sat on the mat", "a dog ran"], trainers.WordLevelTrainer(
        special_tokens=["[UNK]", "[BOS]"], show_progress=False))  # fmt: skip
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="[BOS]")
    wrapped.save_pretrained(tmp_path / "tok")
    name, count = load_tokenizer(str(tmp_path / "tok"))
    assert name == str(tmp_path / "tok")
    assert count("the cat, the dog!") == len(tok.encode("the cat, the dog!").ids) == 6
    results, requests = _inputs()
    rows = complexity_rows(results, requests, count, tokenizer=name)
    assert rows[3].tokens == 10 and rows[0].tokenizer == name


def test_write_complexity_report(tmp_path):
    paths = write_complexity_report({"m1": _rows()}, tmp_path, exclude_subsets=["Financial Report ROE"])
    names = {p.name for p in paths}
    assert {"complexity.csv", "complexity.json", "complexity_m1_tokens.png", "complexity_m1_images_excl.pdf"} <= names
    data = json.loads((tmp_path / "complexity.json").read_text())
    assert [d["n"] for d in data] == [7, 6]
