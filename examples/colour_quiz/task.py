"""A few-shot task from JSONL files, with its own instruction wording: the whole task is this file.

mmctx eval examples/colour_quiz/task.py --model builtin:shapes-vlm --out runs/colour-quiz
"""

from pathlib import Path

from mmctx import Task, jsonl_task, task

HERE = Path(__file__).parent


@task(name="colour-quiz")
def colour_quiz() -> Task:
    return jsonl_task(
        "colour-quiz",
        HERE / "items.jsonl",  # queries: id, images, question, choices, answer
        demos=HERE / "demos.jsonl",  # the pool random demos are drawn from
        instruction="Name the colour that fills the image: answer with the option's letter only.",
        shots=(2, 4),
    )
