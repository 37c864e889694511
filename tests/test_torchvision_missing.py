"""Where torchvision is not installed, the Qwen-VL families still load, generate and score.

transformers 5.25 builds every Qwen-VL processor with a video processor, and that needs
torchvision: without it `AutoProcessor` fails (an ImportError for Qwen2/2.5-VL, a ValueError for
Qwen3-VL). mmctx sends no video, so its Qwen adapter puts the processor together from the image
processor (transformers' PIL implementation), tokenizer and chat template, and says so in a
warning. The environment without torchvision is a subprocess in which ``import torchvision``
fails as it does where the package is absent (``sys.modules`` holds ``None`` for it, so imports
raise ModuleNotFoundError and `importlib.util.find_spec` answers None); mmctx itself runs
unchanged there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fixtures.conversations import few_shot, square_images

from mmctx.models.hf import HFBackend
from mmctx.models.tiny import build_tiny_vlm

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")

WITHOUT_TORCHVISION = "import sys; sys.modules['torchvision'] = None\n"

SCRIPT = (
    WITHOUT_TORCHVISION
    + r"""
import importlib.util, json
from pathlib import Path
try:
    import torchvision  # noqa: F401
    raise SystemExit("torchvision is still importable")
except ModuleNotFoundError:
    pass
assert importlib.util.find_spec("torchvision") is None
from fixtures.conversations import few_shot
from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.prompts.messages import ImagePart

checkpoints, image_paths = json.loads(sys.argv[1]), json.loads(sys.argv[2])
messages = few_shot([ImagePart.from_path(Path(p)) for p in image_paths])
report = {}
for family, path in checkpoints.items():
    backend = HFBackend(path, device="cpu", dtype="float32")
    conversation, pictures = backend._hf_messages(messages)
    fed = backend._process([backend._template(conversation, True)], [pictures])
    scores = backend.score([ScoreRequest(messages, ("red", "dark green"))])[0]
    generation = backend.generate([GenerateRequest(messages, max_new_tokens=3)])[0]
    report[family] = {
        "processor": [c.__name__ for c in type(backend.processor).__mro__[:2]],
        "image_processor": type(backend.processor.image_processor.inner).__name__,
        "ids": fed["input_ids"].tolist(), "grid": fed["image_grid_thw"].tolist(),
        "score_error": scores.error, "lls": list(scores.loglikelihoods), "generation_error": generation.error,
    }
print("REPORT " + json.dumps(report))
"""
)


@pytest.fixture(scope="module")
def checkpoints(tiny_models):
    return {family: tiny_models[family] for family in FAMILIES}  # built once per test session (conftest)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


@pytest.fixture(scope="module")
def without_torchvision(checkpoints, images):
    """What mmctx made of each family in a process where torchvision cannot be imported."""
    tests = os.path.dirname(__file__)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    paths = json.dumps({f: str(p) for f, p in checkpoints.items()})
    image_paths = json.dumps([str(part.path) for part in images])
    command = [sys.executable, "-c", SCRIPT, paths, image_paths]
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line.removeprefix("REPORT ")), done.stderr


@pytest.mark.parametrize("family", FAMILIES)
def test_qwen_loads_scores_and_generates_without_torchvision(family, without_torchvision):
    report, stderr = without_torchvision
    got = report[family]
    assert got["processor"][0] == "ImageOnlyProcessor"
    assert got["processor"][1] == {"qwen2_vl": "Qwen2VLProcessor", "qwen2_5_vl": "Qwen2_5_VLProcessor",
                                   "qwen3_vl": "Qwen3VLProcessor"}[family]  # fmt: skip
    assert got["image_processor"] == "Qwen2VLImageProcessorPil"
    assert got["score_error"] is None and got["generation_error"] is None
    assert len(got["lls"]) == 2 and all(ll < 0 for ll in got["lls"])
    assert "torchvision is not installed" in stderr and "image-only" in stderr


@pytest.mark.parametrize("family", FAMILIES)
def test_without_torchvision_the_model_gets_the_same_tokens_and_image_grids(family, without_torchvision,
                                                                           checkpoints, images):  # fmt: skip
    """The image-only processor expands the same prompt into the same ids, and resizes each image to
    the same grid, as transformers' full processor does where torchvision is installed."""
    report, _ = without_torchvision
    backend = HFBackend(str(checkpoints[family]), device="cpu", dtype="float32")
    assert type(backend.processor).__name__ != "ImageOnlyProcessor"  # this process has torchvision
    conversation, pictures = backend._hf_messages(few_shot(images))
    fed = backend._process([backend._template(conversation, True)], [pictures])
    assert fed["input_ids"].tolist() == report[family]["ids"]
    assert fed["image_grid_thw"].tolist() == report[family]["grid"]


@pytest.mark.parametrize("family", ["mistral3", "internvl", "phi4_multimodal"])
def test_a_family_whose_processor_needs_torchvision_says_so_by_name(family, tmp_path):
    """Without torchvision these processors cannot be built at all: one clear error, naming the package."""
    path = build_tiny_vlm(tmp_path / family, family=family)
    code = WITHOUT_TORCHVISION + (
        "from mmctx.models.hf import HFBackend, ModelError\n"
        "try:\n"
        f"    HFBackend({str(path)!r}, device='cpu')\n"
        "except ModelError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300).stdout
    assert "needs torchvision for its processor, which is not installed" in out, out
    assert "pip install 'mmctx[vision]'" in out and str(path) in out
