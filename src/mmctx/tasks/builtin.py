"""The built-in tasks: the embedded shapes-world default, a FewMMBench benchmark folder, a
CLBench-V suite (and its offline toy suite), and any JSONL of multiple-choice items with images."""

from __future__ import annotations

from pathlib import Path

from mmctx.run.plan import DEMO_LIMITS
from mmctx.tasks.jsonl import jsonl_task
from mmctx.tasks.task import Task, task


@task(name="shapes-world")
def shapes_world(queries_per_task: int = 4, seed: int = 0) -> Task:
    """The embedded default: shapes-world's nine tasks, generated offline, over the paper's grid."""

    def prepare(work: Path) -> Path:
        from mmctx.data import shapes

        folder = work / "benchmark"
        if not (folder / "benchmark.json").exists():
            shapes.build_benchmark(folder, queries_per_task=queries_per_task, seed=seed)
        return folder

    return Task("shapes-world", "fewshot", prepare, limits=DEMO_LIMITS, description=shapes_world.__doc__ or "")


@task
def fewmmbench(path: str | Path) -> Task:
    """A FewMMBench-layout benchmark folder (`mmctx build fewmmbench`, `mmctx import-fewmmbench`)."""
    folder = Path(path)
    return Task(f"fewmmbench:{folder.name}", "fewshot", lambda work: folder, description=fewmmbench.__doc__ or "")


@task(name="clbench-v")
def clbench_v(path: str | Path) -> Task:
    """A CLBench-V suite: a ``.jsonl`` file or a folder of them (see `mmctx.data.clbench.loader`)."""
    suite = Path(path)
    return Task(f"clbench-v:{suite.name}", "context", lambda work: suite, report="clbench", grid=(), scorers=())


@task(name="clbench-v-toy")
def clbench_v_toy() -> Task:
    """Two toy items per CLBench-V subset, written offline: the context-learning pipeline end to end."""

    def prepare(work: Path) -> Path:
        from mmctx.data.clbench.toy import write_toy_suite

        suite = work / "suite"
        if not (suite / "samples.jsonl").exists():
            write_toy_suite(suite)
        return suite

    return Task("clbench-v-toy", "context", prepare, report="clbench", grid=(), scorers=())


@task
def jsonl(path: str | Path, demos: str | Path | None = None, instruction: str | None = None) -> Task:
    """Any JSONL of multiple-choice items with images (see `mmctx.tasks.jsonl`)."""
    return jsonl_task(Path(path).stem, path, demos=demos, instruction=instruction)
