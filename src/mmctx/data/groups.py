"""The unit curation works in: samples of one task and one FewMMBench kind (a *group*).

Caption/foil and binary verification items are one kind (both compare a statement with an
image), so their samples select and retrieve demos together; the data layer needs the same
grouping to report what a recipe yields before anything is curated.
"""

from __future__ import annotations

from collections import defaultdict

from mmctx.schema import Sample

KIND = {"mcqa": "mcqa", "caption_foil": "caption_foil", "binary": "caption_foil", "open": "open"}


def group_name(task: str, fmt: str) -> str:
    return f"{task}__{KIND.get(fmt, fmt)}"


def groups_of(samples: list[Sample]) -> dict[str, list[Sample]]:
    """Samples by (task, FewMMBench kind): the unit Graph Cut selects from."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[group_name(s.task, s.format)].append(s)
    return dict(sorted(groups.items()))
