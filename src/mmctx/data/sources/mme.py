"""MME's Commonsense Reasoning subtask: two yes/no questions per image.

Layout read: the official release, ``MME_Benchmark_release_version.zip`` unpacked into ``mme/``.
Each image ``commonsense_reasoning/<stem>.png`` sits next to ``<stem>.txt``, whose lines are
``question<TAB>answer`` (the first answered ``Yes``, the second ``No``; blank lines and CRLF are
tolerated because the exact bytes of the release files are unverified). Some re-packs of the zip
drop the inner ``MME_Benchmark/`` level; both are accepted. MME's evaluation tool
(``eval_tool/Your_Results/<subtask>.txt``: ``image<TAB>question<TAB>answer``) holds the same
questions but no images, so it cannot feed samples on its own and is not read.

Format: FewMMBench lists MME under its commonsense *MCQA* sources (§3.1, Table 2), and an MME
item is a question, not a statement: the binary format would wrap it as 'Does this sentence
accurately describe the image? "Is this photo taken indoors?"', which misreads it. So each
question is an ``mcqa`` sample with choices ``["Yes", "No"]`` and the answer given. MME's
trailing instruction " Please answer yes or no." is removed from ``question`` (the MCQA prompt
lists lettered options and asks for a letter, which it would contradict) and kept verbatim in
``meta["question"]``. The two questions on one image share ``meta["image"]``, which MME's
acc+ score pairs them by.

Only ``commonsense_reasoning`` is read: FewMMBench uses no other MME subtask (Table 2).
"""

from __future__ import annotations

import re
from pathlib import Path

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

BASES = ("MME_Benchmark_release_version/MME_Benchmark", "MME_Benchmark_release_version")
SUFFIXES = (".png", ".jpg", ".jpeg")
ANSWERS = {"yes": "Yes", "no": "No"}
INSTRUCTION = re.compile(r"\s*Please answer yes or no\.?\s*$", re.IGNORECASE)

INFO = SourceInfo(
    name="mme",
    title="MME",
    license="research use only (no license file upstream; the Hugging Face copy is tagged Apache-2.0)",
    published="https://github.com/BradyFU/Awesome-Multimodal-Large-Language-Models/tree/Evaluation "
    "(MME_Benchmark_release_version.zip, on request / Hugging Face darkyarding/MME)",
    layout="mme/MME_Benchmark_release_version/MME_Benchmark/commonsense_reasoning/<stem>.txt next to "
    "<stem>.png|.jpg (the release zip unpacked; MME_Benchmark_release_version/commonsense_reasoning/ also accepted)",
    subsets={"commonsense_reasoning": ("commonsense", "mcqa")},
)


def convert(ctx: SourceContext) -> Conversion:
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    found = False
    for subset in INFO.subsets:
        folder = next((d for base in BASES if (d := reader.folder / base / subset).is_dir()), None)
        if folder is None:
            continue
        for txt in sorted(folder.glob("*.txt")):
            found = True
            out.samples.extend(_image_questions(reader, subset, folder, txt))
    if not found:
        reader.missing_all([f"{base}/{subset}/<stem>.txt" for subset in INFO.subsets for base in BASES])
    return out


def _image_questions(reader: Reader, subset: str, folder: Path, txt: Path) -> list[Sample]:
    under = reader.file(folder)
    image = reader.image(txt.stem, txt, f"key {txt.stem}", "image", under=under, suffixes=SUFFIXES)
    if image is None:
        return []
    samples = []
    for line, text in reader.lines(txt):
        where = f"line {line}"
        fields = text.split("\t")
        if len(fields) != 2:
            found = f"{len(fields)} tab-separated field(s)"
            reader.error(txt, where, "(columns)", f"expected 'question<TAB>answer', got {found}")
            continue
        original, given = fields[0].strip(), fields[1].strip()
        answer = ANSWERS.get(given.casefold())
        question = INSTRUCTION.sub("", original)
        if not question:
            reader.error(txt, where, "question", f"expected a question, got {original!r}")
            continue
        if answer is None:
            reader.error(txt, where, "answer", f"expected Yes or No, got {given!r}")
            continue
        key = f"{txt.stem}:{line}"
        samples.append(
            Sample(
                id=f"{INFO.name}/{subset}/{key}",
                task=INFO.subsets[subset][0],
                source=INFO.title,
                format="mcqa",
                images=[reader.rel(image)],
                question=question,
                choices=["Yes", "No"],
                answer=answer,
                meta={
                    "source_file": reader.file(txt),
                    "key": key,
                    "subset": subset,
                    "image": image.name,
                    "question": original,
                },
            )
        )
    return samples
