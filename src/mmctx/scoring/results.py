"""Score a run folder from its stored responses, without a model.

Each planned request becomes one `SampleResult` with an outcome:

- ``correct`` / ``wrong``: an answer was read and compared with the gold option;
- ``unparsed``: generation gave no answer the extraction rules could read (counted as not
  correct, and reported as its own rate — never replaced by a guess);
- ``error``: the backend failed (context overflow, API failure): left out of the accuracy
  denominator and reported as its own count — a failure is not a wrong answer;
- ``missing``: the request has no stored response yet (an unfinished run).

A ``ppl-calibrated`` result reads two responses: its setting's ppl response and its content-free
prompt's (`mmctx.run.plan.content_free_query`); either one missing or failed makes the result
missing or an error. Its prediction is the argmax of the ppl probabilities divided by the
content-free ones (`metrics.calibrated_probabilities`); ``probs`` are the calibrated ones.

A CoT response (a ``-cot`` setting) also gets its failure tags (`mmctx.scoring.cot_tags`).

Accuracy per (task, setting, scorer) is over ``correct + wrong + unparsed``. The overall
average is the mean of the task accuracies (the papers' "Avg." column).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mmctx.extract import extract_choice
from mmctx.jsonl import read_jsonl
from mmctx.models.store import ResponseStore
from mmctx.run.files import REQUESTS, RESULTS, STORE, SUMMARY
from mmctx.run.settings import CONTENT_FREE
from mmctx.scoring import metrics
from mmctx.scoring.cot_tags import is_cot_setting, read_cot_response, tag_cot_response


@dataclass(frozen=True)
class SampleResult:
    request_id: str
    query_id: str
    task: str
    source: str
    setting: str
    scorer: str
    gold: int  # shown position of the correct option
    pred: int | None
    outcome: str  # correct | wrong | unparsed | error | missing
    rule: str = ""  # extraction rule that fired (generate) or "lowest_ppl" (ppl)
    response: str = ""
    truncated: bool = False
    loglikelihoods: tuple[float, ...] = ()
    token_counts: tuple[int, ...] = ()
    probs: tuple[float, ...] = ()
    error: str | None = None
    # A CoT response's failure tags (`mmctx.scoring.cot_tags`); () when none applies. None for
    # anything else: no CoT setting, no response, or a result stored before tags existed.
    cot_tags: tuple[str, ...] | None = None

    @property
    def correct(self) -> bool:
        return self.outcome == "correct"

    @property
    def answered(self) -> bool:
        return self.outcome in ("correct", "wrong", "unparsed")


@dataclass(frozen=True)
class CellMetrics:
    """Metrics of one (task, setting, scorer) cell."""

    task: str
    setting: str
    scorer: str
    n: int  # answered samples: the accuracy denominator
    accuracy: float
    ci_low: float
    ci_high: float
    unparsed_rate: float
    truncation_rate: float
    errors: int
    missing: int
    ece: float = math.nan
    brier: float = math.nan
    mean_confidence: float = math.nan


def load_requests(run_dir: Path) -> list[dict]:
    """Every planned request, in plan order, content-free companions included."""
    return read_jsonl(Path(run_dir) / REQUESTS)


def scored_requests(requests: list[dict]) -> list[dict]:
    """The requests that get a result: all but the content-free companions ``ppl-calibrated`` reads."""
    return [r for r in requests if r["scorer"] != CONTENT_FREE]


def score_request(request: dict, response: dict | None, content_free: dict | None = None) -> SampleResult:
    """``request``'s result from its ``response`` (and, for ``ppl-calibrated``, its ``content_free`` one)."""
    base = {
        "request_id": request["id"],
        "query_id": request["query_id"],
        "task": request["task"],
        "source": request.get("source", ""),
        "setting": request["setting"],
        "scorer": request["scorer"],
        "gold": request["gold"],
    }
    if response is None:
        return SampleResult(**base, pred=None, outcome="missing")
    if response.get("error"):
        return SampleResult(**base, pred=None, outcome="error", error=response["error"])
    if request["scorer"] == "generate":
        found = extract_choice(response["text"], request["options"], request["labels"])
        outcome = "unparsed" if found.index is None else ("correct" if found.index == request["gold"] else "wrong")
        truncated = bool(response.get("truncated"))
        tags = None
        if is_cot_setting(request["setting"]):
            read = read_cot_response(response["text"], request["options"], request["labels"], truncated, found)
            tags = tag_cot_response(read)
        return SampleResult(
            **base,
            pred=found.index,
            outcome=outcome,
            rule=found.rule,
            response=response["text"],
            truncated=truncated,
            cot_tags=tags,
        )
    lls, counts = response["loglikelihoods"], response["token_counts"]
    if not lls or not all(math.isfinite(x) for x in lls):
        # An overflowed or empty score is a failed request, not a prediction.
        return SampleResult(**base, pred=None, outcome="error", error=f"non-finite log-likelihoods {lls}")
    pred = metrics.ppl_choice(lls, counts)
    probs = metrics.option_probabilities(lls, counts)
    rule = "lowest_ppl"
    if request["scorer"] == "ppl-calibrated":
        if content_free is None:
            return SampleResult(**base, pred=None, outcome="missing")
        prior = _content_free_prior(content_free, len(lls))
        if isinstance(prior, str):
            return SampleResult(**base, pred=None, outcome="error", error=f"content-free request: {prior}")
        probs = metrics.calibrated_probabilities(probs, prior)
        pred, rule = int(np.argmax(probs)), "calibrated_ppl"
    return SampleResult(
        **base,
        pred=pred,
        outcome="correct" if pred == request["gold"] else "wrong",
        rule=rule,
        loglikelihoods=tuple(lls),
        token_counts=tuple(counts),
        probs=tuple(float(p) for p in probs),
    )


def _content_free_prior(response: dict, n_options: int) -> np.ndarray | str:
    """The option prior of a content-free response, or why there is none."""
    if response.get("error"):
        return str(response["error"])
    lls, counts = response["loglikelihoods"], response["token_counts"]
    if len(lls) != n_options or not all(math.isfinite(x) for x in lls):
        return f"log-likelihoods {lls} for {n_options} options"
    return metrics.option_probabilities(lls, counts)


def score_run(run_dir: Path) -> list[SampleResult]:
    """One result per planned request, in plan order (content-free requests are read, not scored)."""
    run_dir = Path(run_dir)
    requests = load_requests(run_dir)
    with ResponseStore(run_dir / STORE, read_only=True) as store:
        responses = store.get_all()
    return [
        score_request(r, responses.get(r["key"]), responses.get(r.get("content_free_key", "")))
        for r in scored_requests(requests)
    ]


def cell_metrics(task: str, setting: str, scorer: str, results: list[SampleResult], seed: int = 0) -> CellMetrics:
    answered = [r for r in results if r.answered]
    correct = [r.correct for r in answered]
    low, high = metrics.bootstrap_ci([float(c) for c in correct], seed=seed)
    cell = dict(
        task=task,
        setting=setting,
        scorer=scorer,
        n=len(answered),
        accuracy=metrics.accuracy(correct) if answered else math.nan,
        ci_low=low,
        ci_high=high,
        unparsed_rate=metrics.rate([r.outcome == "unparsed" for r in answered]),
        truncation_rate=metrics.rate([r.truncated for r in answered]) if scorer == "generate" else math.nan,
        errors=sum(r.outcome == "error" for r in results),
        missing=sum(r.outcome == "missing" for r in results),
    )
    ranked = [r for r in answered if r.probs]
    if ranked:
        confidences = [r.probs[r.pred] for r in ranked]
        cell.update(
            ece=metrics.expected_calibration_error(confidences, [r.correct for r in ranked]),
            brier=metrics.brier_score([np.array(r.probs) for r in ranked], [r.gold for r in ranked]),
            mean_confidence=float(np.mean(confidences)),
        )
    return CellMetrics(**cell)


AVERAGE = "Avg."


def summarize(results: list[SampleResult]) -> list[CellMetrics]:
    """Metrics per (task, setting, scorer), plus an ``Avg.`` row per (setting, scorer)."""
    groups: dict[tuple[str, str, str], list[SampleResult]] = defaultdict(list)
    for r in results:
        groups[(r.task, r.setting, r.scorer)].append(r)
    cells = [cell_metrics(t, s, sc, rs) for (t, s, sc), rs in groups.items()]
    by_pair: dict[tuple[str, str], list[CellMetrics]] = defaultdict(list)
    for c in cells:
        by_pair[(c.setting, c.scorer)].append(c)
    for (setting, scorer), group in by_pair.items():
        per_task = [[float(r.correct) for r in groups[(c.task, setting, scorer)] if r.answered] for c in group]
        cells.append(_average(setting, scorer, group, macro_bootstrap_ci(per_task)))
    return cells


def macro_bootstrap_ci(groups: list[list[float]], n_resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Percentile CI of the mean of group means, resampling within each group."""
    groups = [np.asarray(g) for g in groups if len(g)]
    if not groups:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.zeros(n_resamples)
    for g in groups:
        means += g[rng.integers(0, len(g), size=(n_resamples, len(g)))].mean(axis=1)
    means /= len(groups)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _average(setting: str, scorer: str, cells: list[CellMetrics], ci: tuple[float, float]) -> CellMetrics:
    def mean(field: str) -> float:
        values = [getattr(c, field) for c in cells if not math.isnan(getattr(c, field))]
        return float(np.mean(values)) if values else math.nan

    # An average over fewer tasks than the row has is not the papers' Avg.: leave it empty.
    incomplete = any(math.isnan(c.accuracy) for c in cells)

    return CellMetrics(
        task=AVERAGE,
        setting=setting,
        scorer=scorer,
        n=sum(c.n for c in cells),
        accuracy=math.nan if incomplete else mean("accuracy"),
        ci_low=math.nan if incomplete else ci[0],
        ci_high=math.nan if incomplete else ci[1],
        unparsed_rate=mean("unparsed_rate"),
        truncation_rate=mean("truncation_rate"),
        errors=sum(c.errors for c in cells),
        missing=sum(c.missing for c in cells),
        ece=mean("ece"),
        brier=mean("brier"),
        mean_confidence=mean("mean_confidence"),
    )


def write_scores(run_dir: Path, results: list[SampleResult], cells: list[CellMetrics]) -> None:
    run_dir = Path(run_dir)
    with open(run_dir / RESULTS, "w", encoding="utf-8") as f:
        for r in results:
            f.write(json.dumps(asdict(r), ensure_ascii=False) + "\n")
    (run_dir / SUMMARY).write_text(json.dumps([asdict(c) for c in cells], indent=1, allow_nan=True) + "\n")


def rescore(run_dir: Path) -> tuple[list[SampleResult], list[CellMetrics]]:
    """Score a run folder from its stored responses and write ``results.jsonl`` + ``summary.json``."""
    results = score_run(run_dir)
    cells = summarize(results)
    write_scores(run_dir, results, cells)
    return results, cells
