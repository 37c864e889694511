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


def _picture(path, shade: int) -> str:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (shade, 0, 0)).save(path, format="PNG")
    return path.name


def test_content_duplicates_are_dropped_keeping_the_first(tmp_path):
    from mmctx.data.sources.build import drop_content_duplicates

    _picture(tmp_path / "a.png", 10)
    _picture(tmp_path / "copy-of-a.png", 10)  # the same picture under another name
    _picture(tmp_path / "b.png", 200)

    def mcqa(sid, image="a.png", **fields):
        base = {"task": "object_recognition", "source": "GVTBench", "format": "mcqa", "images": [image],
                "question": "Does cup exist in the image?", "choices": ["Yes", "No"], "answer": "Yes"}  # fmt: skip
        return Sample(**{**base, "id": sid, **fields})

    pool = [
        mcqa("gvt/0"),
        mcqa("gvt/1"),  # a repeated record
        mcqa("gvt/2", image="copy-of-a.png", question="Does  cup exist in the image? "),  # same bytes, spacing
        mcqa("gvt/3", choices=["No", "Yes"]),  # the same options in another order
        mcqa("gvt/4", answer="No"),  # another answer: a different item
        mcqa("gvt/5", image="b.png"),  # another picture
        mcqa("gvt/6", question="Does clock exist in the image?"),
        mcqa("gvt/7", task="counting"),  # another task's pool: never shown beside the first
    ]
    kept, duplicates = drop_content_duplicates(pool, tmp_path)
    assert [s.id for s in kept] == ["gvt/0", "gvt/4", "gvt/5", "gvt/6", "gvt/7"]
    assert duplicates == {"gvt/0": ["gvt/1", "gvt/2", "gvt/3"]}


def test_caption_foil_and_binary_duplicates_compare_their_own_text(tmp_path):
    from mmctx.data.sources.build import drop_content_duplicates

    _picture(tmp_path / "a.png", 10)
    pair = {"task": "spatial_relations", "source": "VALSE", "format": "caption_foil", "images": ["a.png"]}
    statement = {"task": "spatial_relations", "source": "VSR", "format": "binary", "images": ["a.png"],
                 "choices": ["Yes", "No"], "answer": "Yes"}  # fmt: skip
    pool = [
        Sample(id="v/0", choices=["A cat on a mat.", "A mat on a cat."], answer="A cat on a mat.", **pair),
        Sample(id="v/1", choices=["A cat on a mat.", "A mat on a cat."], answer="A mat on a cat.", **pair),
        Sample(id="s/0", statement="The cat is on the mat.", **statement),
        Sample(id="s/1", statement="The cat is on the mat.", **statement),
        Sample(id="s/2", statement="The cat is under the mat.", **statement),
    ]
    kept, duplicates = drop_content_duplicates(pool, tmp_path)
    assert [s.id for s in kept] == ["v/0", "v/1", "s/0", "s/2"]
    assert duplicates == {"s/0": ["s/1"]}
