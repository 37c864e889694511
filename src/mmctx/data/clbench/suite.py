"""The CLBench-V suite: its 14 subsets, each with level, template, answer format and evaluator.

The subsets are a data table, ``subsets.csv`` next to this module (one row per subset, one
column per `Subset` field), from the paper's Table 1 (counts, levels, task forms, evaluation) and
appendix B (templates and answer-format suffixes). ``table_level`` is the level a subset counts
towards in the level aggregation: the paper assigns MIRBench (L0–L1) to L0 and PRISMM-Bench
(L1–L2) to L1.

Names here are keys, not code: ``template`` and ``suffix`` index `mmctx.prompts.context`,
``evaluator`` indexes `mmctx.scoring.evaluators`. Data never imports either (a test cross-checks
the table against both); ``answer_type`` is checked here against `mmctx.answers`, the layer below.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from importlib import resources

from mmctx.answers import ANSWER_TYPES


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


class SubsetTableError(ValueError):
    """The subsets table is malformed; the message names the table, row and column."""


LEVEL_ORDER: tuple[str, ...] = ("L0", "L1", "L2")
# A boundary case spans two neighbouring levels and counts towards one of them (its table_level).
LEVELS: tuple[str, ...] = (*LEVEL_ORDER, "L0–L1", "L1–L2")
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Subset))
_OPTIONAL = ("suffix",)  # the one column that may be empty: a subset asked without a suffix


def _row_problems(row: dict[str, str]) -> list[str]:
    problems = [f"{col}: empty" for col in COLUMNS if col not in _OPTIONAL and not row[col].strip()]
    if row["level"] not in LEVELS:
        problems.append(f"level: {row['level']!r} is not one of {list(LEVELS)}")
    elif row["table_level"] not in row["level"].split("–"):
        problems.append(f"table_level: {row['table_level']!r} is not within level {row['level']!r}")
    if not row["paper_n"].isdigit() or int(row["paper_n"]) == 0:
        problems.append(f"paper_n: {row['paper_n']!r} is not a positive count")
    if row["answer_type"] not in ANSWER_TYPES:
        problems.append(f"answer_type: {row['answer_type']!r} is not a registered answer type {list(ANSWER_TYPES)}")
    return problems


def read_subset_table(text: str, origin: str = "subsets.csv") -> tuple[Subset, ...]:
    """The subsets a CSV table lists, in its row order; ``#`` lines are comments.

    Every problem is reported at once, by file line and column.
    """
    # Comment lines become blank lines, which are skipped: line numbers stay the file's.
    reader = csv.reader(["" if line.startswith("#") else line for line in text.splitlines()], strict=True)
    header = next((cells for cells in reader if cells), [])
    if tuple(header) != COLUMNS:
        raise SubsetTableError(f"{origin}: the header must be {','.join(COLUMNS)}; found {','.join(header)}")
    subsets, problems, seen = [], [], set()
    for cells in reader:
        if not cells:
            continue
        where = f"line {reader.line_num} ({cells[0]})"
        if len(cells) != len(COLUMNS):
            problems.append(f"{where}: {len(cells)} cells; the header names {len(COLUMNS)}")
            continue
        row = dict(zip(COLUMNS, cells))
        found = _row_problems(row) + (["name: listed twice"] if row["name"] in seen else [])
        problems += [f"{where}: {p}" for p in found]
        seen.add(row["name"])
        if not found:
            subsets.append(Subset(**{**row, "paper_n": int(row["paper_n"])}))
    if problems:
        raise SubsetTableError(f"{origin}:\n" + "\n".join(f"  {p}" for p in problems))
    return tuple(subsets)


SUBSETS: tuple[Subset, ...] = read_subset_table(
    resources.files(__package__).joinpath("subsets.csv").read_text(encoding="utf-8")
)
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
