"""The `mmctx` commands, end to end, on shapes-world and a FewMMBench-layout fixture."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess

from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.data.disk import load_benchmark, read_samples, save_benchmark

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    return result


def test_shapes_pool_and_benchmark(tmp_path):
    r = invoke("shapes", "--out", tmp_path / "pool", "--per-task", 3, "--seed", 1)
    assert r.exit_code == 0, r.output
    pool = read_samples(tmp_path / "pool" / "pool.jsonl")
    assert len(pool) == 13 * 3
    assert all((tmp_path / "pool" / s.images[0]).is_file() for s in pool)
    r = invoke("shapes", "--out", tmp_path / "bench", "--benchmark", "--queries-per-task", 1, "--per-task", 20)
    assert r.exit_code == 0, r.output
    r = invoke("validate", tmp_path / "bench")
    assert r.exit_code == 0 and "ok" in r.output


def test_a_large_benchmark_needs_no_pool_size(tmp_path):
    # the pool defaults to the queries plus room for their demos; a fixed 40 would refuse 33 queries a task
    r = invoke("shapes", "--out", tmp_path / "bench", "--benchmark", "--queries-per-task", 33, "--seed", 2)
    assert r.exit_code == 0, r.output
    assert len(load_benchmark(tmp_path / "bench").queries) == 13 * 33


def test_validate_prints_every_problem(shapes_bench, tmp_path):
    bench = load_benchmark(shapes_bench)
    q0, q1 = bench.queries[0], bench.queries[1]
    bench.queries[0] = q0.model_copy(update={"answer": "purple elephant"})
    bench.queries[1] = q1.model_copy(update={"demo_keys": {"similar": [q1.id]}})
    bad = save_benchmark(bench, tmp_path / "bad")
    (bad / bench.demos[0].images[0]).write_bytes(b"not a png")
    r = invoke("validate", bad)
    assert r.exit_code == 1
    assert f"queries[{q0.id}].answer" in r.output
    assert f"queries[{q1.id}].demo_keys.similar: query listed among its own demos" in r.output
    assert f"demos[{bench.demos[0].id}].images[0]: corrupt image file" in r.output


def test_validate_warns_of_a_surface_cue_without_failing(shapes_bench, tmp_path):
    bench = load_benchmark(shapes_bench)
    template = next(q for q in bench.queries if q.task == "plurality")
    for i in range(12):  # VALSE's pattern: the true caption lower-case, the foil capitalised
        caption, foil = f"there are {i + 2} squares.", f"There is {i + 3} square."
        bench.queries.append(
            template.model_copy(update={"id": f"cue/{i}", "choices": [foil, caption], "answer": caption})
        )
    r = invoke("validate", save_benchmark(bench, tmp_path / "cued"))
    assert r.exit_code == 0, r.output
    assert "surface cue" in r.output and "plurality: the correct option starts lower-case in 12 of 12" in r.output
    assert "surface cue" not in invoke("validate", shapes_bench).output


def test_run_score_report(shapes_bench, tmp_path):
    common = ["--settings", "0-shot,4-similar", "--limit", "1", "--max-new-tokens", "4", "--no-progress"]
    r = invoke("run", shapes_bench, "--model", "builtin:tiny-llava", "--out", tmp_path / "a", *common)
    assert r.exit_code == 0, r.output
    assert "Table 4 layout" in r.output and "Table 5 layout" in r.output and "unparsed %" in r.output
    before = (tmp_path / "a" / "results.jsonl").read_text()
    r = invoke("score", tmp_path / "a")
    assert r.exit_code == 0 and (tmp_path / "a" / "results.jsonl").read_text() == before
    r = invoke(
        "run", shapes_bench, "--model", "builtin:tiny-idefics3", "--out", tmp_path / "b", "--scorers", "ppl", *common
    )
    assert r.exit_code == 0, r.output
    r = invoke("report", tmp_path / "a", tmp_path / "b", "--csv", tmp_path / "t.csv", "--markdown", tmp_path / "t.md")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert {row["model"] for row in rows} == {"builtin:tiny-llava", "builtin:tiny-idefics3"}
    assert {row["scorer"] for row in rows if row["model"] == "builtin:tiny-idefics3"} == {"ppl"}
    md = (tmp_path / "t.md").read_text()
    assert "| builtin:tiny-llava |" in md and "| builtin:tiny-idefics3 |" in md


def test_report_and_view_only_read_the_run_folder(shapes_bench, tmp_path):
    """Reading never writes: a report of a run folder leaves every file of it as it was."""
    common = ["--settings", "0-shot", "--limit", "1", "--max-new-tokens", "4", "--no-progress"]
    run = tmp_path / "run"
    assert invoke("run", shapes_bench, "--model", "builtin:tiny-llava", "--out", run, *common).exit_code == 0
    (run / "results.jsonl").write_text((run / "results.jsonl").read_text() + "\n")  # any change would show

    def snapshot():
        return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(run.iterdir()) if p.is_file()}

    before = snapshot()
    assert invoke("report", run, "--out", tmp_path / "report", "--no-figures").exit_code == 0
    assert invoke("view", run, "--out", tmp_path / "site").exit_code == 0
    assert snapshot() == before


def test_run_refuses_a_bad_benchmark_with_the_record_named(shapes_bench, tmp_path):
    bench = load_benchmark(shapes_bench)
    bench.queries[0] = bench.queries[0].model_copy(update={"demo_keys": {"similar": ["nope"] * 8, "random": []}})
    bad = save_benchmark(bench, tmp_path / "bad")
    r = invoke("run", bad, "--out", tmp_path / "run", "--settings", "4-similar", "--no-progress")
    assert r.exit_code == 2
    assert bench.queries[0].id in r.output and "unknown demo key" in r.output
    assert not (tmp_path / "run").exists()


def test_import_fewmmbench_then_run(tmp_path):
    from fixtures.fewmmbench_release import write_release

    release = write_release(tmp_path / "release")
    r = invoke("import-fewmmbench", release, "--out", tmp_path / "bench")
    assert r.exit_code == 0, r.output
    r = invoke("validate", tmp_path / "bench")
    assert r.exit_code == 0, r.output
    r = invoke(
        "run", tmp_path / "bench", "--model", "builtin:tiny-idefics3", "--out", tmp_path / "run",
        "--settings", "0-shot,2-similar", "--scorers", "ppl", "--no-progress",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    results = [json.loads(line) for line in open(tmp_path / "run" / "results.jsonl")]
    assert results and all(r["outcome"] in ("correct", "wrong") for r in results)


def test_console_script_is_installed():
    exe = shutil.which("mmctx")
    assert exe, "the mmctx console script must be on PATH after installation"
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("validate", "shapes", "run", "score", "report", "demo"):
        assert command in out


def test_tiny_model_names_the_families_it_builds(tmp_path):
    r = invoke("tiny-model", "--out", tmp_path / "m", "--family", "gpt-17")
    assert r.exit_code == 2 and "unknown tiny family 'gpt-17'" in r.output and "qwen2_vl" in r.output
    assert "qwen2_vl: mirrors Qwen/Qwen2-VL" in invoke("tiny-model", "--list").output
