"""What every command shares: the app, the error path, and the flags several commands take."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Multimodal in-context benchmarks.")
console = Console(stderr=True)


def fail(message: str) -> None:
    # Messages quote records like queries[id].field: escape them, or rich reads them as markup.
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(2)


def comma_list(value: str | None) -> list[str] | None:
    """``"a,b"`` as ``["a", "b"]``; None, empty or ``all`` as None (the default)."""
    if not value or value == "all":
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


# Backend flags: the same names and help wherever a command loads a model. A flag left unset is
# not passed, so each backend's own default applies and a backend refuses only what was set.
Device = Annotated[str | None, typer.Option(help="auto (CUDA when present), cpu, cuda, cuda:1, …")]
Dtype = Annotated[str | None, typer.Option(help="auto (bf16/fp16 on GPU, fp32 on CPU), float32, bfloat16, float16.")]
BatchSize = Annotated[int | None, typer.Option(help="Prompts per generate call; options per scoring forward (8).")]
Revision = Annotated[str | None, typer.Option(help="Model revision (branch, tag or commit) to pin.")]
TrustRemoteCode = Annotated[bool, typer.Option(help="Allow the model repository's own code to run.")]
Adapter = Annotated[str | None, typer.Option(help="Model family adapter (default: picked by model id; mmctx models).")]
Quantization = Annotated[str | None, typer.Option(help="8bit or 4bit (bitsandbytes, CUDA), where the family allows.")]
ImageSettings = Annotated[
    str | None,
    typer.Option(help="checkpoint (its own image resolution) or paper (FewMMBench code's: Idefics 448 px)."),
]
Threads = Annotated[
    int | None, typer.Option(help="torch CPU threads (default: 1 for a small model on CPU, else every core).")
]
Compile = Annotated[
    bool,
    typer.Option(
        "--compile",
        help="HF models: decode single prompts (--batch-size 1) through a compiled step; checked "
        "against generate() (docs/performance.md).",
    ),
]
BaseUrl = Annotated[str | None, typer.Option(help="openai: models: the server's base URL (else OPENAI_BASE_URL).")]
MaxConcurrency = Annotated[int | None, typer.Option(help="openai: models: requests in flight at once (16).")]
ScoreMode = Annotated[str | None, typer.Option(help="openai: models: none or vllm_prompt_logprobs (for ppl).")]
RetryErrors = Annotated[bool, typer.Option(help="Ask again for requests stored as errors.")]
Progress = Annotated[bool, typer.Option(help="Show a progress bar.")]
ModelSpec = Annotated[
    str, typer.Option(help="HF id or folder, builtin:shapes-vlm|tiny-idefics3|tiny-llava, openai:NAME, vllm:ID.")
]


def backend_options(**values: Any) -> dict[str, Any]:
    """The backend flags that were set (None and False are unset)."""
    return {name: value for name, value in values.items() if value is not None and value is not False}


def key_values(pairs: list[str] | None, flag: str) -> dict[str, Any]:
    """``KEY=VALUE`` flags as a dict; a value reads as JSON where it parses (numbers, true, lists)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            fail(f"{flag} {pair!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out
