"""What `mmctx build fewmmbench` reports: the composition table, and what a build leaves out."""

from __future__ import annotations

from mmctx.data.sources.build import composition
from mmctx.schema import Sample


def _sample(sid: str, source: str = "VALSE", **fields) -> Sample:
    base = {"task": "counting", "format": "caption_foil", "choices": ["two dogs", "three dogs"], "answer": "two dogs"}
    return Sample(**{**base, "id": sid, "source": source, "images": [f"{sid}.jpg"], **fields})


def test_composition_counts_similar_and_random_only_demos_apart():
    # FewMMBench's Table 2 counts the demonstration set without the random samples.
    queries = [
        _sample("q1", demo_keys={"similar": ["d1", "d3"], "random": ["d2", "d4"]}),
        _sample("q2", demo_keys={"similar": ["d4"], "random": ["d1", "d2"]}),
    ]
    demos = [_sample(d) for d in ("d1", "d2", "d3")] + [_sample("d4", source="VSR")]
    pool = queries + demos + [_sample("unused")]
    rows = {row["source"]: row for row in composition(queries, demos, pool)}
    assert rows["VALSE"] == {
        "task": "counting", "kind": "caption_foil", "source": "VALSE",
        "pool": 6, "queries": 2, "similar_demos": 2, "random_only_demos": 1,
    }  # fmt: skip
    # d4 is one query's similar demo and another's random one: counted once, as similar.
    assert (rows["VSR"]["similar_demos"], rows["VSR"]["random_only_demos"]) == (1, 0)
