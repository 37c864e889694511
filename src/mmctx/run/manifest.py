"""A run folder's manifest, read in one place into one typed record.

``RUN/manifest.json`` is written when a run starts (`mmctx.run.runner.open_run_manifest`) and
holds everything that can change a score: the model as loaded (name, revision, backend,
settings), the run's config (`RunConfig` for few-shot runs, `ContextConfig` for context runs),
versions, and for context runs the judge and extractor. Every reader goes through
`read_manifest`, so a missing, truncated or foreign file is one clear error naming the folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mmctx.run.files import MANIFEST

RunKind = Literal["fewshot", "context"]


class ManifestError(ValueError):
    """A folder without a readable run manifest."""


@dataclass(frozen=True)
class RunManifest:
    path: Path  # the run folder
    kind: RunKind  # "context" for CLBench-V runs; older few-shot manifests carry no kind
    model: dict[str, Any]  # the backend's ModelInfo as recorded: name, revision, backend, settings
    config: dict[str, Any]  # RunConfig or ContextConfig, as recorded
    fields: dict[str, Any] = field(default_factory=dict, repr=False)  # the whole file, every field as stored

    @property
    def model_name(self) -> str:
        return self.model["name"]

    @property
    def source(self) -> Path:
        """What the run ran on: the benchmark folder (few-shot) or the suite (context)."""
        return Path(self.config["suite" if self.kind == "context" else "benchmark"])

    @property
    def source_name(self) -> str:
        return self.config.get("suite_name" if self.kind == "context" else "benchmark_name", "")


def read_manifest(run_dir: str | Path) -> RunManifest:
    """The manifest of the run in ``run_dir``; `ManifestError` names the folder and what is wrong."""
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST
    if not path.is_file():
        raise ManifestError(f"{run_dir} is not a run folder (no {MANIFEST})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: not a JSON object")
    model, config = data.get("model"), data.get("config")
    if not isinstance(model, dict) or not isinstance(model.get("name"), str):
        raise ManifestError(f"{path}: model.name is missing (not a manifest mmctx wrote?)")
    if not isinstance(config, dict):
        raise ManifestError(f"{path}: config is missing (not a manifest mmctx wrote?)")
    kind: RunKind = "context" if data.get("kind") == "context" else "fewshot"
    return RunManifest(run_dir, kind, model, config, data)
