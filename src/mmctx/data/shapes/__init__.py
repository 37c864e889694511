"""shapes-world: a seeded synthetic benchmark for all nine FewMMBench task types, exact by construction.

Scenes of coloured shapes are drawn with Pillow from a per-sample RNG, so the whole pipeline
(prompting, scoring, reporting) can run offline on a CPU against ground truth that cannot be wrong.

    from mmctx.data.shapes import build_benchmark
    bench = build_benchmark(Path("runs/shapes"))   # queries, demos, images, benchmark.json
"""

from mmctx.data.shapes.benchmark import build_benchmark
from mmctx.data.shapes.pool import generate_pool
from mmctx.data.shapes.rationale import scene_rationale
from mmctx.data.shapes.tasks import GENERATORS, task_formats
from mmctx.data.shapes.world import COLOURS, FRAME, SHAPES, SIZES, Scene, render

__all__ = [
    "COLOURS",
    "FRAME",
    "GENERATORS",
    "SHAPES",
    "SIZES",
    "Scene",
    "build_benchmark",
    "generate_pool",
    "render",
    "scene_rationale",
    "task_formats",
]
