"""Tasks: what a benchmark is and how it runs, found by name (see `mmctx.tasks.task`)."""

from mmctx.tasks import builtin  # noqa: F401  (registers the built-in tasks)
from mmctx.tasks.jsonl import jsonl_task
from mmctx.tasks.task import ENTRY_POINT_GROUP, Task, TaskKind, TaskNotFound, get_task, load_task_file, task, task_names

__all__ = [
    "ENTRY_POINT_GROUP",
    "Task",
    "TaskKind",
    "TaskNotFound",
    "get_task",
    "jsonl_task",
    "load_task_file",
    "task",
    "task_names",
]
