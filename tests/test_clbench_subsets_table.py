"""CLBench-V's subsets: the data table loads into the same records, in the same order, and every
key it names exists where the suite's users look it up."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

import pytest

from mmctx.data.clbench.suite import COLUMNS, LEVEL_ORDER, SUBSETS, SubsetTableError, read_subset_table
from mmctx.prompts.context import SUFFIXES, TEMPLATES
from mmctx.scoring.evaluators import evaluator_names, get_evaluator

EXPECTED = Path(__file__).parent / "data" / "clbench_subsets.json"  # the suite as the paper's Table 1 gives it
TABLE = resources.files("mmctx.data.clbench").joinpath("subsets.csv").read_text(encoding="utf-8")
HEADER = ",".join(COLUMNS)
GOOD_ROW = "Toy,L0,L0,3,A toy task,plain,short,semantic,string,toys"


def test_subsets_keep_their_order_and_values():
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert [dataclasses.asdict(s) for s in SUBSETS] == expected
    assert len(SUBSETS) == 14
    assert all(isinstance(s.paper_n, int) for s in SUBSETS)


def test_every_key_in_the_table_exists_in_its_registry():
    """Templates and suffixes in `mmctx.prompts.context`, evaluators in `mmctx.scoring.evaluators`."""
    known_evaluators = set(evaluator_names())
    for s in SUBSETS:
        assert s.template in TEMPLATES, s.name
        assert s.suffix in SUFFIXES, s.name
        assert s.evaluator in known_evaluators, s.name
        # The evaluator grades the subset's answer type.
        declared = {getattr(k, "name", k) for k in get_evaluator(s.evaluator).answer_types}
        assert s.answer_type in declared, s.name
        assert s.table_level in LEVEL_ORDER


def test_a_table_in_another_order_loads_in_that_order():
    lines = TABLE.splitlines()
    header_at = lines.index(HEADER)
    swapped = lines[: header_at + 1] + [lines[header_at + 2], lines[header_at + 1]] + lines[header_at + 3 :]
    loaded = read_subset_table("\n".join(swapped))
    assert [s.name for s in loaded[:2]] == [SUBSETS[1].name, SUBSETS[0].name]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("Toy,L3,L0,3,A toy task,plain,short,semantic,string,toys", "level: 'L3' is not one of"),
        ("Toy,L0–L1,L2,3,A toy task,plain,short,semantic,string,toys", "table_level: 'L2' is not within level"),
        ("Toy,L0,L0,three,A toy task,plain,short,semantic,string,toys", "paper_n: 'three' is not a positive count"),
        ("Toy,L0,L0,0,A toy task,plain,short,semantic,string,toys", "paper_n: '0'"),
        ("Toy,L0,L0,3,A toy task,plain,short,semantic,strng,toys", "answer_type: 'strng' is not a registered"),
        ("Toy,L0,L0,3,A toy task,,short,semantic,string,toys", "template: empty"),
        ("Toy,L0,L0,3,A toy task,plain,short,semantic,string", "9 cells; the header names 10"),
        (f"{GOOD_ROW}\n{GOOD_ROW}", "name: listed twice"),
    ],
)
def test_a_bad_row_is_named_by_line_and_column(row, says):
    text = f"# a comment line\n{HEADER}\n{row}\n"
    with pytest.raises(SubsetTableError) as caught:
        read_subset_table(text, origin="mine.csv")
    message = str(caught.value)
    assert message.startswith("mine.csv:") and says in message
    assert "line 3 (Toy)" in message or "line 4 (Toy)" in message  # file lines, comments counted


def test_every_bad_row_is_reported_at_once_and_the_header_is_checked():
    text = f"{HEADER}\nA,L9,L0,1,x,plain,,semantic,string,d\nB,L0,L0,-1,x,plain,,semantic,string,d\n"
    message = str(pytest.raises(SubsetTableError, read_subset_table, text).value)
    assert "line 2 (A): level" in message and "line 3 (B): paper_n" in message
    with pytest.raises(SubsetTableError, match="the header must be"):
        read_subset_table(HEADER.replace("paper_n", "n") + f"\n{GOOD_ROW}\n")


def test_a_good_row_becomes_a_subset_record():
    (toy,) = read_subset_table(f"{HEADER}\n{GOOD_ROW}\n")
    assert toy == dataclasses.replace(SUBSETS[0], name="Toy", level="L0", table_level="L0", paper_n=3,
                                      task_form="A toy task", template="plain", suffix="short",
                                      evaluator="semantic", answer_type="string", domain="toys")  # fmt: skip
