"""CLBench-V's subsets: the data table loads into the same records, in the same order."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from mmctx.data.clbench.suite import SUBSETS

EXPECTED = Path(__file__).parent / "data" / "clbench_subsets.json"  # the suite as the paper's Table 1 gives it


def test_subsets_keep_their_order_and_values():
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert [dataclasses.asdict(s) for s in SUBSETS] == expected
    assert len(SUBSETS) == 14
