"""Turning generator draws into `Sample` records and PNG files: the sample pool."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mmctx.data.shapes.draws import Draw
from mmctx.data.shapes.tasks import GENERATORS, Generator, Item, task_formats
from mmctx.data.shapes.world import Retry, png_bytes, render
from mmctx.schema import TASKS, Sample

SOURCE = "shapes-world"
MAX_ATTEMPTS = 1000  # every generator succeeds within a few dozen; this only guards against a broken one


def sample_id(task: str, fmt: str, index: int) -> str:
    return f"shapes/{task}/{fmt}/{index:05d}"


def image_rel_path(task: str, fmt: str, index: int) -> str:
    return f"images/{task}/{fmt}_{index:05d}.png"


def draw_item(generate: Generator, draw: Draw) -> Item:
    for _ in range(MAX_ATTEMPTS):
        try:
            return generate(draw)
        except Retry:
            continue
    raise RuntimeError(f"{draw.key}: no usable scene for index {draw.index} in {MAX_ATTEMPTS} attempts")


def make_sample(task: str, fmt: str, index: int, seed: int, out: Path) -> Sample:
    """Sample ``index`` of the (task, format) generator, with its image written under ``out``."""
    item = draw_item(GENERATORS[(task, fmt)], Draw(seed, f"{task}/{fmt}", index))
    rel = image_rel_path(task, fmt, index)
    path = Path(out) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(render(item.scene)))
    return Sample(
        id=sample_id(task, fmt, index),
        task=task,
        source=SOURCE,
        format=fmt,  # type: ignore[arg-type]  # registered formats are schema formats
        images=[rel],
        question=item.question,
        statement=item.statement,
        choices=item.choices,
        answer=item.answer,
        meta={**item.scene.to_dict(), "query": item.query, "seed": seed, "index": index},
    )


def check_tasks(tasks: Sequence[str] | None) -> None:
    unknown = [t for t in tasks or () if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; known: {list(TASKS)}")


def generate_pool(out: Path, per_task: int, seed: int = 0, tasks: list[str] | None = None) -> list[Sample]:
    """``per_task`` samples from every (task, format) generator, images written under ``out/images``."""
    check_tasks(tasks)
    return [
        make_sample(task, fmt, index, seed, Path(out)) for task, fmt in task_formats(tasks) for index in range(per_task)
    ]
