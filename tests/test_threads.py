"""torch's CPU threads: one for a small model on CPU, every usable core for a large one, as asked
otherwise; set when the HF backend loads and recorded with the run."""

from __future__ import annotations

import pytest
import torch

from mmctx.models.hf import SMALL_MODEL_PARAMETERS, HFBackend, default_threads, usable_cores


def test_the_default_follows_device_and_model_size():
    cores = usable_cores()
    assert cores >= 1
    assert default_threads("cpu", SMALL_MODEL_PARAMETERS - 1) == 1
    assert default_threads("cpu", SMALL_MODEL_PARAMETERS) == cores
    assert default_threads("cuda:0", 10**10) == min(4, cores)


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_the_backend_sets_and_records_its_threads(tiny_models, restore_threads):
    torch.set_num_threads(2)
    small = HFBackend(str(tiny_models["llava"]), device="cpu")
    assert small.threads == 1 and torch.get_num_threads() == 1  # a tiny model: one thread
    assert small.usage()["threads"] == 1
    asked = HFBackend(str(tiny_models["llava"]), device="cpu", threads=3)
    assert asked.threads == 3 and torch.get_num_threads() == 3 and asked.usage()["threads"] == 3
    # Not part of the model's identity: stored responses stay valid under another thread count.
    assert "threads" not in asked.info.settings and asked.info == small.info


def test_threads_below_one_are_refused(tiny_models):
    with pytest.raises(ValueError, match="threads must be at least 1, not 0"):
        HFBackend(str(tiny_models["llava"]), device="cpu", threads=0)
