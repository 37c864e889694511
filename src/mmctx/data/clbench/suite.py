"""The CLBench-V suite: its 14 subsets, each with level, template, answer format and evaluator.

From the paper's Table 1 (counts, levels, task forms, evaluation) and appendix B (templates and
answer-format suffixes). ``table_level`` is the level a subset counts towards in the level
aggregation: the paper assigns MIRBench (L0–L1) to L0 and PRISMM-Bench (L1–L2) to L1.

Names here are keys, not code: ``template`` and ``suffix`` index `mmctx.prompts.context`,
``evaluator`` indexes `mmctx.score.evaluators`. Data never imports either.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subset:
    name: str
    level: str  # as in Table 1, boundary cases included
    table_level: str  # where Tables 2 and 3 count it: L0, L1 or L2
    paper_n: int  # instances in the paper's release
    task_form: str
    template: str
    suffix: str  # answer-format suffix key ("" for none)
    evaluator: str
    answer_type: str
    domain: str


SUBSETS: tuple[Subset, ...] = (
    Subset(
        "ReasonMap-Short",
        "L0",
        "L0",
        103,
        "Subway map route planning with short queries",
        "reasonmap",
        "route",
        "route",
        "route",
        "spatial",
    ),
    Subset(
        "ReasonMap-Long",
        "L0",
        "L0",
        101,
        "Subway map route planning with long queries",
        "reasonmap",
        "route",
        "route",
        "route",
        "spatial",
    ),
    Subset(
        "ReasonMap-Plus",
        "L0",
        "L0",
        37,
        "Subway map counting, boolean, and MCQ tasks",
        "reasonmap_plus",
        "short",
        "reasonmap_plus",
        "string",
        "spatial",
    ),
    Subset(
        "Insight-O3",
        "L0",
        "L0",
        145,
        "High-resolution visual search and multi-hop MCQ",
        "options",
        "mcq",
        "choice",
        "option",
        "web-VQA",
    ),
    Subset(
        "ZeroBench", "L0", "L0", 43, "Hard visual question answering", "zerobench", "", "zerobench", "string", "web-VQA"
    ),
    Subset("CourtSI", "L0", "L0", 645, "Sports spatial intelligence", "plain", "short", "courtsi", "number", "spatial"),
    Subset(
        "MIRBench",
        "L0–L1",
        "L0",
        1063,
        "Multi-image scientific figure reasoning MCQ",
        "mirbench",
        "",
        "choice",
        "option",
        "science",
    ),
    Subset("Pix2Fact", "L1", "L1", 43, "Multimodal visual fact QA", "pix2fact", "", "semantic", "string", "web-VQA"),
    Subset(
        "MMLongBench-Pic",
        "L1",
        "L1",
        78,
        "Long-context multimodal QA with page images",
        "plain",
        "short",
        "mmlongbench",
        "string",
        "long-document",
    ),
    Subset(
        "BrowseComp-V3",
        "L1",
        "L1",
        57,
        "Multimodal browsing final-answer tasks",
        "browsecomp",
        "short",
        "semantic",
        "string",
        "web-VQA",
    ),
    Subset(
        "Financial Report ROE",
        "L1",
        "L1",
        206,
        "Multimodal financial report analysis",
        "roe",
        "roe",
        "roe",
        "number",
        "finance",
    ),
    Subset(
        "PRISMM-Bench",
        "L1–L2",
        "L1",
        245,
        "Scientific paper inconsistency QA",
        "prismm",
        "mcq",
        "choice",
        "option",
        "science",
    ),
    Subset(
        "CL-Bench-Table",
        "L2",
        "L2",
        96,
        "Context learning with image-rendered tables",
        "clbench",
        "",
        "rubric",
        "rubrics",
        "rules",
    ),
    Subset(
        "Paper Conclusion",
        "L2",
        "L2",
        581,
        "Scientific paper conclusion inference",
        "paper_conclusion",
        "",
        "conclusions",
        "conclusions",
        "science",
    ),
)

LEVEL_ORDER: tuple[str, ...] = ("L0", "L1", "L2")
_BY_NAME = {s.name: s for s in SUBSETS}
_BY_KEY = {s.name.casefold().replace(" ", "-"): s for s in SUBSETS}


def get_subset(name: str) -> Subset:
    """A subset by its paper name, case- and space-insensitively (``financial-report-roe`` works)."""
    found = _BY_NAME.get(name) or _BY_KEY.get(name.casefold().replace(" ", "-"))
    if found is None:
        raise KeyError(f"unknown CLBench-V subset {name!r}; known: {[s.name for s in SUBSETS]}")
    return found


def subset_or_none(name: str) -> Subset | None:
    try:
        return get_subset(name)
    except KeyError:
        return None


def table_level(sample_level: str, subset: str) -> str:
    """The level a sample counts towards: its subset's, else its own (a boundary case's lower end)."""
    known = subset_or_none(subset)
    if known is not None:
        return known.table_level
    return sample_level.split("–")[0] if sample_level else ""
