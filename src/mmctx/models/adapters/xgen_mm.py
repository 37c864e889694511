"""xGen-MM (BLIP-3) r-v1.5: remote code, ``<image>`` placeholders, two prompt formats.

``xgen_mm`` (``Salesforce/xgen-mm-phi3-mini-instruct-interleave-r-v1.5`` and the other
instruct checkpoints): Phi-3 chat, ``<|system|>\\n…<|end|>\\n<|user|>\\n<image> …<|end|>\\n
<|assistant|>\\n``, with the model card's system message when the prompt has none.
``xgen_mm_base`` (``…-base-r-v1.5``): the pre-training format, no turns: each demo is
``<image>`` + its text + the answer + ``<|endofchunk|>``, and the query is left open.

What this adapter covers: both prompt formats (`render`); `inputs` as the model card builds
them (tokenizer on the prompts; one ``image_processor([image], image_aspect_ratio="anyres")``
tensor per image, nested per prompt, and ``image_size`` (width, height) per image); `prepare`,
which runs the checkpoint's ``model.update_special_tokens(tokenizer)`` (it adds ``<image>``
and ``<|endofchunk|>`` to the tokenizer and tells the model their ids) and pairs the tokenizer
with the image processor.
What it cannot do without the remote code and backend support: the model class is only named in
the checkpoint's ``auto_map`` under ``AutoModelForVision2Seq``, which transformers 5 no longer
has; the repo ships no processor class, so `AutoProcessor` falls back to the tokenizer alone
(`prepare` adds the image processor);
the nested ``pixel_values`` lists are not moved to the device by the backend; generation
should stop at ``<|end|>``/``<|endofchunk|>`` (the model card overrides ``eos_token_id``).
Paper (FewMMBench A.2): fp32 (half precision was not compatible), no quantisation.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmctx.models.adapters import Adapter, register

MODEL_TYPE = "xgenmm"
SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)


@dataclass(frozen=True)
class XGenMMAdapter(Adapter):
    uses_chat_template = False  # writes the release's prompt format itself

    chat: bool = True  # instruct: Phi-3 chat turns; base: interleaved chunks

    def matches(self, model_id: str, model_type: str | None = None) -> bool:
        # A config that loads without remote code is some other (native) model.
        return (not model_type or model_type == MODEL_TYPE) and super().matches(model_id, model_type)

    def render(self, processor, messages: list[dict], generation_prompt: bool) -> str:
        def text(m: dict, image: str) -> str:
            return "".join(image if p["type"] == "image" else p["text"] for p in m["content"])

        if self.chat:
            system = next((text(m, "") for m in messages if m["role"] == "system"), SYSTEM)
            out = f"<|system|>\n{system}<|end|>\n"
            for m in (m for m in messages if m["role"] != "system"):
                out += f"<|{m['role']}|>\n{text(m, '<image> ')}<|end|>\n"
            return out + ("<|assistant|>\n" if generation_prompt else "")
        out = ""
        for m in messages:
            if m["role"] == "system":
                out += text(m, "") + "\n"
            elif m["role"] == "user":
                out += text(m, "<image>")
            else:
                out += " " + text(m, "") + "<|endofchunk|>"
        return out

    def inputs(self, processor, texts: list[str], images: list[list]) -> dict:
        out = dict(processor.tokenizer(texts, return_tensors="pt", padding=True))
        if any(images):
            process = processor.image_processor
            out["pixel_values"] = [
                [process([im], image_aspect_ratio="anyres", return_tensors="pt")["pixel_values"] for im in imgs]
                for imgs in images
            ]
            out["image_size"] = [[im.size for im in imgs] for imgs in images]
        return out

    def prepare(self, model, processor):
        """Called once after loading; returns the processor to use (tokenizer + image processor)."""
        from transformers import AutoImageProcessor

        tokenizer = model.update_special_tokens(getattr(processor, "tokenizer", processor))
        image_processor = getattr(processor, "image_processor", None) or AutoImageProcessor.from_pretrained(
            tokenizer.name_or_path, trust_remote_code=True
        )
        return XGenMMProcessor(tokenizer, image_processor)


@dataclass
class XGenMMProcessor:
    """The pair the model card loads separately; the backend wants one processor object."""

    tokenizer: object
    image_processor: object
    chat_template: str | None = None


COMMON = dict(
    auto_class="AutoModelForVision2Seq",
    needs_remote_code=True,
    dtypes=("float32", "bfloat16", "auto"),
    quantization=(),
)
# Both variants have model type "xgenmm", so only the id tells them apart: the base one is
# matched by id alone and registered first.
XGEN_MM_BASE = register(
    XGenMMAdapter(
        family="xgen_mm_base",
        aliases=(r"xgen-mm[^/]*-base",),
        chat=False,
        **COMMON,
        notes="remote code (rendering tested with stub processors only); <image>…<|endofchunk|> chunks; "
        "needs prepare() (update_special_tokens); paper: fp32",
    )
)
XGEN_MM = register(
    XGenMMAdapter(
        family="xgen_mm",
        aliases=(r"xgen-mm", r"blip-?3"),
        model_types=(MODEL_TYPE,),
        **COMMON,
        notes="remote code (rendering tested with stub processors only); Phi-3 chat with <image> placeholders; "
        "needs prepare() (update_special_tokens); "
        "AutoModelForVision2Seq is gone from transformers 5; paper: fp32",
    )
)
