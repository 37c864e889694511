"""A tiny interleaved VLM (Idefics3) trained on shapes-world conversations, offline and reproducibly.

`build_tiny_vlm` gives a random-weight checkpoint that answers at chance; this trains one of
the same family so the embedded demo measures something real. The model is trained on
conversations rendered *exactly* the way evaluation renders them: mmctx's own prompt builder
(preset ``fewmmbench``) turns a query and its demonstrations into typed messages, the HF
backend's adapter renders those through the processor's chat template, and the query's reply
(`reply_text`: the correct option's text) is appended; the loss is on that reply.

Two stages, because a language model trained from scratch on a CPU budget learns to look
things up in an image far too slowly end to end (measured in earlier training runs: thousands of
steps on its no-information plateau). Stage 1 teaches the vision tower to classify each patch
(which colour–shape pair, shape and size covers it, `pretrain_vision`), then to make the
`patch_features` (how many objects of each colour–shape and size–shape pair, per-shape counts,
positions and arrow ends) a linear function of its output, and fits the connector so that the
image token carries their sum beside a constant (`token_scale`, `IMAGE_CONSTANT`) along fixed
directions (`fit_connector`). Stage 2 freezes them, starts three attention heads on image
tokens, shape words and colour words (`look_at_images`, `look_at_words`), and trains the
language model alone on cached image tokens (`cached_image_tokens`, tested to give the loss the
model computes from pixels), which makes its steps several times cheaper. Beside the reply's
loss, an auxiliary one (`WordGrounding`) teaches every shape and colour word of a zero-shot
prompt to carry what the image shows about it, which is what "what colour is the diamond?"
needs and what no recipe without it learnt.

Why a tokenizer of its own: the tiny tokenizer of `mmctx.models.tiny` is trained on a short
word list and splits most prompt words into 2–3 pieces. Trained here on the very texts the
presets and shapes-world produce, one word is about one token, so sequences are 2–3× shorter.

Seeds. Benchmarks are built with small seeds (0, 1, …) and the CLIP uses 1000+/2000+; the VLM's
training conversations come from a shapes-world benchmark built with seed
``TRAIN_SEED_BASE + seed`` (≥ 3000), a pool built with seed ``VISION_SEED_BASE + seed``
(≥ 4000, its scenes asked zero-shot) and the restart's pool, seed ``DRILL_SEED_BASE + seed``
(≥ 5000), so no evaluation scene is ever trained on.

    metrics = train_shapes_vlm(Path("runs/shapes-vlm"), seed=0)
    backend = load_backend("runs/shapes-vlm")

Status: shipped as ``builtin:shapes-vlm``, the default model; it meets the quality
bars (its card, ``reference_models/shapes-vlm/README.md``, has every score with intervals).
Held-out zero-shot generation 0.71 [0.69, 0.72] on 2,600 queries against chance 0.39 (the
untrained twin: 0.00, every answer unparsed); attribute recognition 0.89 and object
recognition 0.97 (bar 0.80). Ranked by perplexity on 13,000 queries of an unseen seed, every
task's interval lies above chance: action's at 0.80, commonsense's by 0.003.

What is left is what one summed image token and two layers make hard. Commonsense (which of
three shapes is closer to another, or nearest an edge) stays near chance even on image tokens
built from the scenes' exact features (ranked 0.41 against chance 0.38 by an oracle stage 2):
it is the language model's to learn. Temporal asks which shape moved between frames, which a
sum over the frames does not hold; which one disappeared, and where a steadily moving one goes
next, it does.

Action needed two things. Stage 1 labels each object's patches with its arrow role
(`arrow_role_labels`), keeps a head of both tower layers on each patch's neighbourhood
(`look_at_neighbours`) and gives arrow scenes a third of its draws (`arrow_scene_weights`), so
that the token names an arrow's source and target (for 99% and 96% of held-out arrow scenes);
and stage 2 trains on tokens whose arrow ends are the exact ones (`with_exact_arrow_ends`),
since on the tower's own, half their size and noisy, it never found them.

How the recipe was found (the experiments, numbered, and every full run that was not
shipped) is in ``reference/docs/development.md``.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TypeVar

from mmctx.prompts.presets import AnswerStyle
from mmctx.schema import Benchmark, Sample

T = TypeVar("T")

TRAIN_SEED_BASE = 3000  # training conversations: benchmark seed 3000 + seed (disjoint from benchmarks and CLIP)
VISION_SEED_BASE = 4000  # extra scenes (stage 1, and zero-shot in stage 2): pool seed 4000 + seed
PRESET = "fewmmbench"  # the preset the demo (and `mmctx run`'s default) renders prompts with
MAX_SHOTS = 8  # the paper grid's largest number of demonstrations
EXTRA = "extra"  # the training benchmark's subfolder holding the vision pool's scenes
STYLES: tuple[AnswerStyle, ...] = ("letter", "text", "cot")


@dataclass(frozen=True)
class Architecture:
    """Sizes of the Idefics3 built here (the vision tower sees shapes-world frames at native 96 px)."""

    image_size: int = 96
    patch_size: int = 8  # 12 × 12 patches an image
    scale_factor: int = 12  # pixel shuffle over all 12 × 12: one image token an image
    vision_hidden: int = 128
    vision_layers: int = 2
    vision_heads: int = 4
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 4  # one value projection a head: the 66 scene features do not fit through 2 × 32
    intermediate: int = 384
    vocab_size: int = 1024

    @property
    def image_tokens(self) -> int:
        return (self.image_size // self.patch_size) ** 2 // self.scale_factor**2


# --- tokenizer and model ---------------------------------------------------------------------


def prompt_corpus(bench: Benchmark) -> list[str]:
    """Every text the presets can show about ``bench``'s samples: items in all styles, answers, rationales.

    The tokenizer is trained on it, so prompt words are single tokens.
    """
    from mmctx.data.shapes import scene_rationale
    from mmctx.prompts.build import item_text, shown_options
    from mmctx.prompts.presets import get_preset

    preset = get_preset(PRESET)
    texts = [preset.preamble, "User: Assistant: System: Answer: "]
    for sample in list(bench.queries) + list(bench.demos):
        shown = shown_options(sample, preset, 0)
        texts += [item_text(sample, shown, preset, style) for style in STYLES]
        texts += list(sample.choices)
        texts.append((sample.rationale or scene_rationale(sample)).reasoning)
    return texts


def build_shapes_tokenizer(texts: Sequence[str], vocab_size: int = 1024):
    """A byte-level BPE over ``texts`` with the Idefics3 special tokens, wrapped for transformers."""
    from mmctx.models.tiny import build_tokenizer
    from mmctx.models.tiny.idefics3 import SPECIAL

    return build_tokenizer(SPECIAL, vocab_size=vocab_size, corpus=list(texts))


TRAINED_LONGEST_EDGE, TRAINED_SHORTEST_EDGE = 448, 378


def build_shapes_vlm(out: Path, tokenizer, arch: Architecture = Architecture(), seed: int = 0) -> Path:
    """Write a random-weight Idefics3 of ``arch`` with ``tokenizer`` and the Idefics3 chat template to ``out``."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor, LlamaConfig
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    from mmctx.models.tiny.idefics3 import IDEFICS3_TEMPLATE

    torch.manual_seed(seed)
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=arch.hidden,
        intermediate_size=arch.intermediate,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    vision = {
        "hidden_size": arch.vision_hidden,
        "intermediate_size": arch.vision_hidden * 2,
        "num_hidden_layers": arch.vision_layers,
        "num_attention_heads": arch.vision_heads,
        "image_size": arch.image_size,
        "patch_size": arch.patch_size,
    }
    config = Idefics3Config(
        vision_config=vision,
        text_config=text.to_dict(),
        scale_factor=arch.scale_factor,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Idefics3ForConditionalGeneration(config)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<end_of_utterance>")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        # The first resize the shipped checkpoint was trained and evaluated with (the Idefics
        # adapter's paper setting, mmctx.models.adapters.idefics); the vision encoder then sees
        # the image at max_image_size. Written into the checkpoint, so its own settings say so.
        size={"longest_edge": TRAINED_LONGEST_EDGE, "shortest_edge": TRAINED_SHORTEST_EDGE},
        max_image_size={"longest_edge": arch.image_size},
    )
    processor = Idefics3Processor(
        image_processor, tokenizer, image_seq_len=arch.image_tokens, chat_template=IDEFICS3_TEMPLATE
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def load_for_training(path: Path):
    """(model, processor, adapter) as the HF backend loads them: same adapter, same processor kwargs."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from mmctx.models.adapters import adapter_for

    adapter = adapter_for(str(path), "idefics3")
    processor = AutoProcessor.from_pretrained(path, **adapter.processor_kwargs)
    processor = adapter.prepare(None, processor)
    model = AutoModelForImageTextToText.from_pretrained(path)
    return model, processor, adapter


# --- training conversations ------------------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    """One training sequence: expanded token ids, which positions are the query's reply, its images."""

    ids: tuple[int, ...]
    final: tuple[bool, ...]  # True on the query's own reply (the loss is taken there)
    images: tuple[str, ...]


def with_rationale(sample: Sample) -> Sample:
    """``sample`` carrying its scene-graph rationale (queries have none stored; CoT replies need one)."""
    from mmctx.data.shapes import scene_rationale

    return sample if sample.rationale is not None else sample.model_copy(update={"rationale": scene_rationale(sample)})


def reply_text(sample: Sample, shown, style: AnswerStyle) -> str:
    """What the model is taught to reply: the correct option's text, after the scene-graph
    rationale when the prompt asks for CoT (``…\nAnswer: <text>``), in every setting.

    Not the letter a ``letter`` prompt asks for: naming it takes a second lookup (which listed
    option holds the answer) that a language model trained from scratch learns far too slowly
    on a CPU budget. The extractor maps the text to its option (rules ``option_text`` and
    ``answer_marker``), and `ppl` scores option text anyway.
    """
    text = shown.texts[shown.gold]
    if style == "cot":
        return f"{sample.rationale.reasoning.strip()}\nAnswer: {text}"
    return text


class Renderer:
    """Turns (query, demos, style, option seed) into a `Conversation`, the way the HF backend would.

    Text goes through the adapter's chat-template rendering and the tokenizer; each ``<image>``
    becomes the processor's expansion (checked against the processor itself on the first
    conversations). Pixel values are computed once per image file and cached.
    """

    def __init__(self, processor, adapter, root: Path):
        from mmctx.prompts.presets import get_preset

        self.processor, self.adapter, self.root = processor, adapter, Path(root)
        self.tokenizer = processor.tokenizer
        self.preset = get_preset(PRESET)
        self.image_id = self.tokenizer.convert_tokens_to_ids("<image>")
        self.pixels: dict[str, object] = {}
        self.expansion = self._expansion()
        self.checked = 0

    def _expansion(self) -> list[int]:
        """Token ids the processor puts in place of one ``<image>``."""
        from PIL import Image

        blank = Image.new("RGB", (96, 96), "white")
        ids = self.processor(text=["<image>"], images=[[blank]], return_tensors="pt")["input_ids"][0].tolist()
        return ids

    def pixel_values(self, path: str):
        if path not in self.pixels:
            from PIL import Image

            with Image.open(path) as im:
                rgb = im.convert("RGB")
            self.pixels[path] = self.processor.image_processor(images=[[rgb]], return_tensors="pt")["pixel_values"][
                0, 0
            ]
        return self.pixels[path]

    def render(self, query: Sample, demos: list[Sample], style: AnswerStyle, seed: int) -> Conversation:
        """``query`` after ``demos`` as `build_prompt` asks it, with `reply_text` appended."""
        from mmctx.models.spans import answer_turn, chat_conversation
        from mmctx.prompts.build import build_prompt, shown_options

        built = build_prompt(query, demos, self.preset, style, seed, self.root)
        conversation, parts = chat_conversation(built.messages)
        conversation = conversation + [answer_turn(reply_text(query, shown_options(query, self.preset, seed), style))]
        return self.encode(conversation, tuple(p.path for p in parts))

    def encode(self, conversation: list[dict], images: tuple[str, ...]) -> Conversation:
        """A chat-template conversation ending in an assistant turn, as ids and the final reply's mask."""
        full = self.adapter.render(self.processor, conversation, False)
        start = len(self.adapter.render(self.processor, conversation[:-1], True))
        end = full.index("<end_of_utterance>", start) + len("<end_of_utterance>")
        enc = self.tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
        ids, final = [], []
        for token, (a, b) in zip(enc["input_ids"], enc["offset_mapping"]):
            if token == self.image_id:
                ids += self.expansion
                final += [False] * len(self.expansion)
                continue
            ids.append(token)
            final.append(b > start and a < end)
        if self.checked < 3:  # the processor itself must agree with the expansion done here
            self._check(full, images, ids)
        return Conversation(tuple(ids), tuple(final), images)

    def _check(self, full: str, images: tuple[str, ...], ids: list[int]) -> None:
        from PIL import Image

        rgb = []
        for path in images:
            with Image.open(path) as im:
                rgb.append(im.convert("RGB"))
        expected = self.adapter.inputs(self.processor, [full], [rgb])["input_ids"][0].tolist()
        if expected != ids:
            raise RuntimeError("training tokenisation disagrees with the processor's")
        self.checked += 1


# --- what the vision tower is taught to see --------------------------------------------------


SHAPE_FACTS = ("count", "x", "y", "arrow tail", "arrow head")  # per-shape features beside the conjunctions


def feature_names() -> list[str]:
    """The scene features each image token is made to carry about its cell (`patch_features`,
    summed over the cell's patches): how many objects of each (colour, shape) and (size, shape)
    pair it holds, how many of each shape, where they are and which shapes arrows start and end
    at (each object counted by its share of the cell: over the image these add up to counts and
    summed positions), plus a constant that marks an image token."""
    from mmctx.data.shapes import COLOURS, SHAPES, SIZES

    names = [f"{c} {s}" for c in COLOURS for s in SHAPES] + [f"{z} {s}" for z in SIZES for s in SHAPES]
    names += [f"{s} {what}" for what in SHAPE_FACTS for s in SHAPES]
    return names + ["image"]


LABEL_COVER = 0.3  # a patch is labelled with the colour–shape pair covering most of it, if at least this much


def object_coverage(scene, image_size: int, patch_size: int):
    """(patches × objects, the objects with their frame index): the fraction of each patch each
    object of ``scene`` covers, in the square the processor squashes every image to
    (multi-frame strips included), patches row-major as the vision tower sees them."""
    import numpy as np
    import torch
    from PIL import Image, ImageDraw

    from mmctx.data.shapes.world import FRAME, draw_object, frame_origin, strip_width

    canvas = Image.new("I", (strip_width(len(scene.frames)), FRAME), 0)
    draw = ImageDraw.Draw(canvas)
    objects = []
    for i, frame in enumerate(scene.frames):
        for o in frame.objects:
            objects.append((i, o))
            draw_object(draw, o, frame_origin(i), fill=len(objects))  # label 0 is the background
    ids = torch.from_numpy(np.array(canvas.resize((image_size, image_size), Image.NEAREST), dtype=np.int64))
    n = image_size // patch_size
    onehot = torch.nn.functional.one_hot(ids, len(objects) + 1).float()
    coverage = onehot.view(n, patch_size, n, patch_size, -1).mean((1, 3)).reshape(n * n, -1)[:, 1:]
    return coverage, objects


def patch_features(meta: dict, image_size: int, patch_size: int, weight: str = "object"):
    """`feature_names` of each patch of a shapes-world image (patches × features): each object
    adds its features weighted by its share of its own area that the patch covers, so that over
    the image they add up to one per object (and to its centre, from -1 (left, top) to 1 (right,
    bottom) in the squashed square). With ``weight="coverage"`` the conjunctions (pairs and
    arrow ends) are weighted by the fraction of the *patch* the object covers instead: what a
    patch shows, which `patch_labels` classifies.

    Why *conjunctions* (``red circle``, ``small circle``, ``circle x``) rather than colours and
    shapes as separate features: a language model trained from scratch reads "is there a red
    circle" or "how many squares" off an average of the image tokens (what its attention does
    before it has learnt anything sharper) plus its MLP, long before it learns to look an object
    up token by token; separate features lose which colour goes with which shape in that average.
    Why *per object* in the tokens: weighted by coverage a large object weighs ten times a small
    one, and next to the constant (`IMAGE_CONSTANT`) a small object's colour nearly vanished
    after the language model's norm. In development probes, a fresh language model on exact
    features answered "what colour is the <shape>?" at 0.60 after 5,000 steps per object
    against 0.20 on the tower's coverage-weighted tokens after 6,000 (not like for like: exact
    against read features), while counts (always per object) were learnt in both.
    """
    import torch

    from mmctx.data.shapes.world import FRAME, Scene, frame_origin, strip_width

    if weight not in ("object", "coverage"):
        raise ValueError(f"weight must be 'object' or 'coverage', not {weight!r}")
    index = {name: i for i, name in enumerate(feature_names())}
    scene = Scene.from_dict(meta)
    coverage, objects = object_coverage(scene, image_size, patch_size)
    width = strip_width(len(scene.frames))
    out = torch.zeros(coverage.shape[0], len(index))
    out[:, index["image"]] = 1
    for k, (i, o) in enumerate(objects):
        arrows = scene.frames[i].arrows
        x, y = (frame_origin(i) + o.x) / width, o.y / FRAME
        c = coverage[:, k]
        share = c / c.sum().clamp(min=1e-6)
        conjunction = share if weight == "object" else c
        out[:, index[f"{o.colour} {o.shape}"]] += conjunction
        out[:, index[f"{o.size} {o.shape}"]] += conjunction
        out[:, index[f"{o.shape} count"]] += share
        out[:, index[f"{o.shape} x"]] += share * (2 * x - 1)
        out[:, index[f"{o.shape} y"]] += share * (2 * y - 1)
        out[:, index[f"{o.shape} arrow tail"]] += conjunction * any(a == o.id for a, _ in arrows)
        out[:, index[f"{o.shape} arrow head"]] += conjunction * any(b == o.id for _, b in arrows)
    return out


def _conjunction_columns(values) -> list[int]:
    """Where the (value, shape) features are in `feature_names`, value-major."""
    from mmctx.data.shapes import SHAPES

    names = feature_names()
    return [names.index(f"{v} {s}") for v in values for s in SHAPES]


def pair_columns() -> list[int]:
    """Where the colour–shape pairs are in `feature_names`."""
    from mmctx.data.shapes import COLOURS

    return _conjunction_columns(COLOURS)


def size_columns() -> list[int]:
    """Where the size–shape pairs are in `feature_names`."""
    from mmctx.data.shapes import SIZES

    return _conjunction_columns(SIZES)


def patch_labels(features, roles: bool = False):
    """Each patch's classes for stage 1 (``features``: coverage-weighted `patch_features`, … ×
    patches × features → … × patches × 3):
    the colour–shape pair covering most of the patch, its shape, and the size of that shape
    that covers most of the patch; each 0 when no pair covers at least `LABEL_COVER` of it,
    else 1 + the class's index. With ``roles``, two more columns (`arrow_role_labels`)."""
    import torch

    from mmctx.data.shapes import SHAPES, SIZES

    if roles:
        return torch.cat([patch_labels(features), arrow_role_labels(features)], -1)

    cover, pair = features[..., pair_columns()].max(-1)
    shape = pair % len(SHAPES)
    sizes = features[..., size_columns()].unflatten(-1, (len(SIZES), len(SHAPES)))  # … × sizes × shapes
    size = sizes.gather(-1, shape[..., None, None].expand(*shape.shape, len(SIZES), 1))[..., 0].argmax(-1)
    covered = cover >= LABEL_COVER
    zero = torch.zeros_like(pair)
    return torch.stack(
        [
            torch.where(covered, pair + 1, zero),
            torch.where(covered, shape + 1, zero),
            torch.where(covered, size + 1, zero),
        ],
        -1,
    )


def arrow_role_labels(features):
    """Two columns of patch classes (… × patches × 2): the shape of the object covering the patch
    if an arrow starts at that object, and if one ends there; 0 otherwise (less than
    `LABEL_COVER` of such an object on the patch), else 1 + the shape's index.

    Why label the objects' own patches: the token's ``<shape> arrow tail`` / ``arrow head``
    features are the object's patches' sum, so it is there that a linear connector reads them;
    labels on the few patches where an arrow touches its object were too rare to learn (see
    `look_at_neighbours`)."""
    import torch

    from mmctx.data.shapes import SHAPES

    names = feature_names()
    columns = []
    for role in ("arrow tail", "arrow head"):
        cover, shape = features[..., [names.index(f"{s} {role}") for s in SHAPES]].max(-1)
        columns.append(torch.where(cover >= LABEL_COVER, shape + 1, torch.zeros_like(shape)))
    return torch.stack(columns, -1)


def label_classes(roles: bool = False) -> tuple[int, ...]:
    """How many classes each column of `patch_labels` has (none included)."""
    from mmctx.data.shapes import SHAPES, SIZES

    base = (len(pair_columns()) + 1, len(SHAPES) + 1, len(SIZES) + 1)
    return (*base, len(SHAPES) + 1, len(SHAPES) + 1) if roles else base


def feature_basis(hidden: int, seed: int):
    """Fixed orthonormal directions (``hidden × features``) the scene features are written along."""
    import torch

    n = len(feature_names())
    if hidden < n:
        raise ValueError(f"the language model's width ({hidden}) must be at least the {n} scene features")
    draws = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(hidden, n, generator=draws))[0]


def image_tokens(model, pixels):
    """The connector's output for single-image ``pixels`` (images × C × H × W): images × tokens × hidden."""
    import torch

    out = model.model.get_image_features(pixel_values=pixels[:, None])
    tokens = getattr(out, "pooler_output", out)
    return (
        torch.stack(list(tokens))
        if isinstance(tokens, (list, tuple))
        else tokens.view(len(pixels), -1, tokens.shape[-1])
    )


def _patch_cross_entropy(states, labels, log_temperature):
    """Summed cross-entropy of the patch classes (`label_classes`), each class's logit being one
    of the tower's output dimensions times its group's learnt temperature."""
    import torch

    classes = label_classes(roles=labels.shape[-1] > len(label_classes()))
    starts = [sum(classes[:k]) for k in range(len(classes))]
    return sum(
        torch.nn.functional.cross_entropy(
            (states[..., a : a + n] * log_temperature[k].exp()).flatten(0, 1), labels[..., k].flatten()
        )
        for k, (a, n) in enumerate(zip(starts, classes))
    )


NEIGHBOUR_DIMS = 5  # the tower's last dimensions `look_at_neighbours` keeps x, x², y, y², 1 in
NEIGHBOUR_LAYERS = (0, 1)  # the tower layers whose head 0 is kept on each patch's neighbourhood
ARROW_SHARE = 1 / 3  # of stage 1's draws, for the scenes with an arrow (7.7% of its pool)
NEIGHBOUR_PRIOR = 20.0  # its strength: at initialisation a started head gives the 3 × 3 neighbourhood 0.82


def _keep(index):
    """A gradient hook that zeroes ``index`` of the gradient: those entries stay as started."""

    def hook(grad):
        grad = grad.clone()
        grad[index] = 0
        return grad

    return hook


def look_at_neighbours(model, layers: Sequence[int], strength: float = NEIGHBOUR_PRIOR) -> None:
    """Start head 0 of each of the vision tower's ``layers`` attending to each patch's 3 × 3
    neighbourhood, and keep it there through stage 1 (its query and key rows get no gradient;
    only AdamW's weight decay shrinks them, by about a sixth over stage 1).

    Why: whether an arrow starts or ends at an object is not visible where the two touch (the
    head's tip is a line's width there; its wide part lies a patch over), and a tower left to
    itself did not learn to look a patch over. With a head kept on the neighbourhood in the
    first layer, the patches where the ends touch were named (93%, arrow scenes alone), but
    the ends still did not reach the token. With one in the second layer too, and the objects'
    own patches labelled with their role (`arrow_role_labels`), they did on arrow scenes alone
    (source 70%, target 75% read back from the token) but not in a full run's mixed pool (58%,
    36%; action still at chance) until arrow scenes got a third of the draws
    (`arrow_scene_weights`: 99%, 96%; reference/docs/development.md).

    How: the position embeddings' last `NEIGHBOUR_DIMS` dimensions hold each patch's x, x², y, y²
    (from -1 to 1) and 1; nothing writes into them (the patch embedding, every layer's attention
    output and MLP are zero there and kept so; the patch and position embeddings are frozen,
    since trained, the patch embedding's output grew 25-fold and the layer norm shrank the code
    as much), so every layer reads them clean. A started head's query reads ``strength`` ×
    (2x, -1, 2y, -1) and its key (x, x², y, y²): their product is minus the squared distance
    between the two patches up to a constant of the query, a Gaussian of distance.
    """
    import torch

    vision = model.model.vision_model
    config = vision.config
    n = config.image_size // config.patch_size
    head_dim = config.hidden_size // config.num_attention_heads
    dims = list(range(config.hidden_size - NEIGHBOUR_DIMS, config.hidden_size))
    rows, cols = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")  # patches row-major
    x, y = (2 * cols.reshape(-1) / (n - 1) - 1).float(), (2 * rows.reshape(-1) / (n - 1) - 1).float()
    embeddings = vision.embeddings
    with torch.no_grad():
        embeddings.position_embedding.weight[:, dims] = torch.stack([x, x * x, y, y * y, torch.ones_like(x)], 1)
        embeddings.patch_embedding.weight[dims] = 0
        embeddings.patch_embedding.bias[dims] = 0
    for param in embeddings.parameters():
        param.requires_grad_(False)
    for i, layer in enumerate(vision.encoder.layers):
        writers = (
            layer.self_attn.out_proj.weight,
            layer.self_attn.out_proj.bias,
            layer.mlp.fc2.weight,
            layer.mlp.fc2.bias,
        )
        with torch.no_grad():
            for param in writers:
                param[dims] = 0
        for param in writers:
            param.register_hook(_keep(dims))
        if i not in layers:
            continue
        attention, norm = layer.self_attn, layer.layer_norm1
        with torch.no_grad():
            for proj in (attention.q_proj, attention.k_proj):
                proj.weight[:head_dim] = 0
                proj.bias[:head_dim] = 0
            for row, (query, key, value) in enumerate(((0, 0, 2.0), (4, 1, -1.0), (2, 2, 2.0), (4, 3, -1.0))):
                attention.q_proj.weight[row, dims[query]] = strength * value
                attention.k_proj.weight[row, dims[key]] = 1.0
            norm.weight[dims] = 1.0
            norm.bias[dims] = 0.0
        for param in (attention.q_proj.weight, attention.q_proj.bias, attention.k_proj.weight, attention.k_proj.bias):
            param.register_hook(_keep(slice(0, head_dim)))
        for param in (norm.weight, norm.bias):
            param.register_hook(_keep(dims))


def neighbour_attention(model, pixels, layer: int) -> float:
    """The share of head 0's attention in the tower's ``layer`` that falls on each patch's 3 × 3
    neighbourhood, averaged over ``pixels``' patches (`look_at_neighbours`)."""
    import torch

    vision = model.model.vision_model
    config = vision.config
    n = config.image_size // config.patch_size
    head_dim = config.hidden_size // config.num_attention_heads
    seen = []

    def grab(module, args, kwargs):
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        q, k = module.q_proj(hidden)[..., :head_dim], module.k_proj(hidden)[..., :head_dim]
        seen.append(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(head_dim), -1))

    hook = vision.encoder.layers[layer].self_attn.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        patch_states(model, pixels)
    finally:
        hook.remove()
    rows, cols = torch.arange(n * n) // n, torch.arange(n * n) % n
    near = ((rows[:, None] - rows).abs() <= 1) & ((cols[:, None] - cols).abs() <= 1)
    return float(torch.cat(seen).mul(near).sum(-1).mean())


def arrow_ends_read(read, metas: Sequence[dict]) -> tuple[float | None, float | None]:
    """Of the single-frame scenes with an arrow between two different shapes, how often the
    features read back from the token (`read_features`) give the arrow's source the larger
    ``<shape> arrow tail`` of the two joined shapes, and its target the larger ``arrow head``."""

    names = feature_names()
    hits: dict[str, list[bool]] = {"arrow tail": [], "arrow head": []}
    for features, meta in zip(read, metas):
        frames = meta["frames"]
        if len(frames) != 1 or not frames[0].get("arrows"):
            continue
        shape = {o["id"]: o["shape"] for o in frames[0]["objects"]}
        source, target = (shape[i] for i in frames[0]["arrows"][0])
        if source == target:
            continue
        for role, want, other in (("arrow tail", source, target), ("arrow head", target, source)):
            hits[role].append(bool(features[names.index(f"{want} {role}")] > features[names.index(f"{other} {role}")]))
    return tuple(sum(h) / len(h) if h else None for h in hits.values())


def has_arrow(meta: dict) -> bool:
    """Whether any frame of the scene draws an arrow."""
    return any(frame.get("arrows") for frame in meta["frames"])


def arrow_scene_weights(metas: Sequence[dict], share: float):
    """Stage 1's sampling weights (one per scene) giving the scenes with an arrow ``share`` of
    the draws and the others the rest, each scene of a kind equally; ``None`` (uniform) when
    ``share`` is 0 or a kind is missing.

    Why: in the mixed pool one scene in thirteen has an arrow, and there the tower learnt the
    arrow roles (`arrow_role_labels`) far less than on arrow scenes alone (58% / 36% against
    70% / 75% of held-out arrows read back)."""
    import torch

    if not 0 <= share < 1:
        raise ValueError(f"the arrow scenes' share of stage 1 must be in [0, 1), not {share}")
    arrows = torch.tensor([has_arrow(m) for m in metas])
    if not share or arrows.all() or not arrows.any():
        return None
    return torch.where(arrows, share / arrows.sum(), (1 - share) / (~arrows).sum()).double()


def pretrain_vision(
    model,
    pixels,
    features,
    labels,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    linear_steps: int = 0,
    linear_weight: float = 3.0,
    weights=None,
) -> list[float]:
    """Stage 1: the vision tower learns to classify each patch (``labels``, `patch_labels`: pair,
    shape and size), reading each class's logit straight off one of its output dimensions; then,
    for ``linear_steps`` more, also to make ``features`` (`patch_features`) a *linear* function
    of its output.

    Why classification: regressing the features, the tower learnt colour in a few hundred
    steps but stayed blind to *shape* (it learnt that a patch was covered, not by what) after
    1,500; classifying shapes it reached 99.9% in the same 1,500. Why no head of its own: with
    a linear head the classes were right (87% of covered patches) but not a linear function of
    the tower's output, so no linear connector could pass them on. Why the second phase: even
    with the logits *being* output dimensions, the classes were separable in the output without
    being linear in it (a least-squares read-out got no image's pair set exactly right). Once
    the tower classifies, a bias-free linear head regressing the features (started at the
    least-squares read-out, weight ``linear_weight``, beside the cross-entropy) makes them
    linear: on a width-128 tower, exact pair sets of held-out images went from 4% to 87%. The
    second phase has an optimiser and warm-up/cosine schedule of its own at the same ``lr``
    (so it was measured). ``weights`` (one per image, e.g. `arrow_scene_weights`) draws the
    batches' images in proportion to them; uniformly without. Returns the loss of every step.
    """
    import torch

    vision = model.model.vision_model
    classes = label_classes(roles=labels.shape[-1] > len(label_classes()))
    if sum(classes) > vision.config.hidden_size:
        raise ValueError(f"the vision width must be at least {sum(classes)} (one dimension a patch class)")
    log_temperature = torch.nn.Parameter(torch.zeros(len(classes)))
    draws = torch.Generator().manual_seed(seed)
    losses: list[float] = []

    def train(n: int, params: list, cost) -> None:
        optimiser = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
        schedule = _schedule(optimiser, n)
        for _ in range(n):
            if weights is None:
                idx = torch.randint(0, len(pixels), (batch_size,), generator=draws)
            else:
                idx = torch.multinomial(weights, batch_size, replacement=True, generator=draws)
            states = vision(pixel_values=pixels[idx]).last_hidden_state
            loss = cost(states, idx)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            losses.append(float(loss.detach()))

    def classes_cost(states, idx):
        return _patch_cross_entropy(states, labels[idx], log_temperature)

    if steps:
        train(steps, [*vision.parameters(), log_temperature], classes_cost)
    if linear_steps:
        head = torch.nn.Parameter(least_squares_readout(model, pixels, features).T.contiguous())

        def linear_cost(states, idx):
            return classes_cost(states, idx) + linear_weight * ((states @ head.T - features[idx]) ** 2).sum(-1).mean()

        train(linear_steps, [*vision.parameters(), log_temperature, head], linear_cost)
    return losses


def _batched(fn, pixels, batch_size: int = 256):
    """``fn`` over ``pixels`` a batch at a time, concatenated, no gradient."""
    import torch

    with torch.no_grad():
        return torch.cat([fn(pixels[i : i + batch_size]) for i in range(0, len(pixels), batch_size)])


def patch_states(model, pixels):
    """The vision tower's output for each patch (images × patches × vision width), no gradient."""
    return _batched(lambda batch: model.model.vision_model(pixel_values=batch).last_hidden_state, pixels)


def least_squares_readout(model, pixels, features, batch_size: int = 256):
    """The linear map ``R`` (vision width × features) that best reads each patch's `patch_features`
    off the tower's output, through the normal equations in float64, a batch of images at a
    time so no copy of every state is held."""
    import torch

    width = model.model.vision_model.config.hidden_size
    gram = torch.zeros(width, width, dtype=torch.float64)
    cross = torch.zeros(width, features.shape[-1], dtype=torch.float64)
    for i in range(0, len(pixels), batch_size):
        states = patch_states(model, pixels[i : i + batch_size]).flatten(0, 1).double()
        gram += states.T @ states
        cross += states.T @ features[i : i + batch_size].flatten(0, 1).double()
    ridge = 1e-6 * gram.diagonal().mean() * torch.eye(width, dtype=torch.float64)  # states can be rank-deficient
    return torch.linalg.solve(gram + ridge, cross).float()


IMAGE_CONSTANT = 4.0
"""What the constant ``image`` feature weighs in a token, against 1 an object. The language
model's RMS norm divides each token by its length, which with a constant of 1 grows with the
number of objects, so a count read after the norm was no count: plurality stayed at chance.
At 4 the constant dominates the length of a sparse scene's token, counts pass the norm far
less distorted, and each object still weighs a quarter of the constant. Development probes (a
fresh language model on the same cached tokens, 2,000 steps): plurality 0.80 against 0.50 with
a constant of 1, counting 0.82 against 0.40."""


def token_scale(patches: int):
    """How strongly each of `feature_names` is written into an image token (multipliers), for
    images of ``patches`` patches: 1 for the per-object features, `IMAGE_CONSTANT` per image for
    the constant (which `patch_features` sets to 1 in every patch).
    """
    import torch

    names = feature_names()
    scale = torch.ones(len(names))
    scale[names.index("image")] = IMAGE_CONSTANT / patches
    return scale


def _patches(model) -> int:
    vision = model.config.vision_config
    return (vision.image_size // vision.patch_size) ** 2


def with_exact_arrow_ends(tokens: dict, exact: dict, basis, scale) -> dict:
    """Image tokens (path → 1 × hidden) with the arrow-end features (``<shape> arrow tail`` and
    ``arrow head``) they carry along ``basis`` made the scene's ``exact`` ones (path → summed
    `patch_features`), at ``scale`` (`token_scale`); every other direction is left as it is.

    Why, for stage 2's training tokens only: read back from the tower's tokens the ends come
    out at about half their size and noisy (error rms 0.27 against ends of 1), and a language
    model trained on them never learnt to use them (action ranked 0.55 on 300 fresh queries).
    The same stage 2 on the same tower's tokens with exact ends learnt them: 0.71 on such
    tokens and **0.65 on the tower's own**, which is what it is evaluated on."""
    import torch

    ends = [i for i, name in enumerate(feature_names()) if " arrow " in name]
    out = {}
    for path, token in tokens.items():
        if token.shape[0] != 1:
            raise ValueError(f"exact arrow ends need one image token an image; {path} has {token.shape[0]}")
        change = torch.zeros(basis.shape[1])
        change[ends] = exact[path][ends] - (token[0] @ basis[:, ends]) / scale[ends]
        out[path] = token + (basis @ (scale * change))[None]
    return out


def fit_connector(model, pixels, features, basis) -> None:
    """Make the connector write each cell's summed `patch_features` (times `token_scale`) along
    ``basis``; a cell is the patches one image token covers (the whole image at the default
    scale factor 12, a 3 × 3 block at 3).

    The Idefics3 connector is a bias-free linear map of the cell's patches side by side, so the
    `least_squares_readout` ``R`` as ``basis · diag(scale) · Rᵀ`` once per patch makes it exactly
    "read out every patch, add them up". When one token covers the image, the positions are
    then rewritten slot by slot from where each patch is (`_position_slots`).
    """
    import torch

    readout = least_squares_readout(model, pixels, features)
    proj = model.model.connector.modality_projection.proj
    scale = token_scale(_patches(model))
    per_patch = basis @ (scale[:, None] * readout.T)  # hidden × width
    weight = per_patch.repeat(1, proj.weight.shape[1] // per_patch.shape[1])
    if model.config.scale_factor**2 == _patches(model):  # one token an image: its slots are the patches
        weight += _position_slots(model, basis, readout, scale)
    with torch.no_grad():
        proj.weight.copy_(weight)


def _position_slots(model, basis, readout, scale):
    """What makes the connector write each shape's position (``<shape> x`` and ``y``) from *where*
    its patches are rather than from what the tower says: in the slot of patch p the position
    columns read that shape's share of the patch (its ``count`` read-out) times p's centre,
    which, summed over the image, is the share-weighted centre of the shape's patches (its
    centre within half a patch). Returned as the change to the connector's weight.

    Why: the tower's own read-out of positions was poor (held-out single-frame scenes: its
    ``x`` and ``y`` correlated 0.38 and 0.39 with the truth, against 0.99 for counts), so no word
    could carry where its shape is and the relation tasks sat at chance; the connector sees
    every patch in its own slot, so where a patch is costs nothing to use. Only when one token
    covers the image: with several, one weight serves cells at different places. Positions alone
    did not teach relations (they stayed at chance until `CURRICULUM`), but nothing could without them.
    """
    import torch

    from mmctx.data.shapes import SHAPES

    names = feature_names()
    vision = model.config.vision_config
    n = vision.image_size // vision.patch_size
    width = readout.shape[0]
    # Which patch each slot holds, as the connector's own pixel shuffle lays them out.
    order = torch.arange(n * n, dtype=torch.float32)[None, :, None].repeat(1, 1, width)
    slots = model.model.connector.pixel_shuffle(order, model.config.scale_factor).view(n * n, width)[:, 0].long()
    centre = (torch.arange(n, dtype=torch.float32) + 0.5) / n * 2 - 1  # -1 (left, top) … 1 (right, bottom)
    where = {"x": centre[slots % n], "y": centre[slots // n]}
    change = torch.zeros(basis.shape[0], n * n, width)
    for shape in SHAPES:
        count = readout[:, names.index(f"{shape} count")]
        for axis, at in where.items():
            column = names.index(f"{shape} {axis}")
            wanted = at[:, None] * count[None, :] - readout[None, :, column]  # slots × width
            change += scale[column] * basis[:, column, None, None] * wanted[None]
    return change.reshape(basis.shape[0], n * n * width)


def read_features(model, pixels, basis):
    """The `patch_features` summed over each image (images × features) that the model's image
    tokens carry, read back through ``basis``: what stage 1 hands to the language model."""
    return (all_image_tokens(model, pixels) @ basis).sum(1) / token_scale(_patches(model))


def patch_accuracy(model, pixels, labels) -> tuple[float | None, float | None]:
    """How often the tower's pair dimensions (`pretrain_vision`) name the right colour–shape pair
    (``labels``, `patch_labels`): on covered patches, and ("none") on the others (None where
    there are no such patches)."""
    guess = patch_states(model, pixels)[..., : label_classes()[0]].argmax(-1)
    truth = labels[..., 0]
    covered = truth > 0

    def share(hits) -> float | None:
        return float(hits.float().mean()) if hits.numel() else None

    return share(guess[covered] == truth[covered]), share(guess[~covered] == 0)


def pair_sets_exact(read, features) -> float:
    """Share of images whose set of colour–shape pairs (more than half an object, `read_features`
    and true) is exactly right."""
    pairs = pair_columns()
    truth = features[..., pairs].sum(1) > 0.5
    return float(((read[..., pairs] > 0.5) == truth).all(-1).float().mean())


def all_image_tokens(model, pixels):
    """`image_tokens` of many images, a batch at a time, no gradient."""
    return _batched(lambda batch: image_tokens(model, batch), pixels)


def cached_image_tokens(model, paths: list[str], pixels) -> dict:
    """Each image's tokens (``paths[i]`` → tokens of ``pixels[i]``) from the (now frozen) vision
    tower, computed once: stage 2 trains the language model alone, and re-running the tower on
    every batch would be most of its cost."""
    return dict(zip(paths, all_image_tokens(model, pixels)))


# --- training --------------------------------------------------------------------------------


FOCUS_TASKS = ("attribute_recognition", "object_recognition")  # the tasks with the ≥ 80% bar
SPATIAL_TASKS = ("spatial_relations",)  # comparing two named objects' positions
DRILLED = ("spatial_relations", "temporal", "commonsense")  # the relations `RESTART` drills
DRILL_SCENE_TASKS = ("temporal", "commonsense")  # drilled on scenes of their own too (`drill_scenes_per_task`)
DRILL_SEED_BASE = 5000  # those scenes: pool seed 5000 + seed (stage 2 only; disjoint from the rest)
DRILL = "drill"  # the training benchmark's subfolder holding them


@dataclass(frozen=True)
class Mixture:
    """What a training batch is: P(shots = 0), the prompt styles, how often a query comes from
    `FOCUS_TASKS` (they need a colour/shape/size *binding*, the slowest thing to learn) and how
    often from ``drill_tasks``."""

    zero_shot: float = 0.8
    styles: tuple[float, float, float] = (0.45, 0.45, 0.1)  # the prompt asks for: letter, text, cot
    focus: float = 0.5
    drill: float = 0.0
    drill_tasks: tuple[str, ...] = SPATIAL_TASKS
    tokens_per_batch: int = 2048  # few-shot batches hold fewer, longer sequences

    def __post_init__(self):
        if min(self.focus, self.drill) < 0 or self.focus + self.drill > 1:
            raise ValueError(f"focus ({self.focus}) and drill ({self.drill}) are shares: each ≥ 0, ≤ 1 together")


@dataclass(frozen=True)
class Phase:
    """A stretch of stage 2, up to ``until`` (a fraction of its steps), drawing queries from
    `FOCUS_TASKS` with P = ``focus`` and from ``drill_tasks`` with P = ``drill``."""

    until: float
    focus: float
    drill: float = 0.0
    drill_tasks: tuple[str, ...] = SPATIAL_TASKS

    def __post_init__(self):
        object.__setattr__(self, "drill_tasks", tuple(self.drill_tasks))  # a list, from metrics.json


# Spatial relations sit on a plateau (every option equally likely, on training queries too) as
# long as they are a few percent of the queries: comparing two fetched words' positions pays off
# only once heads and read-out change together. Continuing the previous shipped model with stage
# 2's batches (a development script): 1,500 steps with them at 30% of the queries left them at
# 0.20–0.45; 1,000 steps of them alone took held-out "where is A relative to B?" from 0.25 to
# 0.90 (yes/no 0.50 → 0.75) at a cost elsewhere (all kinds 0.76 → 0.62), and 1,000 more at 30%
# restored the rest (0.74–0.82) and kept them (1.00 and 0.85). The lone stretch comes while the
# learning rate is still high.
CURRICULUM = (Phase(0.6, focus=0.5), Phase(0.7, focus=0.0, drill=1.0), Phase(1.0, focus=0.35, drill=0.3))
# Temporal and commonsense stay at chance under `CURRICULUM`, also with a stretch of them alone
# inside it, but a converged model learns them under a fresh optimiser at a constant rate. Half
# the restart's first stretch keeps every other task in the batches: drilled alone, the binding
# tasks decayed (attribute 0.95 → 0.79 in a full run). Commonsense stays at chance here; a stretch
# of it at 40% taught it in a continuation but not in four full runs (reference/docs/development.md).
RESTART = (
    Phase(0.6, focus=0.25, drill=0.5, drill_tasks=DRILLED),
    Phase(1.0, focus=0.35, drill=0.3, drill_tasks=DRILLED),
)


def phase_ends(steps: int, curriculum: Sequence[Phase]) -> list[int]:
    """Where each phase of ``steps`` stops (exclusive, counted from 0): step s belongs to the first
    phase whose end exceeds it; a phase may be empty in a short run."""
    return [math.ceil(phase.until * steps) for phase in curriculum]


def mixture_at(step: int, steps: int, mixture: Mixture, curriculum: Sequence[Phase]) -> Mixture:
    """``mixture`` with the sources of the phase holding ``step`` of ``steps`` (unchanged past the last)."""
    for phase, end in zip(curriculum, phase_ends(steps, curriculum)):
        if step < end:
            return replace(mixture, focus=phase.focus, drill=phase.drill, drill_tasks=phase.drill_tasks)
    return mixture


class QueryPools:
    """The samples `draw_batch` picks queries from: for zero-shot batches the benchmark's queries,
    demos and ``extra`` samples (drilled queries from ``drill_scenes`` too), else its queries only.

    Each list is built on first use and kept, in the order it was built: filtering some 22,000
    samples twice a batch was a tenth of a stage-2 step, and the same lists give the same draws.
    """

    def __init__(self, bench: Benchmark, extra: Sequence[Sample] = (), drill_scenes: Sequence[Sample] = ()):
        self.bench, self.extra, self.drill_scenes = bench, list(extra), list(drill_scenes)
        self._made: dict[tuple, list[Sample]] = {}

    def pool(self, zero: bool) -> list[Sample]:
        return self._kept(
            ("pool", zero), lambda: list(self.bench.queries) + (list(self.bench.demos) + self.extra if zero else [])
        )

    def focus(self, zero: bool, share: float) -> list[Sample]:
        return self._kept(("focus", zero, share > 0), lambda: _source(self.pool(zero), FOCUS_TASKS, share))

    def drilled(self, zero: bool, tasks: tuple[str, ...], share: float) -> list[Sample]:
        scenes = self.drill_scenes if zero else []
        return self._kept(("drilled", zero, tasks, share > 0), lambda: _source(self.pool(zero) + scenes, tasks, share))

    def _kept(self, key: tuple, make: Callable[[], list[Sample]]) -> list[Sample]:
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]


def draw_batch(rng: random.Random, pools: QueryPools, renderer: Renderer, mixture: Mixture) -> list[Conversation]:
    """A batch of conversations of one shape (same shots and style), so little is padding, with
    its queries from ``pools``."""
    zero = rng.random() < mixture.zero_shot
    style: AnswerStyle = rng.choices(STYLES, weights=mixture.styles)[0]
    shots = 0 if zero else rng.randint(1, MAX_SHOTS)
    strategy = rng.choice(("random", "similar"))
    pool = pools.pool(zero)
    focus = pools.focus(zero, mixture.focus)
    drilled = pools.drilled(zero, tuple(mixture.drill_tasks), mixture.drill)
    batch: list[Conversation] = []
    tokens = 0
    while tokens < mixture.tokens_per_batch:
        draw = rng.random()
        source = focus if draw < mixture.focus else drilled if draw < mixture.focus + mixture.drill else pool
        query = with_rationale(rng.choice(source))
        demos = pools.bench.demos_for(query, strategy, shots, need_rationale=style == "cot") if shots else []
        if shots:
            demos = rng.sample(demos, len(demos))
        conv = renderer.render(query, demos, style, seed=rng.randrange(1 << 30))
        batch.append(conv)
        tokens += len(conv.ids)
    return batch


def _source(pool: list[Sample], tasks: Sequence[str], share: float) -> list[Sample]:
    """The pool's samples of ``tasks``; a task without any is an error when a share of the batch
    must come from them."""
    found = [s for s in pool if s.task in tasks]
    present = {s.task for s in found}
    lacking = [t for t in tasks if t not in present]
    if share > 0 and lacking:
        raise ValueError(
            f"the mixture draws {share:.0%} of its queries from {', '.join(tasks)}; the benchmark lacks {', '.join(lacking)}"
        )
    return found


def prefetched(make: Callable[[int], T], n: int, depth: int = 8) -> Iterator[T]:
    """``make(0)``, …, ``make(n - 1)`` in that order, each made on a background thread up to
    ``depth`` items ahead of the caller; an error in ``make`` is raised here, at its item.

    Why: drawing, rendering and collating a stage-2 batch is Python (about an eighth of a step),
    while the step's kernels leave the second core of a 2-core CPU partly idle. ``make`` runs
    on one thread, item after item, so a generator it draws from gives the very same items as
    drawn inline (tested): the run is the same, only sooner (``benchmarks/prefetch_speed.py``).
    """
    import queue
    import threading

    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        for i in range(n):
            if stop.is_set():
                return
            try:
                items.put((make(i), None))
            except BaseException as error:  # handed to the caller, who raises it
                items.put((None, error))
                return

    thread = threading.Thread(target=work, name="mmctx-prefetch", daemon=True)
    thread.start()
    try:
        for _ in range(n):
            item, error = items.get()
            if error is not None:
                raise error
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a pending put, so the thread ends with the caller
            try:
                items.get(timeout=0.05)
            except queue.Empty:
                pass


def collate(batch: list[Conversation], images: dict, pad_id: int):
    """Right-padded ids, attention mask, loss mask (the query's reply) and the image tokens of
    every image in the order the model meets them (row by row)."""
    import torch

    n, width = len(batch), max(len(c.ids) for c in batch)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    weights = torch.zeros((n, width))
    for row, c in enumerate(batch):
        ids[row, : len(c.ids)] = torch.tensor(c.ids)
        mask[row, : len(c.ids)] = 1
        weights[row, : len(c.ids)] = torch.tensor(c.final, dtype=torch.float)
    tokens = torch.stack([images[path] for c in batch for path in c.images])
    return ids, mask, weights, tokens


def forward_cached(model, ids, mask, tokens, image_id: int, with_hidden_states: bool = False):
    """The language model's output (its final states, before the vocabulary: `reply_loss`
    projects the reply's alone) with ``tokens`` (images × tokens × hidden, `collate`) in place
    of the image placeholders: what it computes from pixels, without the tower (tested)."""
    embeds = model.get_input_embeddings()(ids)
    embeds = embeds.masked_scatter((ids == image_id)[..., None], tokens.to(embeds.dtype))
    return model.model(inputs_embeds=embeds, attention_mask=mask, output_hidden_states=with_hidden_states)


def reply_loss(model, states, ids, weights):
    """Mean next-token cross-entropy over the reply (``weights``, `collate`'s loss mask) from the
    final ``states`` (`forward_cached`). Only the reply's positions go through the vocabulary
    projection: the same loss as projecting every position, for a cheaper step
    (``benchmarks/reply_logits_speed.py``)."""
    import torch

    kept = weights[:, 1:] > 0
    logits = model.lm_head(states[:, :-1][kept])
    losses = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][kept], reduction="none")
    w = weights[:, 1:][kept]
    return (losses * w).sum() / w.sum().clamp(min=1e-6)


TRAINING_DEMOS = 8


def training_benchmark(root: Path, seed: int, queries_per_task: int, pool_per_task: int) -> Benchmark:
    """The shapes-world benchmark the conversations come from: seed ``TRAIN_SEED_BASE + seed``."""
    from mmctx.data.shapes import build_benchmark

    # 8 ranked demos per list, as the shipped checkpoint was trained: a longer list keeps the same
    # first 8 but adds pool samples to the demo table the conversations draw on.
    return build_benchmark(
        Path(root), queries_per_task=queries_per_task, demos_per_query=TRAINING_DEMOS, seed=TRAIN_SEED_BASE + seed,
        pool_per_task=pool_per_task,
    )  # fmt: skip


START_NORM = 0.3  # the norm of a started head's direction in the embeddings, about the embeddings' own
IMAGE_PRIOR = 1.2  # `look_at_images`' strength (at initialisation, on a 2-object scene, text positions
# scored the image token about 20.6 and other text tokens about 2.5 in head 0)


def look_at_images(model, basis, seed: int, strength: float = IMAGE_PRIOR) -> None:
    """Start the first attention head of the language model's first layer looking at image tokens.

    Why: at the start of stage 2 attention is near uniform over a prompt of about 100 tokens, so
    the one image token is about 1% of what the reply sees, and a language model can sit on its
    no-information plateau for thousands of steps. In development probes (fresh language models
    on cached tokens, `IMAGE_CONSTANT` 4), two of three started plainly had left it by 2,000
    steps and the third was still on it at 4,000 (held-out counting at 0.25); all four started
    this way had left it by 2,500. Few runs, but the shipped model is trained once, and this
    costs nothing.

    How: every text embedding gets one shared direction ``u`` (random, of norm `START_NORM`);
    head 0's query reads ``u`` and its key (shared by its grouped-query group) reads the image
    constant's direction of ``basis``, both in the rotary pair of lowest
    frequency, which position barely turns. ``u`` is drawn with ``seed``, as ``basis`` is, so
    it is not orthogonal to it: for seed 0 its projection on the image constant is 0.12, which
    leaves text keys small but not zero there (text-to-text scores about 2.5 against 20.6 for
    the image), and about half of it lies in the scene features' span. Kept as trained: the
    shipped weights come from exactly this. The head's values and everything else stay random
    and are learnt.
    """
    import torch

    text = model.model.text_model
    u = _text_direction(text.config.hidden_size, seed)
    with torch.no_grad():
        text.embed_tokens.weight += START_NORM * u
    _start_head(text.layers[0].self_attn, 0, u, basis[:, feature_names().index("image")], strength)


def _text_direction(hidden: int, seed: int):
    """The unit direction `look_at_images` adds to every text embedding (drawn with ``seed``)."""
    import torch

    u = torch.randn(hidden, generator=torch.Generator().manual_seed(seed))
    return u / u.norm()


def _start_head(attention, head: int, query, key, strength: float) -> None:
    """Make ``head``'s query read ``query`` and its key read ``key``, in the rotary pair of lowest
    frequency (dimensions i and i + head_dim/2; the last i turns slowest), which position barely
    turns. With grouped-query attention the key is its group's (`_own_keys` checks that started
    heads do not share one)."""
    import torch

    config = attention.config
    group = config.num_attention_heads // config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    row = head_dim // 2 - 1
    with torch.no_grad():
        attention.q_proj.weight[head * head_dim + row] = strength * query
        attention.k_proj.weight[(head // group) * head_dim + row] = strength * key


def _own_keys(config, heads: Sequence[int]) -> None:
    """Refuse to start ``heads`` if two of them share a key/value head: their starts would
    overwrite each other."""
    group = config.num_attention_heads // config.num_key_value_heads
    if len({h // group for h in heads}) < len(heads):
        raise ValueError(
            f"heads {list(heads)} share key/value heads ({config.num_key_value_heads} for "
            f"{config.num_attention_heads} heads): each started head needs a key of its own"
        )


WORD_PRIOR = 1.2  # `look_at_words`' strength, as `IMAGE_PRIOR`


def look_at_words(model, tokenizer, basis, seed: int, strength: float = WORD_PRIOR) -> None:
    """Start heads 1 and 2 of the first layer looking at shape words and at colour words; call
    after `look_at_images`, whose text direction their queries read.

    Why: "what colour is the diamond?" needs the question's shape at the reply, and in models
    trained without it no head of either layer gave the question's shape word any of the reply
    position's attention (0.00). On its own this start did not last (the heads ended on the
    listed options, and a full run gained nothing); with `WordGrounding` giving the words
    something worth fetching it does (reference/docs/development.md). Each word set gets its own
    direction, orthogonal to ``basis`` and the text direction, added (norm `START_NORM`) to its
    words' embeddings (with and without a leading space, lower case: how questions and options
    write them; `WordGrounding` also takes capitalised ones, which start sentences of captions
    and rationales); the head's key reads it.
    """
    import torch

    from mmctx.data.shapes import COLOURS, SHAPES

    text = model.model.text_model
    hidden = text.config.hidden_size
    _own_keys(text.config, (0, 1, 2))
    if hidden < basis.shape[1] + 3:
        raise ValueError(f"width {hidden} leaves no room for 2 word directions beside {basis.shape[1]} features")
    u = _text_direction(hidden, seed)
    taken = torch.linalg.qr(torch.cat([basis, u[:, None]], 1))[0]
    draws = torch.Generator().manual_seed(seed + 2)  # a draw of its own: `feature_basis` and `u` use seed
    for head, words in ((1, SHAPES), (2, COLOURS)):
        w = torch.randn(hidden, generator=draws)
        w = w - taken @ (taken.T @ w)
        w = w / w.norm()
        taken = torch.cat([taken, w[:, None]], 1)
        ids = sorted(word_token_ids(tokenizer, words, capitalised=False))
        with torch.no_grad():
            text.embed_tokens.weight[ids] += START_NORM * w
        _start_head(text.layers[0].self_attn, head, u, w, strength)


def word_token_ids(tokenizer, words: Sequence[str], capitalised: bool = True) -> dict[int, str]:
    """The one-token spellings of ``words`` (bare, after a space, and capitalised), token id → word.
    Refuses words that have no one-token spelling after a space: prompts would never show them
    as one token."""
    missing = [w for w in words if len(tokenizer.encode(f" {w}", add_special_tokens=False)) != 1]
    if missing:
        raise ValueError(f"the tokenizer splits {missing} into several tokens")
    found = {}
    for word in words:
        forms = (word, word.capitalize()) if capitalised else (word,)
        for form in forms:
            for spelt in (form, f" {form}"):
                ids = tokenizer.encode(spelt, add_special_tokens=False)
                if len(ids) == 1:
                    found[ids[0]] = word
    return found


GROUNDING_WEIGHT = 1.0  # the grounding loss's weight beside the reply's cross-entropy
GROUNDED_LAYER = 1  # hidden state read (1: the first layer's output, what the second layer's heads fetch)


def grounding_columns() -> dict[str, dict[str, list[int]]]:
    """What each word is taught to carry about the image (`WordGrounding`): per word group, each
    word's `feature_names` columns, in an order shared by the group. A shape word: that shape's
    colours, sizes, count, position and arrow ends; a colour word: which shapes have it."""
    from mmctx.data.shapes import COLOURS, SHAPES, SIZES

    index = {name: i for i, name in enumerate(feature_names())}
    return {
        "shape": {
            s: [index[f"{c} {s}"] for c in COLOURS]
            + [index[f"{z} {s}"] for z in SIZES]
            + [index[f"{s} {fact}"] for fact in SHAPE_FACTS]
            for s in SHAPES
        },
        "colour": {c: [index[f"{c} {s}"] for s in SHAPES] for c in COLOURS},
    }


class WordGrounding:
    """An auxiliary loss of stage 2 (its read-outs are discarded after training): in zero-shot
    conversations, every shape or colour word's hidden state after the first layer
    (`GROUNDED_LAYER`) must give, through one linear read-out per word group, what the image
    shows about that word (`grounding_columns`: for "diamond", the diamonds' colours, sizes,
    count, position and arrows); squared error against the scene's exact features.

    Why: the reply to "what colour is the diamond?" needs the diamond's colour, a product of the
    question and the image, and no recipe without this taught it: held-out colour-of-shape
    stayed at 0.27–0.42 (chance 0.25) whatever the heads started on. A word's own position can
    compute that product in one hop (head 0 already brings it the image, its MLP knows the
    word); the second layer then only has to fetch the word. Read-outs shared by a group keep
    the answer in the same directions whichever shape is asked about. Few-shot conversations are
    skipped: there a word may be about a demonstration's image.
    """

    def __init__(self, tokenizer, hidden: int, scenes: dict, weight: float = GROUNDING_WEIGHT):
        import torch

        self.scenes, self.weight = scenes, weight  # image path → the scene's `feature_names`, summed
        self.groups = grounding_columns()
        self.words: dict[int, tuple[str, list[int]]] = {}
        widths = {}
        for group, columns in self.groups.items():
            (widths[group],) = {len(c) for c in columns.values()}  # one read-out serves the whole group
            for token, word in word_token_ids(tokenizer, list(columns)).items():
                if token in self.words:
                    raise ValueError(f"token {token} spells words of two groups ({word!r}, {self.words[token]})")
                self.words[token] = (group, columns[word])
        self.readouts = torch.nn.ModuleDict({group: torch.nn.Linear(hidden, n) for group, n in widths.items()})

    def parameters(self) -> list:
        """The read-outs' parameters, to train beside the model's (and discard after)."""
        return list(self.readouts.parameters())

    def loss(self, batch: Sequence[Conversation], hidden):
        """The grounding loss of ``batch`` (``hidden``: the model's hidden states at
        `GROUNDED_LAYER`, batch × positions × width), or None when the batch is few-shot or names
        no word."""
        import torch

        if any(len(c.images) != 1 for c in batch):
            return None
        parts = [
            ((self.readouts[group](hidden[rows, positions]) - torch.stack(targets)) ** 2).sum(-1).mean()
            for group, (rows, positions, targets) in self.targets(batch).items()
            if rows
        ]
        return self.weight * sum(parts) if parts else None

    def targets(self, batch: Sequence[Conversation]) -> dict[str, tuple[list[int], list[int], list]]:
        """Per word group: the rows and positions of its words in ``batch`` and what each must give."""
        found: dict[str, tuple[list[int], list[int], list]] = {group: ([], [], []) for group in self.groups}
        for row, conv in enumerate(batch):
            scene = self.scenes[conv.images[0]]
            for position, token in enumerate(conv.ids):
                if token in self.words:
                    group, columns = self.words[token]
                    rows, positions, targets = found[group]
                    rows.append(row)
                    positions.append(position)
                    targets.append(scene[columns])
        return found


def _image_paths(renderer: Renderer, samples: Sequence[Sample]) -> list[str]:
    """The samples' (first) image paths, resolved: the keys of the cached image tokens."""
    return [str((renderer.root / s.images[0]).resolve()) for s in samples]


def _pixels(renderer: Renderer, samples: Sequence[Sample]):
    """The samples' `_image_paths` and their pixel values stacked."""
    import torch

    paths = _image_paths(renderer, samples)
    # PIL's resizes (to 448 px and back, as at evaluation) release the GIL: a thread a core.
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        pixels = torch.stack(list(pool.map(renderer.pixel_values, paths)))
    renderer.pixels.clear()
    return paths, pixels


def _moved(samples: list[Sample], folder: str) -> list[Sample]:
    """``samples`` generated under the benchmark's ``folder``, with image paths relative to the
    benchmark (so one renderer resolves every image); ids are kept, nothing here looks them up."""
    return [s.model_copy(update={"images": [f"{folder}/{p}" for p in s.images]}) for s in samples]


def _adamw(params: list, lr: float):
    import torch

    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01, betas=(0.9, 0.98))


def _schedule(optimiser, steps: int):
    """Linear warm-up over 5% of the steps, then cosine decay to zero."""
    import torch

    steps = max(1, steps)  # zero steps: a schedule nobody steps
    warmup = max(1, steps // 20)
    return torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )


def train_shapes_vlm(
    out: Path,
    seed: int = 0,
    steps: int = 7000,
    restart_steps: int = 2500,
    vision_steps: int = 2500,
    linear_steps: int = 1500,
    lr: float = 3e-3,
    restart_lr: float = 1e-3,
    vision_lr: float = 5e-3,
    vision_batch: int = 64,
    queries_per_task: int = 300,
    pool_per_task: int = 400,
    vision_pool_per_task: int = 1000,
    drill_scenes_per_task: int = 2000,
    arch: Architecture = Architecture(),
    mixture: Mixture = Mixture(),
    curriculum: Sequence[Phase] = CURRICULUM,
    restart: Sequence[Phase] = RESTART,
    progress: bool = True,
    work: Path | None = None,
    arrow_roles: bool = True,
    neighbour_layers: Sequence[int] = NEIGHBOUR_LAYERS,
    arrow_share: float = ARROW_SHARE,
    exact_arrow_ends: bool = True,
) -> dict:
    """Train an Idefics3 of ``arch`` on shapes-world and save it (model + processor) to ``out``.

    Stage 1 (``vision_steps`` + ``linear_steps`` batches of ``vision_batch`` images: the training
    benchmark's scenes and ``vision_pool_per_task`` more per task and format, pool seed
    ``VISION_SEED_BASE + seed``, stored under the benchmark's ``EXTRA`` folder) trains the vision
    tower to classify each patch and then to make the features linear in its output
    (`pretrain_vision`); `fit_connector` makes the connector write the image's `patch_features`,
    times `token_scale`, along a fixed `feature_basis`. Stage 2 (``steps`` batches of about
    ``mixture.tokens_per_batch`` tokens) freezes them and trains the language model on rendered
    conversations (`draw_batch`; zero-shot ones also ask the pool's scenes), heads 0, 1 and 2 of
    its first layer started on image tokens, shape words and colour words (`look_at_images`,
    `look_at_words`); the loss is the query's reply's plus, in zero-shot batches, `WordGrounding`'s.
    Where queries come from follows ``curriculum`` (`mixture_at`): `CURRICULUM` turns to spatial
    relations alone for a tenth of the steps, then keeps them at 30%. Then a restart:
    ``restart_steps`` more with a fresh AdamW at a constant ``restart_lr``, the reply's loss alone,
    queries drawn as ``restart`` says (`RESTART` drills `DRILLED`), its zero-shot drilled ones also
    from ``drill_scenes_per_task`` scenes per task and format of `DRILL_SCENE_TASKS` (pool seed
    ``DRILL_SEED_BASE + seed``, under the benchmark's `DRILL` folder; stage 1 never sees them).
    Everything is drawn from generators seeded with ``seed`` and ``torch.manual_seed(seed)``. The
    extra scenes keep their pool ids (only their image paths move); nothing looks samples up by
    id here. ``arrow_roles`` adds the objects' arrow roles to stage 1's patch classes
    (`arrow_role_labels`) and ``neighbour_layers`` keeps a head of those tower layers on each
    patch's neighbourhood (`look_at_neighbours`); ``arrow_share`` > 0 gives stage 1's scenes with
    an arrow that share of its draws (`arrow_scene_weights`); ``exact_arrow_ends`` trains stage 2
    on image tokens whose arrow ends are the scenes' exact ones (`with_exact_arrow_ends`). The
    recipe uses all four: without them action ranked at chance (the development record).

    Returns metrics: ``train_seconds`` (both stages), ``total_seconds`` (data, tokenizer and
    pixels too), ``parameters``, per-step ``losses`` (the reply's, restart included) and ``vision_losses`` (both
    phases), ``grounding_losses`` (one a zero-shot step), stage 1's checks on held-out scenes
    (``patch_accuracy``, ``background_accuracy``, ``pair_sets_exact``), the starts' and the
    grounding's settings (``image_prior``, ``word_prior``, ``grounding_weight``,
    ``grounded_layer``), seeds, data sizes (``zero_shot_extra``: the pool's scenes in stage 2;
    ``drill_scenes_asked``: how many of the restart's queries asked its own scenes).
    """
    import torch

    from mmctx.curate.embed import _progress
    from mmctx.data.shapes.pool import generate_pool

    out = Path(out)
    started_total = time.perf_counter()
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory(prefix="mmctx-shapes-vlm-") as tmp:
        root = Path(work) if work is not None else Path(tmp) / "train"
        bench = training_benchmark(root, seed, queries_per_task, pool_per_task)
        samples = list(bench.queries) + list(bench.demos)
        # Inside the benchmark's folder, so one renderer resolves every image.
        scenes = _moved(generate_pool(bench.root / EXTRA, vision_pool_per_task, VISION_SEED_BASE + seed), EXTRA)
        random.Random(seed).shuffle(scenes)  # the pool comes task by task; its last tenth checks stage 1
        drill_scenes = _moved(
            generate_pool(bench.root / DRILL, drill_scenes_per_task, DRILL_SEED_BASE + seed, list(DRILL_SCENE_TASKS)),
            DRILL,
        )
        tokenizer = build_shapes_tokenizer(prompt_corpus(bench), arch.vocab_size)
        build_shapes_vlm(out, tokenizer, arch, seed)
        model, processor, adapter = load_for_training(out)
        if neighbour_layers:
            look_at_neighbours(model, neighbour_layers)
        renderer = Renderer(processor, adapter, bench.root)
        every = samples + scenes
        features = torch.stack([patch_features(s.meta, arch.image_size, arch.patch_size) for s in every])
        labels = torch.stack(
            [
                patch_labels(patch_features(s.meta, arch.image_size, arch.patch_size, "coverage"), arrow_roles)
                for s in every
            ]
        )
        paths, pixels = _pixels(renderer, every)
        held = len(scenes) // 10
        fit, check = slice(None, len(pixels) - held), slice(len(pixels) - held, None)
        basis = feature_basis(arch.hidden, seed)

        started = time.perf_counter()
        model.train()
        with _progress(progress) as bar:
            task = bar.add_task("shapes VLM: vision tower", total=1)
            vision_losses = pretrain_vision(
                model,
                pixels[fit],
                features[fit],
                labels[fit],
                vision_steps,
                vision_batch,
                vision_lr,
                seed,
                linear_steps,
                weights=arrow_scene_weights([s.meta for s in every[fit]], arrow_share),
            )
            model.eval()  # from here the tower is as at evaluation (no dropout): its tokens are cached
            fit_connector(model, pixels[fit], features[fit], basis)
            read = read_features(model, pixels[check], basis) if held else None
            exact = pair_sets_exact(read, features[check]) if held else None
            ends = arrow_ends_read(read, [s.meta for s in every[-held:]]) if held else (None, None)
            neighbours = [neighbour_attention(model, pixels[check][:64], layer) for layer in neighbour_layers]
            covered, uncovered = patch_accuracy(model, pixels[check], labels[check]) if held else (None, None)
            images = cached_image_tokens(model, paths, pixels)
            bar.advance(task)
        truth = dict(zip(paths, features.sum(1)))  # each visible object's shares add up to one
        vision_seconds = time.perf_counter() - started
        del pixels, features, labels
        if drill_scenes:
            images.update(cached_image_tokens(model, *_pixels(renderer, drill_scenes)))
        if exact_arrow_ends:
            scene_truth = dict(truth)
            scene_truth.update(
                (path, patch_features(s.meta, arch.image_size, arch.patch_size).sum(0))
                for path, s in zip(_image_paths(renderer, drill_scenes), drill_scenes)
            )
            images = with_exact_arrow_ends(images, scene_truth, basis, token_scale(_patches(model)))

        vision = [*model.model.vision_model.parameters(), *model.model.connector.parameters()]
        for p in vision:
            p.requires_grad_(False)
        look_at_images(model, basis, seed)
        look_at_words(model, tokenizer, basis, seed)
        grounding = WordGrounding(tokenizer, arch.hidden, truth)
        model.train()
        rng = random.Random(seed)
        losses: list[float] = []
        grounding_losses: list[float] = []

        def train(n: int, phases: Sequence[Phase], optimiser, schedule, grounded_by: WordGrounding | None, drilled):
            """``n`` steps; returns how many queries asked one of the ``drilled`` scenes."""
            params = [p for group in optimiser.param_groups for p in group["params"]]
            drilled_paths, asked = set(_image_paths(renderer, drilled)), 0
            pools = QueryPools(bench, scenes, drilled)

            def draw(step: int):
                batch = draw_batch(rng, pools, renderer, mixture_at(step, n, mixture, phases))
                return batch, collate(batch, images, tokenizer.pad_token_id)

            for batch, (ids, mask, weights, tokens) in prefetched(draw, n):
                asked += sum(c.images[-1] in drilled_paths for c in batch)
                outputs = forward_cached(model, ids, mask, tokens, renderer.image_id, grounded_by is not None)
                loss = reply_loss(model, outputs.last_hidden_state, ids, weights)
                losses.append(float(loss.detach()))
                grounded = grounded_by.loss(batch, outputs.hidden_states[GROUNDED_LAYER]) if grounded_by else None
                if grounded is not None:
                    grounding_losses.append(float(grounded.detach()))
                    loss = loss + grounded
                optimiser.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimiser.step()
                if schedule is not None:
                    schedule.step()
                bar.advance(task)
            return asked

        language = [p for p in model.parameters() if p.requires_grad]
        with _progress(progress) as bar:
            task = bar.add_task("shapes VLM: conversations", total=steps + restart_steps)
            optimiser = _adamw([*language, *grounding.parameters()], lr)
            train(steps, curriculum, optimiser, _schedule(optimiser, steps), grounding, ())
            # The drill scenes have no `WordGrounding` truth: the restart alone draws them.
            drill_scenes_asked = train(restart_steps, restart, _adamw(language, restart_lr), None, None, drill_scenes)
        train_seconds = time.perf_counter() - started
        for p in vision:
            p.requires_grad_(True)
    model.eval()
    model.save_pretrained(out)  # the processor saved by `build_shapes_vlm` stays as built (96 px)
    return {
        "train_seconds": train_seconds,
        "vision_seconds": vision_seconds,
        "total_seconds": time.perf_counter() - started_total,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": steps,
        "restart_steps": restart_steps,
        "restart_lr": restart_lr,
        "vision_steps": vision_steps,
        "linear_steps": linear_steps,
        "vision_batch": vision_batch,
        "tokens_per_batch": mixture.tokens_per_batch,
        "mixture": asdict(mixture),
        "focus_tasks": list(FOCUS_TASKS),
        "curriculum": [asdict(phase) for phase in curriculum],
        "restart": [asdict(phase) for phase in restart],
        "drill_scene_tasks": list(DRILL_SCENE_TASKS),
        "drill_scenes_per_task": drill_scenes_per_task,
        "drill_scenes": len(drill_scenes),
        "drill_scenes_asked": drill_scenes_asked,
        "drill_seed": DRILL_SEED_BASE + seed,
        "scene_features": len(feature_names()),
        "image_constant": IMAGE_CONSTANT,
        "image_prior": IMAGE_PRIOR,
        "word_prior": WORD_PRIOR,
        "grounding_weight": GROUNDING_WEIGHT,
        "grounded_layer": GROUNDED_LAYER,
        "grounding_losses": grounding_losses,
        "vision_pool_per_task": vision_pool_per_task,
        "vision_seed": VISION_SEED_BASE + seed,
        "vision_scenes": len(paths) - held,
        "zero_shot_extra": len(scenes),
        "vision_heldout_scenes": held,
        "pair_sets_exact": exact,
        "arrow_sources_read": ends[0],
        "arrow_targets_read": ends[1],
        "arrow_roles": arrow_roles,
        "neighbour_layers": list(neighbour_layers),
        "arrow_share": arrow_share,
        "exact_arrow_ends": exact_arrow_ends,
        "arrow_scenes": sum(has_arrow(s.meta) for s in every[fit]),
        "neighbour_attention": neighbours,
        "patch_accuracy": covered,
        "background_accuracy": uncovered,
        "architecture": {**asdict(arch), "image_tokens": arch.image_tokens},
        "vocab_size": len(tokenizer),
        "lr": lr,
        "vision_lr": vision_lr,
        "queries_per_task": queries_per_task,
        "pool_per_task": pool_per_task,
        "seed": seed,
        "train_seed": TRAIN_SEED_BASE + seed,
        "train_samples": len(samples),
        "train_queries": len(bench.queries),
        "losses": losses,
        "vision_losses": vision_losses,
        "path": str(out),
    }
