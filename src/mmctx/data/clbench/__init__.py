"""CLBench-V: the suite registry, the suite loader, a toy suite, and the two construction pipelines."""

from mmctx.data.clbench.loader import load_clbench, write_clbench
from mmctx.data.clbench.suite import SUBSETS, Subset, get_subset

__all__ = ["SUBSETS", "Subset", "get_subset", "load_clbench", "write_clbench"]
