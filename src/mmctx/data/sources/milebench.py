"""MileBench's temporal tasks: multiple-choice questions over a sequence of video frames.

Each task is a folder ``<Task>/`` holding ``<Task>.json`` = ``{"meta_data": {"task_instruction":
[...], "question_type": ...}, "data": [...]}`` and the frames in ``<Task>/images/``. A record's
``task_instance`` has a ``context`` with ``{image#k}`` placeholders, ``images_path`` (in frame
order), ``choice_list``; the gold ``response`` is the answer *text*, one of the choices.

Two forms, as two subsets (pick with ``forms``):

* ``frames``: the frames as separate images, in order; placeholders become "image k";
* ``composite``: what FewMMBench uses ("multiple images are concatenated into a single composite
  to preserve temporal coherence", section 3.1): the frames resized to one height and pasted
  left to right into ONE JPEG, written content-addressed under ``ROOT/_mmctx/milebench/``.

Only ``composite`` is produced by default: both forms of one question in one pool would let a
query be shown its own twin as a demonstration.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo, write_derived
from mmctx.data.sources.reader import DROPPED, Reader
from mmctx.schema import Sample

# MileBench's "Temporal" category (its paper; the notes list them): MVBench videos as frame sequences.
TEMPORAL = (
    "ActionLocalization",
    "ActionPrediction",
    "ActionSequence",
    "CharacterOrder",
    "CounterfactualInference",
    "EgocentricNavigation",
    "MovingAttribute",
    "MovingDirection",
    "ObjectExistence",
    "ObjectInteraction",
    "ObjectShuffle",
    "SceneTransition",
    "StateChange",
)

INFO = SourceInfo(
    name="milebench",
    title="MileBench",
    license="CC BY-NC 4.0 per the repository's DATA_LICENSE (README says CC-BY, HF card cc-by-2.0): non-commercial",
    published="https://huggingface.co/datasets/FreedomIntelligence/MileBench (MileBench_part*.tar.gz)",
    layout="milebench/<Task>/<Task>.json + milebench/<Task>/images/<images_path> for the temporal tasks",
    subsets={"composite": ("temporal", "mcqa"), "frames": ("temporal", "mcqa")},
)

DEFAULT_FORMS = ("composite",)
FRAME_HEIGHT = 336  # composite frames are scaled down to this height (never up), keeping aspect
PLACEHOLDER = re.compile(r"\{(image|table)#(\d+)\}")
RUN = re.compile(r"\{(?:image|table)#\d+\}(?:[ \t]*\{(?:image|table)#\d+\})*")


def convert(ctx: SourceContext, forms: Sequence[str] = DEFAULT_FORMS, frame_height: int = FRAME_HEIGHT) -> Conversion:
    unknown = set(forms) - set(INFO.subsets)
    if unknown:
        raise ValueError(f"unknown MileBench form(s) {sorted(unknown)}; known: {sorted(INFO.subsets)}")
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    for task, path in reader.present({task: f"{task}/{task}.json" for task in TEMPORAL}).items():
        data = reader.json_file(path)
        if not (isinstance(data, dict) and isinstance(data.get("data"), list)):
            if data is not None:
                reader.error(path, "top level", "data", "expected {'meta_data': {...}, 'data': [...]}")
            continue
        raw_meta = data.get("meta_data")
        meta_data: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        if meta_data.get("question_type", "multi-choice") != "multi-choice":
            reader.skip("question_type not multi-choice", len(data["data"]))
            continue
        for index, record in enumerate(data["data"]):
            out.samples.extend(_samples(reader, task, path, index, record, meta_data, forms, frame_height))
    return out


def _samples(
    reader: Reader,
    task: str,
    path: Path,
    index: int,
    record: Any,
    meta_data: dict[str, Any],
    forms: Sequence[str],
    frame_height: int,
) -> list[Sample]:
    if record is DROPPED:  # its bad bytes are already reported
        return []
    if not isinstance(record, dict) or not isinstance(record.get("task_instance"), dict):
        reader.error(path, f"index {index}", "task_instance", "expected a record with a task_instance object")
        return []
    key = record.get("sample_id")
    where = f"sample_id {key}" if key is not None else f"index {index}"
    if not isinstance(key, (int, str)) or isinstance(key, bool):
        reader.error(path, where, "sample_id", f"expected an int or string, got {key!r}")
        return []
    instance = record["task_instance"]
    context = reader.text(instance.get("context"), path, where, "task_instance.context")
    choices = reader.options(instance.get("choice_list"), path, where, "task_instance.choice_list")
    refs = instance.get("images_path")
    if not isinstance(refs, list) or not refs:
        reader.error(path, where, "task_instance.images_path", f"expected a non-empty list of file names, got {refs!r}")
        return []
    found = [
        reader.image(ref, path, where, f"task_instance.images_path[{i}]", under=f"{task}/images")
        for i, ref in enumerate(refs)
    ]
    instruction = _instruction(reader, path, where, record.get("task_instruction_id"), meta_data)
    frames = [f for f in found if f is not None]
    if context is None or choices is None or instruction is None or len(frames) < len(found):
        return []
    beyond = sorted({int(k) for _, k in PLACEHOLDER.findall(context) if not 1 <= int(k) <= len(refs)})
    if beyond:
        reader.error(path, where, "task_instance.context", f"placeholder(s) {beyond} beyond the {len(refs)} images")
        return []
    answer = str(record.get("response"))  # MileBench's own eval compares str(response)
    if answer not in choices:
        reader.error(path, where, "response", f"{record.get('response')!r} is not in choice_list {choices!r}")
        return []
    frame_paths = [reader.rel(f) for f in frames]
    base = {
        "source_file": reader.file(path),
        "key": key,
        "task_name": task,
        "task_instruction": instruction,
        "image_quantity_level": record.get("image_quantity_level"),
        "frames": frame_paths,
    }
    samples: list[Sample] = []
    for form in forms:
        sample_id = f"{INFO.name}/{form}/{task}/{key}"
        if not reader.claim(sample_id, path, where, "sample_id"):
            continue
        if form == "composite":
            try:
                images = [write_derived(reader.ctx, INFO.name, _composite(frames, frame_height), ".jpg")]
            except OSError as exc:
                reader.error(path, where, "task_instance.images_path", f"unreadable frame: {exc}")
                return samples
            n = len(refs)
            lead = f"The image shows {n} frames side by side, in order from left to right (image 1 to image {n})."
        else:
            images, lead = list(frame_paths), ""
        samples.append(
            Sample(
                id=sample_id,
                task="temporal",
                source=INFO.title,
                format="mcqa",
                images=images,
                question=_readable(context),
                context="\n".join(t for t in (instruction, lead) if t),
                choices=choices,
                answer=answer,
                meta={**base, "subset": form},
            )
        )
    return samples


def _instruction(reader: Reader, path: Path, where: str, index: Any, meta_data: dict[str, Any]) -> str | None:
    """The task instruction the record points at; a file without instructions gives ""."""
    instructions = meta_data.get("task_instruction")
    if not isinstance(instructions, list):
        return ""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(instructions):
        reader.error(path, where, "task_instruction_id", f"expected an index below {len(instructions)}, got {index!r}")
        return None
    return str(instructions[index])


def _readable(context: str) -> str:
    """``{image#k}`` placeholders as "image k"; a run of them as "image 1, image 2, ..."."""

    def marks(match: re.Match[str]) -> str:
        text = ", ".join(f"{kind} {k}" for kind, k in PLACEHOLDER.findall(match.group(0)))
        # a space only where the marker would otherwise run into a word ("and{image#2}" -> "and image 2")
        before = " " if match.start() > 0 and context[match.start() - 1].isalnum() else ""
        after = " " if match.end() < len(context) and context[match.end()].isalnum() else ""
        return f"{before}{text}{after}"

    return RUN.sub(marks, context).strip()


def _composite(frames: Sequence[Path], frame_height: int) -> bytes:
    """The frames, scaled to a common height, pasted left to right: same frames, same bytes."""
    images = []
    for frame in frames:
        with Image.open(frame) as im:
            images.append(im.convert("RGB"))
    height = min(frame_height, *(im.height for im in images))
    images = [
        im
        if im.height == height
        else im.resize((max(1, round(im.width * height / im.height)), height), Image.Resampling.LANCZOS)
        for im in images
    ]
    canvas = Image.new("RGB", (sum(im.width for im in images), height))
    x = 0
    for im in images:
        canvas.paste(im, (x, 0))
        x += im.width
    buffer = io.BytesIO()
    canvas.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()
