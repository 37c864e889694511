"""The public API: `mmctx.evaluate` for each task family, `score`, `report` (reads only), `view`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import mmctx
from mmctx import api
from mmctx.schema import BenchmarkError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "colour_quiz"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_evaluate_a_benchmark_folder_matches_the_run_module(shapes_bench, tmp_path):
    """The API over a benchmark folder is the run the lower layer makes: same requests, same scores."""
    from mmctx.tasks.fewshot import evaluate as run_evaluate

    result = mmctx.evaluate(shapes_bench, out=tmp_path / "api", grid=["0-shot", "4-random"], scorers=["ppl"], limit=1)
    direct = run_evaluate(shapes_bench, "builtin:shapes-vlm", tmp_path / "direct", settings="0-shot,4-random",
                          scorers="ppl", limit=1, show_progress=False)  # fmt: skip
    assert result.kind == "fewshot" and result.model == "builtin:shapes-vlm"
    assert [(r.request_id, r.outcome) for r in result.results] == [(r.request_id, r.outcome) for r in direct.results]
    assert (tmp_path / "api" / "requests.jsonl").read_text() == (tmp_path / "direct" / "requests.jsonl").read_text()
    assert "| builtin:shapes-vlm |" in result.table()


def test_a_jsonl_task_in_one_file_runs_with_its_own_wording_and_resumes(tmp_path):
    task_file = EXAMPLE / "task.py"
    assert len(task_file.read_text().splitlines()) <= 25  # the extension cost the README promises
    first = mmctx.evaluate(task_file, out=tmp_path / "run", scorers=["generate"])
    prompts = (tmp_path / "run" / "requests.jsonl").read_text()
    assert "Name the colour that fills the image" in prompts
    assert "Answer with the option's letter from the given choices directly." not in prompts
    assert first.manifest.config["preset"] == "fewmmbench+colour-quiz"
    assert first.manifest.config["settings"] == ["0-shot", "2-random", "4-random"]
    assert len(first.results) == 8 * 3
    # Demos come from the demo file, are drawn per query, and a query is never among its own demos.
    requests = [json.loads(line) for line in prompts.splitlines()]
    four = [r for r in requests if r["setting"] == "4-random"]
    assert all(len(r["demo_ids"]) == 4 and all(d.startswith("d") for d in r["demo_ids"]) for r in four)
    assert len({tuple(r["demo_ids"]) for r in four}) > 1
    again = mmctx.evaluate(task_file, out=tmp_path / "run", scorers=["generate"])
    assert again.stats.done == 0 and again.stats.cached == first.stats.planned
    assert [r.outcome for r in again.results] == [r.outcome for r in first.results]


def test_a_bad_jsonl_record_is_named_before_any_model_loads(tmp_path):
    folder = tmp_path / "items"
    shutil.copytree(EXAMPLE, folder)
    lines = (folder / "items.jsonl").read_text().splitlines()
    bad = json.loads(lines[2])
    bad["answer"] = "purple"
    lines[2] = json.dumps(bad)
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(BenchmarkError) as err:
        mmctx.evaluate(folder / "task.py", model="builtin:no-such-model", out=tmp_path / "run")
    assert "items.jsonl[line 3].answer" in str(err.value) and "purple" in str(err.value)


def test_a_plain_jsonl_path_is_a_task_and_unknown_names_are_listed(tmp_path):
    task = api.resolve_task(EXAMPLE / "items.jsonl")
    assert task.kind == "fewshot" and task.grid == ("0-shot", "4-random")  # 8 items: 7 candidates each
    with pytest.raises(FileNotFoundError, match="shapes-world"):
        api.resolve_task("no-such-task")
    with pytest.raises(TypeError, match="takes no option"):
        api.resolve_task("shapes-world", colour="red")


def test_a_loaded_backend_can_be_the_model(shapes_bench, tmp_path):
    from mmctx.models import load_backend

    backend = load_backend("builtin:shapes-vlm")
    result = mmctx.evaluate(
        shapes_bench, model=backend, out=tmp_path / "run", grid=["0-shot"], scorers=["ppl"], limit=1
    )
    assert result.model == "builtin:shapes-vlm" and len(result.results) == 9


def test_context_task_evaluate_score_report_view(tmp_path):
    """CLBench-V's toy suite through the same API; report and view read the folder and write nothing to it."""
    run = tmp_path / "ctx"
    subset = ["ZeroBench", "MIRBench"]
    result = mmctx.evaluate("clbench-v-toy", out=run, tasks=subset, context=api.ContextOptions(max_new_tokens=16))
    assert result.kind == "context" and {r["subset"] for r in result.results} == set(subset)
    assert "L0" in result.table() or "L1" in result.table()
    with pytest.raises(ValueError, match="context-learning task"):
        mmctx.evaluate("clbench-v-toy", out=tmp_path / "other", grid=["0-shot"])
    rescored = api.score(run)
    assert [r["outcome"] for r in rescored.results] == [r["outcome"] for r in result.results]
    before = _snapshot(run)
    text = api.report([run], out=tmp_path / "report")
    index = api.view([run], tmp_path / "site")
    assert _snapshot(run) == before
    assert text == result.table() and index.name == "index.html" and index.exists()


def test_package_names_stay_the_api_functions_after_the_layers_load():
    """`mmctx.score` and `mmctx.report` are the API functions even once every subpackage is imported
    (a subpackage of the same name would replace the attribute on first import)."""
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(mmctx.__path__, "mmctx."):
        if not info.name.startswith(("mmctx.models.vllm", "mmctx.run.distributed", "mmctx.__main__")):
            importlib.import_module(info.name)
    for name in ("evaluate", "score", "report", "view"):
        assert getattr(mmctx, name) is getattr(api, name), name


def test_a_comma_string_where_a_list_belongs_is_refused_with_the_list_to_write(tmp_path):
    with pytest.raises(TypeError, match=r"grid=\['0-shot', '8-similar'\]"):
        mmctx.evaluate("shapes-world", out=tmp_path / "run", grid="0-shot,8-similar")
    with pytest.raises(TypeError, match="scorers"):
        mmctx.evaluate("shapes-world", out=tmp_path / "run", scorers="ppl")
    assert not (tmp_path / "run").exists()


def test_a_resumed_folder_refuses_changed_items_before_touching_its_data(tmp_path):
    folder = tmp_path / "items"
    shutil.copytree(EXAMPLE, folder)
    run = tmp_path / "run"
    mmctx.evaluate(folder / "items.jsonl", out=run, scorers=["ppl"], grid=["0-shot"])
    kept = _snapshot(run / "dataset")
    lines = (folder / "items.jsonl").read_text().splitlines()
    edited = json.loads(lines[0])
    edited["question"] += " Look again."
    lines[0] = json.dumps(edited)
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(RuntimeError, match="holds a run on other data"):
        mmctx.evaluate(folder / "items.jsonl", out=run, scorers=["ppl"], grid=["0-shot"])
    assert _snapshot(run / "dataset") == kept and not (run / "dataset.check").exists()


def test_a_changed_task_option_is_a_different_run(tmp_path):
    run = tmp_path / "run"
    args = dict(out=run, grid=["0-shot"], scorers=["ppl"], limit=1)
    mmctx.evaluate("shapes-world", task_options={"queries_per_task": 1}, **args)
    assert mmctx.evaluate("shapes-world", task_options={"queries_per_task": 1}, **args).stats.done == 0
    with pytest.raises(RuntimeError, match="holds a run on other data"):
        mmctx.evaluate("shapes-world", task_options={"queries_per_task": 1, "seed": 7}, **args)


@pytest.mark.parametrize(
    ("task", "arguments", "named"),
    [
        ("shapes-world", {"judge": "builtin:shapes-vlm"}, "judge"),
        ("shapes-world", {"context": api.ContextOptions(repair=True)}, "context"),
        ("clbench-v-toy", {"seed": 3}, "seed"),
        ("clbench-v-toy", {"demo_orders": 2, "grid": ["0-shot"]}, "grid, demo_orders"),
    ],
)
def test_an_argument_of_the_other_kind_of_task_is_refused_not_ignored(tmp_path, task, arguments, named):
    with pytest.raises(ValueError, match=f"only: .*{named}"):
        mmctx.evaluate(task, out=tmp_path / "run", **arguments)
    assert not (tmp_path / "run").exists()


def test_a_small_jsonl_runs_on_its_default_grid(tmp_path):
    result = mmctx.evaluate(EXAMPLE / "items.jsonl", out=tmp_path / "run", scorers=["ppl"])
    assert result.manifest.config["settings"] == ["0-shot", "4-random"] and len(result.results) == 16
    with pytest.raises(BenchmarkError, match="needs 8 demos, has 7"):
        mmctx.evaluate(EXAMPLE / "items.jsonl", out=tmp_path / "eight", scorers=["ppl"], grid=["8-random"])


def test_a_misspelt_sub_task_is_named_not_run_empty(shapes_bench, tmp_path):
    with pytest.raises(ValueError, match=r"unknown task\(s\) \['countin'\]; the benchmark has \[.*'counting'"):
        mmctx.evaluate(shapes_bench, out=tmp_path / "run", grid=["0-shot"], tasks=["countin"])
    with pytest.raises(RuntimeError, match=r"unknown subset\(s\) \['ZeroBnch'\]; the suite has"):
        mmctx.evaluate("clbench-v-toy", out=tmp_path / "ctx", tasks=["ZeroBnch"])


def test_rescoring_a_context_run_needs_no_judge_when_its_cache_holds_the_verdicts(tmp_path):
    run = tmp_path / "ctx"
    subset = ["CL-Bench-Table", "ZeroBench"]  # one judged subset, one rule-scored
    first = mmctx.evaluate("clbench-v-toy", out=run, tasks=subset, judge="builtin:shapes-vlm",
                           context=api.ContextOptions(max_new_tokens=16))  # fmt: skip
    judged = [r for r in first.results if r["subset"] == "CL-Bench-Table"]
    assert judged and all(r["outcome"] in ("scored", "judge_error") for r in judged)
    again = mmctx.score(run)  # no judge given: the recorded one answers from the cache
    # Equal rows, the judge's stored replies included: they came from the cache, not a model.
    assert again.results == first.results and any("replies" in r["detail"] for r in judged)
    assert again.manifest.fields["judge"] == first.manifest.fields["judge"]
    (run / "judges.sqlite").unlink()  # with the cache gone, a verdict is an error naming the way out
    emptied = mmctx.score(run)
    lost = [r for r in emptied.results if r["subset"] == "CL-Bench-Table"]
    assert all(r["outcome"] == "judge_error" for r in lost)
    assert "score again with the judge given" in json.dumps(lost)
