"""The task registry: decorator, built-in tasks, task files, and entry points of other packages."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mmctx.tasks import Task, TaskNotFound, get_task, load_task_file, task, task_names

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "colour_quiz"


def test_builtin_tasks_are_registered_with_their_kinds():
    names = task_names()
    assert {"shapes-world", "fewmmbench", "clbench-v", "clbench-v-toy", "jsonl"} <= set(names)
    assert get_task("shapes-world").kind == "fewshot"
    assert get_task("clbench-v-toy").report == "clbench"
    with pytest.raises(TaskNotFound, match="unknown task 'nope'"):
        get_task("nope")


def test_the_decorator_refuses_a_second_task_under_one_name():
    @task(name="registry-test-once")
    def first() -> Task:
        return get_task("shapes-world")

    assert "registry-test-once" in task_names()
    with pytest.raises(ValueError, match="registered twice"):

        @task(name="registry-test-once")
        def second() -> Task:
            return get_task("shapes-world")


def test_a_file_with_two_tasks_needs_a_name(tmp_path):
    file = tmp_path / "two.py"
    file.write_text(
        textwrap.dedent(
            f"""
            from mmctx import jsonl_task, task

            @task
            def easy():
                return jsonl_task("easy", {str(EXAMPLE / "items.jsonl")!r})

            @task
            def hard():
                return jsonl_task("hard", {str(EXAMPLE / "items.jsonl")!r}, instruction="Think hard.")
            """
        )
    )
    with pytest.raises(TaskNotFound, match="defines 2 tasks"):
        get_task(str(file))
    assert get_task(f"{file}@hard").name == "hard"
    # A file's tasks stay its own: they do not become global names.
    assert "hard" not in task_names()
    with pytest.raises(TaskNotFound, match="no task 'medium'"):
        load_task_file(file, "medium")


def test_another_package_adds_a_task_by_entry_point(tmp_path):
    """A real installed-distribution layout (dist-info with entry_points.txt) on sys.path."""
    (tmp_path / "colour_plugin.py").write_text(
        textwrap.dedent(
            f"""
            from mmctx import jsonl_task

            def colours(shots=(2,)):
                return jsonl_task("plugin-colours", {str(EXAMPLE / "items.jsonl")!r}, shots=tuple(shots))
            """
        )
    )
    info = tmp_path / "colour_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: colour-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[mmctx.tasks]\nplugin-colours = colour_plugin:colours\n")
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from mmctx.tasks import get_task, task_names
        assert "plugin-colours" in task_names(), task_names()
        t = get_task("plugin-colours", shots=[3])
        print(t.name, t.grid)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "plugin-colours ('0-shot', '3-random')"


def test_task_options_are_checked_against_the_factory_before_the_task_runs(tmp_path):
    with pytest.raises(TypeError, match=r"option queries_per_task: expected int, got 'abc'"):
        get_task("shapes-world", queries_per_task="abc")
    with pytest.raises(TypeError, match="expected int, got True"):
        get_task("shapes-world", queries_per_task=True)
    with pytest.raises(TypeError, match=r"needs the option\(s\) \['path'\]"):
        get_task("jsonl")
    assert get_task("jsonl", path=str(EXAMPLE / "items.jsonl")).kind == "fewshot"  # a path may be a string


def test_a_task_file_that_fails_to_load_is_named_with_its_line(tmp_path):
    from mmctx.tasks.task import TaskFileError

    broken = tmp_path / "broken.py"
    broken.write_text("from mmctx.tasks import task\n\n\ndef f(:\n")
    with pytest.raises(TaskFileError, match=r"broken.py \(line 4\).*SyntaxError"):
        get_task(str(broken))
    raising = tmp_path / "raising.py"
    raising.write_text("raise RuntimeError('no data here')\n")
    with pytest.raises(TaskFileError, match="RuntimeError: no data here"):
        get_task(str(raising))


def test_images_must_be_a_list_of_paths(tmp_path):
    from mmctx.schema import BenchmarkError
    from mmctx.tasks.jsonl import read_items

    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "q0", "images": "a.png", "question": "?", "choices": ["a", "b"], "answer": "a"}\n')
    with pytest.raises(BenchmarkError, match=r"items.jsonl.*line 1.*images.*list of image paths"):
        read_items(items, "t")
