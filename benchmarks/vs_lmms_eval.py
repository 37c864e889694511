"""Generation per item and startup: `mmctx run` vs lmms-eval, on the same tiny checkpoint and items.

Builds (offline) a tiny LLaVA checkpoint with `build_tiny_vlm(family="llava")` and a shapes-world
benchmark, and exports its zero-shot generate requests -- the very system + user messages
`mmctx run --settings 0-shot --scorers generate` sends, image by path -- as local JSONL data sets
plus lmms-eval tasks (YAML + utils.py with doc_to_messages/doc_to_visual/doc_to_text/
process_results). Each tool is then run as a user runs it, one process per run, timed from
process start to exit; greedy, the same max_new_tokens, CPU fp32.

Method:
  * Two sizes per side: the first --queries queries of each task (small) and --scale times as
    many (big; the small items are among them). per item = (t_big - t_small) / (items_big -
    items_small); startup = t_small - items_small x per item (imports, model load, writing
    results: what a run costs whatever its size).
  * A warm-up run of every side at the small size first, not timed (file caches, compiled
    bytecode, lmms-eval's datasets cache), then --rounds rounds; each round runs every side at
    both sizes, in the reverse order of the round before.
  * Every number is the median (min-max) over rounds, each round's ratio taken within the round.
  * Every run's generations are checked (mmctx's from its response store, lmms-eval's from
    --log_samples, which every lmms-eval run writes, as every mmctx run stores its answers): per
    item, every run of every side must give the same text after whitespace is collapsed, or the
    benchmark fails; the counts of identical outputs are printed.
  * After the rounds, one more run of each side at the big size with the per-item calls both make
    (transformers' generate, the model's forward, the processor, the chat template) and each
    tool's generation loop timed inside the process: where the per-item time goes (--no-breakdown
    skips it).
  * The same torch thread count on both sides (--threads, default 1, mmctx's own default for a
    small model on CPU): OMP_NUM_THREADS/MKL_NUM_THREADS in both environments, torch.set_num_threads
    in a launcher before either tool starts, mmctx's --threads; each process reports the count it
    ran with at exit and the benchmark checks it.
  * Both tools run in the same interpreter environment -- lmms-eval's venv, with mmctx imported
    from this checkout -- so torch, transformers, tokenizers and Pillow are the same builds;
    --mmctx-python runs mmctx with another interpreter instead (the versions are printed).

lmms-eval lives in its own virtual environment (re-used if present):
    ~/.cache/mmctx/bench-venvs/lmms-eval   (torch==2.13.0 CPU wheel first, then lmms-eval)

lmms-eval's `llava_hf` takes batch size 1 only: both its chat class (the one `--model llava_hf`
resolves to for a task with doc_to_messages; lmms_eval/models/chat/llava_hf.py) and its simple
class (lmms_eval/models/simple/llava_hf.py) `assert self.batch_size_per_gpu == 1` in
generate_until -- the benchmark checks the installed source says so. lmms-eval is therefore timed
at batch size 1 (its best supported setting), mmctx at batch size 1 (like for like), at batch size 1
with --compile (its decode step compiled over a static cache; compiling counts as startup, and the
warm-up run leaves inductor's on-disk kernel cache filled, as a user's earlier run would; each run
must record that every item was decoded compiled) and at --batch-size.

    python benchmarks/vs_lmms_eval.py [--queries 10] [--scale 3] [--rounds 3] [--batch-size 8] [--threads 1] [--no-compile]

With the defaults (90 and 390 items) it takes about 9 minutes on 2 idle cores, once the venv exists.

Exits non-zero (with the reason) when lmms-eval cannot be installed or cannot run the items
offline, when a run fails, or when the two tools' generations differ.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LMMS_EVAL_VERSION = "0.7.3"
TORCH_VERSION = "2.13.0"  # the CPU wheel this machine serves; other versions pull CUDA builds
TASK_PREFIX = "mmctx_shapes_0shot"
SIZES = ("small", "big")
CLOCKS = ("wall", "cpu")

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

# Runs a tool's __main__ module with torch's CPU threads set before the tool starts, and prints
# the count torch ran with when the process ends (the tools could change it; the benchmark checks).
# With BENCH_BREAKDOWN set (the untimed breakdown runs only) it also adds up the wall time of the
# calls BENCH_WRAP names -- [target, label, is_loop]; a call that is not a loop is counted only
# inside one -- and writes {label: [seconds, calls]} to that file at exit.
LAUNCHER = """\
import atexit, os, runpy, sys, torch
module, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
atexit.register(lambda: print(f"\\nBENCH torch_threads={torch.get_num_threads()}", file=sys.stderr, flush=True))
if os.environ.get("BENCH_BREAKDOWN"):
    import functools, importlib, json, time
    spent, depth = {}, [0]

    def wrap(target, label, loop):
        path, _, attr = target.partition(":")
        owner_name, _, name = attr.rpartition(".")
        owner = importlib.import_module(path)
        owner = getattr(owner, owner_name) if owner_name else owner
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*a, **k):
            if not (loop or depth[0]):
                return fn(*a, **k)
            depth[0] += loop
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                depth[0] -= loop
                s = spent.setdefault(label, [0.0, 0])
                s[0] += time.perf_counter() - t
                s[1] += 1

        setattr(owner, name, timed)

    for spec in json.loads(os.environ["BENCH_WRAP"]):
        wrap(*spec)
    atexit.register(lambda: open(os.environ["BENCH_BREAKDOWN"], "w").write(json.dumps(spent)))
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""

# What the breakdown runs time: the calls both tools make per item, and each tool's loop.
GENERATE, COMPILED, FORWARD, PROCESSOR, TEMPLATE, LOOP, STORE = (
    "transformers generate()",
    "mmctx compiled decoding",
    "  of which model forward",
    "processor: tokenise, preprocess images",
    "chat template",
    "loop",
    "response store commits",
)
COMMON_WRAP = [
    ["transformers.generation.utils:GenerationMixin.generate", GENERATE, False],
    ["transformers.models.llava.modeling_llava:LlavaForConditionalGeneration.forward", FORWARD, False],
    ["transformers.models.llava.processing_llava:LlavaProcessor.__call__", PROCESSOR, False],
    ["transformers.processing_utils:ProcessorMixin.apply_chat_template", TEMPLATE, False],
]
TOOL_WRAP = {
    "lmms-eval": [["lmms_eval.models.chat.llava_hf:LlavaHf.generate_until", LOOP, True]],
    "mmctx": [
        ["mmctx.models.hf:HFBackend.generate", LOOP, True],
        ["mmctx.models.store:ResponseStore.put_many", STORE, True],
        ["mmctx.models.decode:CompiledGreedy.decode", COMPILED, False],
    ],
}
LOOP_NAME = {"lmms-eval": "llava_hf generate_until", "mmctx": "HFBackend.generate + store commits"}

VERSIONS = """\
import json, platform, PIL, tokenizers, torch, transformers
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
    "transformers": transformers.__version__, "tokenizers": tokenizers.__version__, "pillow": PIL.__version__}))
"""

UTILS_PY = '''\
"""lmms-eval task utils for the mmctx shapes-world zero-shot items (generated by benchmarks/vs_lmms_eval.py)."""
from PIL import Image


def _images(doc):
    return [Image.open(p).convert("RGB") for p in doc["images"]]


def doc_to_visual(doc):
    return _images(doc)


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    # The simple (non-chat) path has no system turn: prepend it to the user text.
    return (doc["system"] + "\\n" if doc["system"] else "") + doc["text"]


def doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    # Exactly the messages mmctx sends: system turn, then the image(s) and the question text.
    messages = []
    if doc["system"]:
        messages.append({"role": "system", "content": [{"type": "text", "text": doc["system"]}]})
    content = [{"type": "image", "url": im} for im in _images(doc)]
    content.append({"type": "text", "text": doc["text"]})
    messages.append({"role": "user", "content": content})
    return messages


def doc_to_target(doc):
    return doc["gold"]


def process_results(doc, results):
    pred = (results[0] if results else "").strip().lstrip("(").upper()
    return {"letter_acc": float(pred[:1] == doc["gold"])}
'''

TASK_YAML = """\
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_visual: !function utils.doc_to_visual
doc_to_text: !function utils.doc_to_text
doc_to_messages: !function utils.doc_to_messages
doc_to_target: !function utils.doc_to_target
process_results: !function utils.process_results
generation_kwargs:
  max_new_tokens: {max_new_tokens}
  temperature: 0
  do_sample: false
  num_beams: 1
metric_list:
  - metric: letter_acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 0.0
"""

# The line of each llava_hf generate_until that refuses batches larger than one.
LMMS_BATCH_ASSERT = 'assert self.batch_size_per_gpu == 1, "Do not support batch_size_per_gpu > 1 for now"'


def fail(msg: str) -> None:
    print(f"\nFAILED: {msg}", flush=True)
    sys.exit(1)


def ensure_lmms_venv(venv: Path) -> Path:
    py = venv / "bin" / "python"
    marker = venv / ".mmctx-bench-ready"
    if marker.exists() and py.exists() and json.loads(marker.read_text()).get("lmms_eval") == LMMS_EVAL_VERSION:
        return py
    print(
        f"creating lmms-eval venv at {venv} (torch=={TORCH_VERSION} CPU, lmms-eval=={LMMS_EVAL_VERSION}) ...",
        flush=True,
    )
    venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        *([] if py.exists() else [[sys.executable, "-m", "venv", str(venv)]]),
        [str(py), "-m", "pip", "install", "-q", f"torch=={TORCH_VERSION}"],
        # torch pinned again or lmms-eval's deps upgrade it to a multi-GB CUDA build; decord is imported
        # by llava_hf but not declared as a dependency
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            f"lmms-eval=={LMMS_EVAL_VERSION}",
            f"torch=={TORCH_VERSION}",
            "decord",
            "filelock<4",
        ],  # lmms-eval 0.7.3 imports filelock._api, gone in filelock 4
        # the PyPI torchvision matching torch 2.13 is built against CUDA torch and fails to import on the
        # CPU wheel ("operator torchvision::nms does not exist"); without it transformers uses the PIL
        # image processors, as in the mmctx venv (which has no torchvision)
        [str(py), "-m", "pip", "uninstall", "-y", "-q", "torchvision", "torchaudio"],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"`{' '.join(cmd)}` exited {r.returncode}:\n{r.stderr[-3000:]}")
    r = subprocess.run(
        [str(py), "-c", "import torch, lmms_eval; print(torch.__version__)"], capture_output=True, text=True
    )
    if r.returncode != 0:
        fail(f"lmms-eval venv does not import:\n{r.stderr[-3000:]}")
    marker.write_text(json.dumps({"lmms_eval": LMMS_EVAL_VERSION, "torch": r.stdout.strip()}))
    return py


def check_lmms_batch_limit(py: Path) -> list[str]:
    """The installed llava_hf files that refuse batch size > 1 (both must, or the setting is wrong)."""
    r = subprocess.run(
        [str(py), "-c", "import lmms_eval, os; print(os.path.dirname(lmms_eval.__file__))"],
        capture_output=True,
        text=True,
    )
    root = Path(r.stdout.strip())
    files = [root / "models" / kind / "llava_hf.py" for kind in ("chat", "simple")]
    asserting = [str(f.relative_to(root.parent)) for f in files if f.exists() and LMMS_BATCH_ASSERT in f.read_text()]
    if len(asserting) != len(files):
        fail(
            f"expected both {[str(f) for f in files]} to assert batch size 1; only {asserting} do -- "
            "lmms-eval may batch now: time it at its larger batch sizes too"
        )
    return asserting


def export_items(bench, out: Path, max_new_tokens: int, limits: dict[str, int | None]) -> tuple[Path, dict]:
    """Write the 0-shot generate requests mmctx would send, per size, as JSONL data sets + lmms-eval tasks.

    Returns the task folder and, per size, the request ids in data-set order (lmms-eval's doc_id).
    """
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    task_dir = out / "lmms_task"
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "utils.py").write_text(UTILS_PY)
    ids = {}
    for size, limit in limits.items():
        plan = plan_requests(
            bench,
            [Setting.parse("0-shot")],
            ["generate"],
            get_preset("fewmmbench"),
            0,
            GenerationLimits(),
            limit=limit,
        )
        rows = []
        for req in plan:
            system, texts, images = "", [], []
            for msg in req.prompt.messages:
                for part in msg.content:
                    if hasattr(part, "path"):
                        images.append(str(part.path))
                    elif msg.role == "system":
                        system += part.text
                    else:
                        texts.append(part.text)
                if msg.role not in ("system", "user"):
                    fail(f"0-shot prompt has a {msg.role!r} turn; the export assumes system + one user turn")
            opts = req.prompt.options
            rows.append(
                {
                    "id": req.id,
                    "system": system,
                    "text": "\n".join(texts),
                    "images": images,
                    "gold": opts.labels[opts.gold],
                }
            )
        data = task_dir / f"items_{size}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        (task_dir / f"{TASK_PREFIX}_{size}.yaml").write_text(
            TASK_YAML.format(task=f"{TASK_PREFIX}_{size}", data=json.dumps(str(data)), max_new_tokens=max_new_tokens)
        )
        ids[size] = [r["id"] for r in rows]
    return task_dir, ids


@dataclass
class Side:
    label: str
    tool: str  # "lmms-eval" or "mmctx"
    batch: int
    flags: tuple[str, ...] = ()  # more of the tool's flags (mmctx --compile)
    # per clock ("wall", "cpu") and size, one process's seconds per round
    seconds: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: {clock: {size: [] for size in SIZES} for clock in CLOCKS}
    )

    @property
    def slug(self) -> str:
        return f"{self.tool}-bs{self.batch}" + "".join(self.flags).replace("--", "-")

    def per_item(self, clock: str, items: dict[str, int]) -> list[float]:
        """Seconds per item, each round's: the slope between the two sizes."""
        t = self.seconds[clock]
        return [(b - a) / (items["big"] - items["small"]) for a, b in zip(t["small"], t["big"])]

    def startup(self, clock: str, items: dict[str, int]) -> list[float]:
        """Seconds a run costs whatever its size, each round's: the intercept at zero items."""
        return [a - items["small"] * p for a, p in zip(self.seconds[clock]["small"], self.per_item(clock, items))]


@dataclass
class Setup:
    args: argparse.Namespace
    work: Path
    bench_root: Path
    model: Path
    task_dir: Path
    ids: dict[str, list[str]]
    py_lmms: Path
    py_mmctx: Path
    env_lmms: dict[str, str]
    env_mmctx: dict[str, str]


def command(setup: Setup, side: Side, size: str, out: Path) -> tuple[list[str], dict[str, str]]:
    args = setup.args
    if side.tool == "lmms-eval":
        return [
            str(setup.py_lmms),
            "-c",
            LAUNCHER,
            "lmms_eval",
            str(args.threads),
            "--model",
            "llava_hf",
            "--model_args",
            f"pretrained={setup.model},device=cpu,device_map=cpu,dtype=float32",
            "--tasks",
            f"{TASK_PREFIX}_{size}",
            "--include_path",
            str(setup.task_dir),
            "--batch_size",
            str(side.batch),
            "--output_path",
            str(out),
            "--log_samples",
            "--verbosity",
            "WARNING",
        ], setup.env_lmms
    return [
        str(setup.py_mmctx),
        "-c",
        LAUNCHER,
        "mmctx",
        str(args.threads),
        "run",
        str(setup.bench_root),
        "--model",
        str(setup.model),
        "--out",
        str(out),
        "--settings",
        "0-shot",
        "--scorers",
        "generate",
        "--batch-size",
        str(side.batch),
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--threads",
        str(args.threads),
        "--no-progress",
        *side.flags,
        *(["--limit", str(args.queries)] if size == "small" else []),
    ], setup.env_mmctx


def outputs_of(setup: Setup, side: Side, size: str, out: Path, log_text: str) -> dict[str, str]:
    """The generated text of each request id this run produced; fails on anything missing."""
    want = setup.ids[size]
    if side.tool == "lmms-eval":
        files = sorted(out.rglob(f"*_samples_{TASK_PREFIX}_{size}.jsonl"))
        if not files:
            fail(f"lmms-eval wrote no samples file under {out}; log tail:\n{log_text[-4000:]}")
        texts = {}
        for line in files[-1].read_text().splitlines():
            sample = json.loads(line)
            resp = sample.get("resps", sample["filtered_resps"])  # raw text where a filter changed it
            while isinstance(resp, list):
                resp = resp[0]
            texts[want[sample["doc_id"]]] = resp
    else:
        with sqlite3.connect(out / "responses.sqlite") as db:
            rows = db.execute("SELECT request_id, payload, error FROM responses WHERE kind = 'generate'").fetchall()
        errors = [(rid, err) for rid, _, err in rows if err]
        if errors:
            fail(f"mmctx stored {len(errors)} errors, e.g. {errors[0]}")
        texts = {rid: json.loads(payload)["text"] for rid, payload, _ in rows}
        usage = json.loads((out / "manifest.json").read_text()).get("backend_usage", {})
        if usage.get("threads") != setup.args.threads:
            fail(f"mmctx recorded {usage.get('threads')} torch threads, asked for {setup.args.threads}")
        if "--compile" in side.flags:
            compiled = usage.get("compiled_decoding") or {}
            if not compiled.get("on") or compiled.get("decoded") != len(want):
                fail(f"{side.label} did not decode all {len(want)} items compiled: {compiled}")
    if sorted(texts) != sorted(want):
        fail(f"{side.label} produced {len(texts)} outputs for the {len(want)} {size} items (or other ids)")
    return texts


def run_once(
    setup: Setup, side: Side, size: str, tag: str, breakdown: Path | None = None
) -> tuple[float, float, dict[str, str]]:
    """One process of ``side`` on the ``size`` items: wall seconds, CPU seconds (user + system, the
    process and any it waited for), and its generations by request id. With ``breakdown``, the
    per-item calls are timed inside the process and written there (see `LAUNCHER`)."""
    out = setup.work / "runs" / f"{tag}-{side.slug}-{size}"
    shutil.rmtree(out, ignore_errors=True)  # every timed run starts from nothing stored
    cmd, env = command(setup, side, size, out)
    if breakdown:
        # A timing wrapper inside the model's forward would break the graph --compile traces.
        wraps = [w for w in COMMON_WRAP + TOOL_WRAP[side.tool] if not ("--compile" in side.flags and w[1] == FORWARD)]
        env = dict(env, BENCH_BREAKDOWN=str(breakdown), BENCH_WRAP=json.dumps(wraps))
    log = out.with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("w") as fh:
        rc = subprocess.run(cmd, env=env, cwd=setup.work, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    text = log.read_text(errors="replace")
    if rc != 0:
        fail(f"{side.label} ({size}) exited {rc}: {' '.join(cmd[:1] + cmd[3:])}\nlog tail:\n{text[-4000:]}")
    reported = [line for line in text.splitlines() if line.startswith("BENCH torch_threads=")]
    if not reported or reported[-1] != f"BENCH torch_threads={setup.args.threads}":
        fail(f"{side.label} ran with {reported[-1:] or 'unreported'} torch threads, not {setup.args.threads}")
    texts = outputs_of(setup, side, size, out, text)
    if not setup.args.workdir:
        shutil.rmtree(out, ignore_errors=True)
    return seconds, cpu, texts


def spread(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    v = [x * scale for x in values]
    return f"{statistics.median(v):.{digits}f} ({min(v):.{digits}f}–{max(v):.{digits}f})"


def normalise(text: str) -> str:
    return " ".join(text.split())


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}; {os.cpu_count()} logical cores, {usable_cores()} usable by this process; {platform.platform()}"


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def versions(py: Path, env: dict[str, str]) -> dict:
    r = subprocess.run([str(py), "-c", VERSIONS], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{py} cannot import torch/transformers:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def breakdown(setup: Setup, sides: list[Side], items: dict[str, int], check) -> None:
    """One more run of each side at the big size, untimed, with the per-item calls timed inside it."""
    n = items["big"]
    spent = {}
    for side in sides:
        path = setup.work / f"breakdown-{side.slug}.json"
        _, _, texts = run_once(setup, side, "big", "breakdown", breakdown=path)
        check(side, texts)
        spent[side.label] = json.loads(path.read_text())
    print(
        f"\nwhere per-item time goes: one more run of each side at {n} items (not timed above), the wall time of "
        f"these calls added up inside the process; ms per item, one run each:"
    )
    print(f"  {'':<46}" + "".join(f"{s.label:>20}" for s in sides))

    def ms(side: Side, label: str) -> float:
        return spent[side.label].get(label, [0.0, 0])[0] / n * 1000

    def row(name: str, values: list[str]) -> None:
        print(f"  {name:<46}" + "".join(f"{v:>20}" for v in values))

    loops = {s.label: ms(s, LOOP) + ms(s, STORE) for s in sides}
    row("the tool's generation loop", [f"{loops[s.label]:.1f}" for s in sides])
    for label in (GENERATE, COMPILED, FORWARD, PROCESSOR, TEMPLATE, STORE):
        cells = []
        for s in sides:
            calls = spent[s.label].get(label, [0.0, 0])[1]
            if label == FORWARD and "--compile" in s.flags:
                cells.append("not timed")
                continue
            cells.append(f"{ms(s, label):.1f}" + (f" ({calls / n:.1f} calls)" if label == FORWARD else ""))
        row("  " + label, cells)
    rest = [loops[s.label] - sum(ms(s, x) for x in (GENERATE, COMPILED, PROCESSOR, TEMPLATE, STORE)) for s in sides]
    row("  rest of the loop (messages, images, decode)", [f"{r:.1f}" for r in rest])
    slopes = {s.label: statistics.median(s.per_item("wall", items)) * 1000 for s in sides}
    row("per item measured above (median, wall)", [f"{slopes[s.label]:.1f}" for s in sides])
    row("  of which outside the loop", [f"{slopes[s.label] - loops[s.label]:.1f}" for s in sides])
    print(
        "  (the loop: " + "; ".join(f"{s.label} {LOOP_NAME[s.tool]}" for s in sides) + "; outside it: reading the "
        "items, building prompts or requests, scoring, writing results -- the difference of two measurements, so "
        "noisy; a loop's first calls in a process cost more, which the slope counts as startup)"
    )


def report(sides: list[Side], items: dict[str, int], rounds: int) -> None:
    print(
        f"\nover {rounds} rounds, median (min–max); per item = (t_big - t_small) / ({items['big']} - {items['small']}), "
        f"startup = t_small - {items['small']} x per item; wall = elapsed, cpu = user + system time of the process"
    )
    for clock in CLOCKS:
        for s in sides:
            print(
                f"  {clock:<4} {s.label:<18} per item {spread(s.per_item(clock, items), 1000)} ms; "
                f"startup {spread(s.startup(clock, items))} s; "
                f"{items['small']} items {spread(s.seconds[clock]['small'])} s, "
                f"{items['big']} items {spread(s.seconds[clock]['big'])} s"
            )
    if any(p <= 0 for s in sides for clock in CLOCKS for p in s.per_item(clock, items)):
        print(
            "  WARNING: a round's per-item slope is zero or negative: the two sizes are too close for this "
            "machine's noise, and the per-item numbers and ratios below mean nothing; raise --queries or --scale"
        )


def ratios(sides: list[Side], items: dict[str, int]) -> None:
    base = sides[0]
    print(f"\nratios {base.label} / mmctx (above 1: mmctx faster), each round's own, median (min–max):")
    for clock in CLOCKS:
        measures = {
            s.label: {
                "per item": s.per_item(clock, items),
                "startup": s.startup(clock, items),
                f"end to end, {items['big']} items": s.seconds[clock]["big"],
            }
            for s in sides
        }
        for what, ours in measures[base.label].items():
            cells = [
                f"{s.label} {spread([a / b for a, b in zip(ours, measures[s.label][what])], digits=2)}x"
                for s in sides[1:]
            ]
            print(f"  {clock:<4} {what + ':':<25} " + "; ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=10, help="queries per task in the small size")
    parser.add_argument("--scale", type=int, default=3, help="the big size has this many times the small's queries")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds after the warm-up (at least 3)")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8, help="mmctx's batched setting (besides batch size 1)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads, both sides")
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time mmctx at batch size 1 with --compile (its decode step compiled; startup includes compiling)",
    )
    parser.add_argument(
        "--breakdown",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the rounds, one more run per side timing the per-item calls inside it",
    )
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "mmctx" / "bench-venvs" / "lmms-eval")
    parser.add_argument(
        "--mmctx-python",
        type=Path,
        default=None,
        help="interpreter that runs mmctx (default: lmms-eval's, so both use the same torch and transformers)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="kept after the run if given (default: a temp dir, removed)"
    )
    args = parser.parse_args()
    if args.rounds < 3 or args.scale < 2 or args.queries < 1 or args.threads < 1:
        parser.error("need --rounds >= 3, --scale >= 2, --queries >= 1, --threads >= 1")
    os.environ.update(OFFLINE_ENV)

    import mmctx
    from mmctx.data.shapes import build_benchmark
    from mmctx.models.tiny import build_tiny_vlm

    print(f"machine: {machine()}", flush=True)
    load_start = load()
    py_lmms = ensure_lmms_venv(args.venv)
    asserting = check_lmms_batch_limit(py_lmms)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mmctx-vs-lmms-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        bench = build_benchmark(work / "bench", queries_per_task=args.queries * args.scale, seed=0)
        model = build_tiny_vlm(work / "model", family="llava")
        task_dir, ids = export_items(bench, work, args.max_new_tokens, {"small": args.queries, "big": None})
        if not set(ids["small"]) < set(ids["big"]):
            fail("the small items are not among the big ones")

        threads = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
        base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env_lmms = dict(base, **OFFLINE_ENV, **threads)
        # mmctx from this checkout (and whatever else PYTHONPATH held), ahead of any installed copy
        src = str(Path(mmctx.__file__).resolve().parents[1])
        mm_path = os.pathsep.join([src, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
        env_mmctx = dict(env_lmms, PYTHONPATH=mm_path)
        py_mmctx = args.mmctx_python or py_lmms
        setup = Setup(args, work, bench.root, model, task_dir, ids, py_lmms, py_mmctx, env_lmms, env_mmctx)

        v_lmms, v_mmctx = versions(py_lmms, env_lmms), versions(py_mmctx, env_mmctx)
        n_small, n_big = len(ids["small"]), len(ids["big"])
        print(
            f"items: zero-shot generate queries of {len({q.task for q in bench.queries})} shapes-world tasks, "
            f"small {n_small} ({args.queries}/task), big {n_big} ({args.queries * args.scale}/task, the small among them)\n"
            f"model: tiny llava at {model}; CPU fp32, greedy, max_new_tokens={args.max_new_tokens}\n"
            f"torch threads: {args.threads} on both sides (OMP_NUM_THREADS, torch.set_num_threads before start, "
            f"mmctx --threads; each process's count checked at exit)\n"
            f"lmms-eval {LMMS_EVAL_VERSION} ({py_lmms}): {v_lmms}\n"
            f"mmctx {mmctx.__version__} from {src} ({py_mmctx}): {v_mmctx}\n"
            f"lmms-eval batch size: 1 only -- {' and '.join(asserting)} assert batch_size_per_gpu == 1\n"
            f"rounds: 1 warm-up (small size, untimed) + {args.rounds} timed, order reversed each round\n"
            f"load average at start (1/5/15 min): {load_start}",
            flush=True,
        )

        sides = [
            Side("lmms-eval bs=1", "lmms-eval", 1),
            Side("mmctx bs=1", "mmctx", 1),
            *([Side("mmctx bs=1 compile", "mmctx", 1, ("--compile",))] if args.compile else []),
            *([Side(f"mmctx bs={args.batch_size}", "mmctx", args.batch_size)] if args.batch_size != 1 else []),
        ]
        # Each side's text per request id from its first run that had the item; every later run, and
        # every other side, must give the same text (after whitespace is collapsed) or the benchmark fails.
        first: dict[str, dict[str, str]] = {s.label: {} for s in sides}
        stable: dict[str, dict[str, bool]] = {s.label: {} for s in sides}  # identical over all of a side's runs

        def check(side: Side, texts: dict[str, str]) -> None:
            mine = first[side.label]
            for rid, text in texts.items():
                before = mine.setdefault(rid, text)
                stable[side.label][rid] = stable[side.label].get(rid, True) and text == before
                for label, theirs in first.items():
                    if rid in theirs and normalise(theirs[rid]) != normalise(text):
                        fail(f"{side.label} generated {text!r} for {rid}, {label} generated {theirs[rid]!r}")

        for side in sides:
            wall, _, texts = run_once(setup, side, "small", "warmup")
            check(side, texts)
            print(f"warm-up {side.label}: {n_small} items in {wall:.1f}s", flush=True)

        jobs = [(side, size) for side in sides for size in SIZES]
        loads = []
        for rnd in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for side, size in jobs if rnd % 2 == 0 else jobs[::-1]:
                wall, cpu, texts = run_once(setup, side, size, f"r{rnd}")
                check(side, texts)
                side.seconds["wall"][size].append(wall)
                side.seconds["cpu"][size].append(cpu)
            loads.append(os.getloadavg()[0])
            print(
                f"round {rnd + 1} ({'forward' if rnd % 2 == 0 else 'reversed'} order), wall s small/big: "
                + "; ".join(
                    f"{s.label} {s.seconds['wall']['small'][-1]:.1f}/{s.seconds['wall']['big'][-1]:.1f}" for s in sides
                )
                + f"; load {loads[-1]:.2f}",
                flush=True,
            )
        load_end = load()
        report(sides, {"small": n_small, "big": n_big}, args.rounds)
        if args.breakdown:
            breakdown(setup, sides, {"small": n_small, "big": n_big}, check)
        runs = 1 + 2 * args.rounds + args.breakdown
        base = sides[0].label
        print(
            f"\noutputs, the {n_big} items, each side's first run that had the item vs {base}'s -- identical "
            "character for character (after whitespace is collapsed; any difference there fails the benchmark): "
            + "; ".join(
                f"{s.label} {sum(first[s.label][i] == first[base][i] for i in ids['big'])}/{n_big} "
                f"({sum(normalise(first[s.label][i]) == normalise(first[base][i]) for i in ids['big'])}/{n_big})"
                for s in sides[1:]
            )
            + f"; the same over all {runs} runs of a side: "
            + ", ".join(f"{label} {sum(v.values())}/{n_big}" for label, v in stable.items())
        )
        print(
            f"load average, 1 min, at each round's start and end: {spread(loads, digits=2)}; "
            f"1/5/15 min at start {load_start}, at end {load_end} ({usable_cores()} usable cores)"
        )
        if max(loads) > usable_cores() - 0.5:
            print(
                "  WARNING: other work ran beside the benchmark (load near or above the core count): wall times "
                "include waiting for a core and their spreads widen; the cpu lines are the steadier measure"
            )
        ratios(sides, {"small": n_small, "big": n_big})
        if args.workdir:
            print(f"logs kept under {work / 'runs'}")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
