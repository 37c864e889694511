"""Context complexity (CLBench-V §6.1): does score fall with context length or image count?

Per sample: the token length of the rendered model input (``requests.jsonl``'s ``prompt_text``,
images as placeholders, so image tokens are *not* counted: the image count is the second,
separate measure), the number of images, and the sample's score (0 for every non-scored
outcome, as in the tables). Then Pearson and Spearman correlations of score with each measure,
optionally leaving subsets out (the paper repeats the analysis without Financial Report ROE,
whose inputs are by far the longest).

Token counts depend on the tokenizer, so its name travels with every row and result. The
paper counts with the Qwen3-VL-4B tokenizer (appendix A); `load_tokenizer` loads that or any
other tokenizer from a hub name or a local folder (a local folder works offline). Offline
without one, ``"whitespace"`` counts whitespace-separated words: a rough proxy, labelled as such.

This module computes; `mmctx.reporting.complexity` writes the CSV, JSON and scatter figures.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "PAPER_TOKENIZER",
    "WHITESPACE",
    "ComplexityRow",
    "complexity_results",
    "complexity_rows",
    "correlations",
    "kept_rows",
    "load_tokenizer",
    "rows_as_dicts",
]

WHITESPACE = "whitespace"
PAPER_TOKENIZER = "Qwen/Qwen3-VL-4B-Instruct"  # what appendix A counts with
MEASURES = ("tokens", "images")


@dataclass(frozen=True)
class ComplexityRow:
    id: str
    subset: str
    table_level: str
    tokens: int
    images: int
    score: float  # 0 unless outcome == "scored"
    outcome: str
    tokenizer: str  # the name `tokens` was counted with


def _whitespace_count(text: str) -> int:
    return len(text.split())


def load_tokenizer(name_or_path: str) -> tuple[str, Callable[[str], int]]:
    """``(name, count_fn)``: ``"whitespace"``, or a transformers tokenizer by hub name or local path.

    Counts exclude special tokens (BOS/EOS are not context). The name returned is the one
    given, so results say which tokenizer produced them; the paper's is `PAPER_TOKENIZER`.
    """
    if name_or_path == WHITESPACE:
        return WHITESPACE, _whitespace_count
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    tokenizer.model_max_length = sys.maxsize  # we only count: no "sequence too long" warnings

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return str(name_or_path), count


def complexity_rows(
    results_rows: Iterable[Mapping[str, Any]],
    request_rows: Iterable[Mapping[str, Any]],
    count_tokens: Callable[[str], int],
    tokenizer: str = "",
) -> list[ComplexityRow]:
    """One `ComplexityRow` per results row, joined to its request by (subset, id).

    ``tokenizer`` names ``count_tokens`` (record it: counts from different tokenizers are not
    comparable). A results row without a request raises ValueError: silently dropping it would
    bias the correlations towards whatever was logged. Identical prompts are counted once.
    """
    requests = {(str(r["subset"]), str(r["id"])): r for r in request_rows}
    cache: dict[str, int] = {}
    rows, missing = [], []
    for res in results_rows:
        key = (str(res["subset"]), str(res["id"]))
        req = requests.get(key)
        if req is None:
            missing.append(key)
            continue
        text = str(req.get("prompt_text", ""))
        if text not in cache:
            cache[text] = int(count_tokens(text))
        outcome = str(res.get("outcome", ""))
        rows.append(
            ComplexityRow(
                id=key[1],
                subset=key[0],
                table_level=str(res.get("table_level", "")),
                tokens=cache[text],
                images=int(req.get("images", res.get("images", 0)) or 0),
                score=float(res.get("score", 0.0)) if outcome == "scored" else 0.0,
                outcome=outcome,
                tokenizer=tokenizer,
            )
        )
    if missing:
        shown = ", ".join(f"{s}/{i}" for s, i in missing[:5])
        raise ValueError(f"{len(missing)} result(s) without a request row (subset/id): {shown}")
    return rows


def _norm(name: str) -> str:
    return name.casefold().replace(" ", "-").replace("_", "-")


def _correlation(x: Sequence[float], y: Sequence[float], kind: str) -> tuple[float | None, float | None]:
    """(statistic, p-value), or (None, None) when undefined: fewer than 3 points or a constant side."""
    from scipy import stats

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.pearsonr(x, y) if kind == "pearson" else stats.spearmanr(x, y)
    stat, p = float(result[0]), float(result[1])
    return (None if math.isnan(stat) else stat), (None if math.isnan(p) else p)


def correlations(rows: Sequence[ComplexityRow], exclude_subsets: Iterable[str] = ()) -> dict[str, Any]:
    """Pearson and Spearman of score with token length and with image count, as a flat dict.

    Keys: ``n``, ``excluded`` (the names asked for), ``tokenizer``, and for each measure m in
    (tokens, images): ``m_pearson``, ``m_pearson_p``, ``m_spearman``, ``m_spearman_p``. A value
    is None, never NaN, where the correlation is undefined (n < 3 or a constant column), so the
    result serialises to JSON and cannot be mistaken for a number. Subsets are matched
    case-, space- and underscore-insensitively.
    """
    excluded = list(exclude_subsets)
    kept = kept_rows(rows, excluded)
    names = sorted({r.tokenizer for r in kept if r.tokenizer})
    out: dict[str, Any] = {"n": len(kept), "excluded": excluded, "tokenizer": ", ".join(names)}
    score = [r.score for r in kept]
    for measure in MEASURES:
        values = [float(getattr(r, measure)) for r in kept]
        for kind in ("pearson", "spearman"):
            out[f"{measure}_{kind}"], out[f"{measure}_{kind}_p"] = _correlation(values, score, kind)
    return out


def kept_rows(rows: Sequence[ComplexityRow], exclude_subsets: Iterable[str] = ()) -> list[ComplexityRow]:
    """``rows`` without the subsets named (matched case-, space- and underscore-insensitively)."""
    drop = {_norm(s) for s in exclude_subsets}
    return [r for r in rows if _norm(r.subset) not in drop]


def complexity_results(
    runs: Mapping[str, Sequence[ComplexityRow]], exclude_subsets: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Per model, ``{"model": name, **correlations}`` over all samples and then (if asked)
    without ``exclude_subsets``: the rows of ``complexity.csv`` / ``complexity.json``."""
    views: list[Sequence[str]] = [()] + ([list(exclude_subsets)] if exclude_subsets else [])
    return [{"model": model, **correlations(rows, view)} for model, rows in runs.items() for view in views]


def rows_as_dicts(rows: Sequence[ComplexityRow]) -> list[dict[str, Any]]:
    """Rows as plain dicts (for a per-sample CSV or JSONL beside the correlations)."""
    return [asdict(r) for r in rows]
