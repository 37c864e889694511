"""The vLLM backend without vLLM or a GPU.

The pure parts are checked on small stand-ins shaped exactly like vLLM's output classes
(`Logprob`, `FlatLogprobs` from vllm/logprobs.py at 578b601; `CompletionOutput`,
`RequestOutput` from vllm/outputs.py at 003d3ee). The whole backend is then run against
`FakeLLM`: an engine answering `LLM.generate`'s calls in those shapes, its numbers computed
by the tiny HF checkpoint, with a simulated prefix cache that, like vLLM's, leaves the
log-probs of cached prompt positions unset (filled with a plausible wrong value here). Its
scores must equal the HF backend's; that vLLM's own numbers equal them is
`benchmarks/vllm_check.py`'s job, on a GPU.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from fixtures.conversations import few_shot, square_images

from mmctx.models.base import GenerateRequest, ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.models.images import load_rgb
from mmctx.models.spans import ModelError
from mmctx.models.tiny import FAMILIES as TINY_FAMILIES
from mmctx.models.vllm import (
    VLLM_IMAGE_PLACEHOLDERS,
    OptionRequest,
    PrefixCacheUsage,
    VLLMBackend,
    cache_covers_option,
    chat_conversation,
    describe_failure,
    engine_args,
    engine_prefix_cache,
    engine_prompt,
    generation_params,
    max_images_per_prompt,
    option_loglikelihood,
    output_token_count,
    read_generation,
    sampling_params,
    score_params,
)
from mmctx.prompts.messages import ImagePart, Message, TextPart

FAMILIES = ("idefics3", "llava")
OPTIONS = ("green", "red", "dark blue", "There are 3 circles.")
GARBAGE = -50.0  # what a cached position's "log-prob" reads as: plausible, and wrong


# ---- stand-ins for vLLM's output classes -----------------------------------------------------


@dataclass
class Logprob:
    """vllm/logprobs.py `Logprob`."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class FlatLogprobs:
    """vllm/logprobs.py `FlatLogprobs`: list-like; a position appended as None reads back as ``{}``."""

    start_indices: list[int] = field(default_factory=list)
    end_indices: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def append(self, position: dict | None) -> None:
        self.start_indices.append(len(self.logprobs))
        for token_id, lp in (position or {}).items():
            self.token_ids.append(token_id)
            self.logprobs.append(lp.logprob)
        self.end_indices.append(len(self.logprobs))

    def __len__(self) -> int:
        return len(self.start_indices)

    def __getitem__(self, index: int) -> dict:
        span = range(self.start_indices[index], self.end_indices[index])
        return {self.token_ids[i]: Logprob(self.logprobs[i]) for i in span}


@dataclass
class CompletionOutput:
    """vllm/outputs.py `CompletionOutput`."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: Any
    routed_experts: Any = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class RequestOutput:
    """vllm/outputs.py `RequestOutput` (the fields mmctx reads, and the rest of the signature)."""

    def __init__(
        self,
        request_id: str,
        prompt: str | None,
        prompt_token_ids: list[int] | None,
        prompt_logprobs: Any,
        outputs: list[CompletionOutput],
        finished: bool,
        metrics: Any = None,
        lora_request: Any = None,
        encoder_prompt: str | None = None,
        encoder_prompt_token_ids: list[int] | None = None,
        num_cached_tokens: int | None = None,
    ):
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished
        self.num_cached_tokens = num_cached_tokens


@dataclass
class Counter:
    """vllm/v1/metrics/reader.py `Counter`."""

    name: str
    labels: dict
    value: int


def request_output(ids, logprobs, cached=0, flat=False, completion=None) -> RequestOutput:
    """A scoring `RequestOutput`: ``logprobs[p]`` is token p's log-prob (p >= 1)."""
    container: Any = FlatLogprobs() if flat else []
    container.append(None)
    for p in range(1, len(ids)):
        container.append({ids[p]: Logprob(GARBAGE if p <= cached else logprobs[p], rank=1)})
    done = completion or CompletionOutput(0, "", [7], None, None, finish_reason="length")
    return RequestOutput("0", None, list(ids), container, [done], True, num_cached_tokens=cached)


# ---- a fake engine: vLLM's shapes, the tiny HF model's numbers --------------------------------


def prompt_text(processor, prompt: dict) -> str:
    """The text of an engine prompt: a token prompt's ids decoded (they must round-trip)."""
    if "prompt_token_ids" not in prompt:
        return prompt["prompt"]
    tokenizer = processor.tokenizer
    ids = list(prompt["prompt_token_ids"])
    text = tokenizer.decode(ids, skip_special_tokens=False)
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == ids, "token prompt does not round-trip"
    return text


def vllm_inputs(processor, prompt: dict) -> dict:
    """What vLLM feeds the model for an engine prompt, computed with the HF processor.

    A token prompt (``prompt_token_ids``) is taken as it is: vLLM only expands its image
    placeholders, adding no special tokens. A text prompt goes through the processor with
    its default ``add_special_tokens=True``, as vLLM's raw-prompt path tokenises it (a
    template's BOS then gets a second one: vllm-project/vllm#9519, #55197).
    """
    images = prompt.get("multi_modal_data", {}).get("image", [])
    kwargs: dict = {"text": [prompt_text(processor, prompt)], "return_tensors": "pt"}
    if "prompt_token_ids" in prompt:
        kwargs["add_special_tokens"] = False
    if images:
        kwargs["images"] = [images]
    return dict(processor(**kwargs))


class FakeLLM:
    """Answers `LLM.generate(prompts, sampling params)` like vLLM, computed by an HF checkpoint.

    The prefix cache is simulated: a prompt reads as many leading tokens as it shares with an
    earlier prompt, in whole blocks, never its last token, unless its params say
    ``skip_reading_prefix_cache`` (by default True when prompt log-probs are asked for, as in
    vLLM). Cached positions get `GARBAGE` log-probs.
    """

    def __init__(self, path, block_size: int = 4, flat: bool = False, max_model_len: int | None = None):
        import transformers

        from mmctx.models.adapters import adapter_for

        self.path = path
        auto = getattr(transformers, adapter_for(str(path), config_type(path)).auto_class)  # as the HF backend loads it
        self.model = auto.from_pretrained(path, dtype=torch.float32).eval()
        self.block_size, self.flat, self.max_model_len = block_size, flat, max_model_len
        self.seen: list[list[int]] = []
        self.calls: list[tuple[list[dict], list[dict]]] = []

    def start(self, args: dict) -> None:
        """Take the arguments `vllm.LLM` would be started with: the processor as vLLM sets it up."""
        from transformers import AutoProcessor

        assert args["model"] == str(self.path) and args["enable_prefix_caching"]
        self.processor = AutoProcessor.from_pretrained(self.path, **args.get("mm_processor_kwargs", {}))

    def __call__(self, prompts: list[dict], params: list[dict]) -> list[RequestOutput]:
        self.calls.append((prompts, params))
        return [self._one(p, sp) for p, sp in zip(prompts, params)]

    def _inputs(self, prompt: dict) -> dict:
        return vllm_inputs(self.processor, prompt)

    def _cached(self, ids: list[int], params: dict) -> int:
        skip = params.get("skip_reading_prefix_cache")
        if skip if skip is not None else params.get("prompt_logprobs") is not None:
            return 0
        shared = max(
            (next((i for i, (a, b) in enumerate(zip(s, ids)) if a != b), min(len(s), len(ids))) for s in self.seen),
            default=0,
        )
        return min(shared, len(ids) - 1) // self.block_size * self.block_size

    def _one(self, prompt: dict, params: dict) -> RequestOutput:
        inputs = self._inputs(prompt)
        ids = inputs["input_ids"][0].tolist()
        if self.max_model_len is not None and len(ids) > self.max_model_len:
            raise ValueError(
                f"The decoder prompt (length {len(ids)}) is longer than the maximum model length of {self.max_model_len}."
            )
        if "POISON" in prompt_text(self.processor, prompt):
            raise RuntimeError("engine failure for this prompt")
        cached = self._cached(ids, params)
        self.seen.append(ids)
        plp = None
        if params.get("prompt_logprobs") is not None:
            with torch.inference_mode():
                logprobs = self.model(**inputs).logits[0].float().log_softmax(-1)
            per_token = [0.0] + [float(logprobs[p - 1, ids[p]]) for p in range(1, len(ids))]
            plp = request_output(ids, per_token, cached=cached, flat=self.flat).prompt_logprobs
        completion = self._complete(inputs, params)
        return RequestOutput("r", prompt.get("prompt"), ids, plp, [completion], True, num_cached_tokens=cached)

    def _complete(self, inputs: dict, params: dict) -> CompletionOutput:
        eos = self.model.generation_config.eos_token_id
        tok = self.processor.tokenizer
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                max_new_tokens=params["max_tokens"],
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=tok.pad_token_id,
            )
        new = out[0, inputs["input_ids"].shape[1] :].tolist()
        if eos in new:  # vLLM keeps the EOS token in token_ids, not in the text
            new = new[: new.index(eos) + 1]
            return CompletionOutput(
                0, tok.decode(new[:-1], skip_special_tokens=True), new, None, None, finish_reason="stop"
            )
        for k in range(1, len(new) + 1):
            text = tok.decode(new[:k], skip_special_tokens=True)
            hit = next((s for s in params.get("stop", []) if s in text), None)
            if hit:
                return CompletionOutput(0, text[: text.index(hit) + len(hit)], new[:k], None, None, "stop", hit)
        return CompletionOutput(0, tok.decode(new, skip_special_tokens=True), new, None, None, finish_reason="length")


# ---- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def hf(tiny_models, family):
    return HFBackend(str(tiny_models[family]), device="cpu", dtype="float32", batch_size=4)


def vllm_backend(path, **kwargs) -> tuple[VLLMBackend, FakeLLM]:
    fake = FakeLLM(path, **{k: kwargs.pop(k) for k in ("block_size", "flat", "max_model_len") if k in kwargs})
    backend = VLLMBackend(str(path), engine=fake, max_images=3, **kwargs)
    fake.start(backend.engine_args)
    return backend, fake


def assert_same_scores(a, b, tol=1e-4):
    assert a.error is None and b.error is None, (a.error, b.error)
    assert a.token_counts == b.token_counts
    assert a.prompt_tokens == b.prompt_tokens
    assert len(a.loglikelihoods) == len(b.loglikelihoods)
    for x, y in zip(a.loglikelihoods, b.loglikelihoods):
        assert abs(x - y) < tol, (a.loglikelihoods, b.loglikelihoods)


# ---- messages → engine prompts ---------------------------------------------------------------


def test_conversation_keeps_roles_and_images_in_order(images):
    conversation, parts = chat_conversation(few_shot(images))
    assert [m["role"] for m in conversation] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert conversation[1]["content"] == [{"type": "image"}, {"type": "text", "text": "What colour is the square?"}]
    assert parts == list(images)
    prompt = engine_prompt([1, 5, 6], ["a", "b"])
    assert prompt == {"prompt_token_ids": [1, 5, 6], "multi_modal_data": {"image": ["a", "b"]}}
    assert engine_prompt((1, 5), []) == {"prompt_token_ids": [1, 5]}
    assert max_images_per_prompt([few_shot(images), few_shot(images)[-1:]]) == 3
    assert max_images_per_prompt([]) == 0


def test_engine_args_pass_through_and_turn_prefix_caching_on():
    args = engine_args("m", max_images=9, revision="abc", dtype="bfloat16", tensor_parallel_size=2)
    assert args["enable_prefix_caching"] is True
    assert args["limit_mm_per_prompt"] == {"image": 9, "video": 0, "audio": 0}
    assert (args["tensor_parallel_size"], args["dtype"], args["revision"], args["tokenizer_revision"]) == (
        2,
        "bfloat16",
        "abc",
        "abc",
    )
    assert args["trust_remote_code"] is False and "max_model_len" not in args
    assert args["disable_log_stats"] is True
    more = engine_args(
        "m", max_images=1, max_model_len=8192, engine_metrics=True, engine_kwargs={"gpu_memory_utilization": 0.5}
    )
    assert (
        more["max_model_len"] == 8192 and more["disable_log_stats"] is False and more["gpu_memory_utilization"] == 0.5
    )
    assert "mm_processor_kwargs" not in more
    assert engine_args("m", max_images=1, mm_processor_kwargs={"max_pixels": 9})["mm_processor_kwargs"] == {
        "max_pixels": 9
    }


def test_sampling_params():
    gen = generation_params(GenerateRequest((), 12, stop=("\n",)))
    assert gen == {
        "temperature": 0.0,
        "max_tokens": 12,
        "skip_special_tokens": True,
        "stop": ["\n"],
        "include_stop_str_in_output": True,
    }
    assert "stop" not in generation_params(GenerateRequest((), 5))
    sc = score_params()
    assert sc["max_tokens"] == 1 and sc["prompt_logprobs"] == 0 and sc["skip_reading_prefix_cache"] is False
    assert score_params(read_cache=False)["skip_reading_prefix_cache"] is True

    @dataclass
    class OldSamplingParams:  # a vLLM from before skip_reading_prefix_cache
        temperature: float = 1.0
        max_tokens: int = 16
        prompt_logprobs: int | None = None
        detokenize: bool = True

    assert sampling_params(OldSamplingParams, sc) == OldSamplingParams(0.0, 1, 0, False)
    with pytest.raises(TypeError):
        sampling_params(OldSamplingParams, {"nonsense": 1})


# ---- vLLM outputs → results ------------------------------------------------------------------


@pytest.mark.parametrize("flat", [False, True], ids=["list", "FlatLogprobs"])
def test_option_loglikelihood_sums_exactly_the_option_tokens(flat):
    ids = [1, 10, 11, 12, 13, 14, 15]
    lps = [0.0, -1.0, -2.0, -4.0, -8.0, -16.0, -32.0]  # any off-by-one changes the sum
    request = OptionRequest("…", suffix=(13, 14, 15), start=1)  # 13 is the lead; 14, 15 the option
    out = request_output(ids, lps, flat=flat)
    assert option_loglikelihood(out, request, "m") == -48.0
    assert request.token_count == 2
    assert not cache_covers_option(out, request)


def test_cache_reaching_into_the_option_is_detected():
    ids = list(range(10, 20))
    request = OptionRequest("…", suffix=(17, 18, 19), start=1)  # option tokens at positions 8, 9
    assert not cache_covers_option(request_output(ids, [-1.0] * 10, cached=7), request)
    assert cache_covers_option(request_output(ids, [-1.0] * 10, cached=8), request)
    none = request_output(ids, [-1.0] * 10)
    none.num_cached_tokens = None  # a vLLM that does not say
    assert not cache_covers_option(none, request)
    with pytest.raises(ModelError, match="prefix cache covered"):  # never summed, whoever calls the parser
        option_loglikelihood(request_output(ids, [-1.0] * 10, cached=8), request, "m")


def test_misaligned_or_missing_logprobs_are_model_errors():
    ids = [1, 10, 11, 12]
    with pytest.raises(ModelError, match="disagree"):
        option_loglikelihood(request_output(ids, [0, -1, -1, -1]), OptionRequest("…", (11, 99), 1), "m")
    out = request_output(ids, [0, -1, -1, -1])
    out.prompt_logprobs = None
    with pytest.raises(ModelError, match="no prompt log-probs"):
        option_loglikelihood(out, OptionRequest("…", (11, 12), 1), "m")
    out = request_output(ids, [0, -1, -1, float("nan")])
    with pytest.raises(ModelError, match="no usable log-prob"):
        option_loglikelihood(out, OptionRequest("…", (11, 12), 1), "m")


def test_generation_parsing():
    def out(completion, n_prompt=5):
        return RequestOutput("0", "p", list(range(n_prompt)), None, [completion], True, num_cached_tokens=0)

    eos = out(CompletionOutput(0, "red", [4, 5, 2], None, None, finish_reason="stop", stop_reason=None))
    g = read_generation(eos, 8, 100)
    assert (g.text, g.output_tokens, g.truncated, g.prompt_tokens, g.error) == ("red", 2, False, 5, None)
    stop_token = CompletionOutput(0, "red", [4, 5, 9], None, None, finish_reason="stop", stop_reason=9)
    assert output_token_count(stop_token) == 2
    stop_string = out(CompletionOutput(0, "red.", [4, 5, 6], None, None, finish_reason="stop", stop_reason="."))
    assert read_generation(stop_string, 8, 100).output_tokens == 3
    length = out(CompletionOutput(0, "a b c", [4, 5, 6], None, None, finish_reason="length"))
    assert read_generation(length, 3, 100).truncated and read_generation(length, 3, 100).output_tokens == 3
    over = read_generation(length, 3, 7)
    assert over.error.startswith("context_overflow") and over.prompt_tokens == 5 and not over.text
    assert read_generation("RuntimeError: boom", 3, 100).error == "RuntimeError: boom"


def test_failures_are_described():
    too_long = ValueError("The decoder prompt (length 5000) is longer than the maximum model length of 4096.")
    assert describe_failure(too_long).startswith("context_overflow: The decoder prompt")
    assert describe_failure(RuntimeError("CUDA error")) == "RuntimeError: CUDA error"


def test_usage_aggregates_outputs_and_engine_counters():
    usage = PrefixCacheUsage()
    usage.record(
        [
            request_output(list(range(20)), [-1.0] * 20, cached=0),
            request_output(list(range(30)), [-1.0] * 30, cached=16),
            "err",
        ]
    )
    d = usage.as_dict()
    assert (d["requests"], d["prompt_tokens"], d["prompt_tokens_cached"], d["prompt_tokens_computed"]) == (
        2,
        50,
        16,
        34,
    )
    assert d["prefix_cache_hit_rate"] == pytest.approx(16 / 50)
    assert PrefixCacheUsage().as_dict()["prefix_cache_hit_rate"] == 0.0
    metrics = [
        Counter("vllm:prefix_cache_queries", {"engine": "0"}, 100),
        Counter("vllm:prefix_cache_queries", {"engine": "1"}, 60),
        Counter("vllm:prefix_cache_hits", {"engine": "0"}, 40),
        Counter("vllm:prompt_tokens", {"engine": "0"}, 999),
    ]
    assert engine_prefix_cache(metrics) == {
        "engine_prefix_cache_queries": 160,
        "engine_prefix_cache_hits": 40,
        "engine_prefix_cache_hit_rate": 0.25,
    }


# ---- the backend over the fake engine --------------------------------------------------------


@pytest.mark.parametrize("flat", [False, True], ids=["list", "FlatLogprobs"])
def test_scores_equal_the_hf_backend(tiny_models, family, hf, images, flat):
    v, fake = vllm_backend(tiny_models[family], flat=flat)
    reqs = [ScoreRequest(few_shot(images), OPTIONS), ScoreRequest(few_shot(images)[-1:], OPTIONS)]
    ours = v.score(reqs)
    prompts, params = fake.calls[0]
    assert len(prompts) == 2 * len(OPTIONS)  # one engine call for all options of all queries
    # Then at most one more: the options whose prefix-cache hit reached the option, cache read off.
    assert len(fake.calls) == 1 or (
        len(fake.calls) == 2 and all(p["skip_reading_prefix_cache"] for p in fake.calls[1][1])
    )
    assert len(fake.calls) == 1 + bool(v.usage()["recomputed_requests"])
    assert all(len(p["multi_modal_data"]["image"]) == n for p, n in zip(prompts, [3] * 4 + [1] * 4))
    assert all(p["max_tokens"] == 1 and p["prompt_logprobs"] == 0 for p in params)
    for a, b in zip(ours, hf.score(reqs)):
        assert_same_scores(a, b)
    usage = v.usage()
    assert 0 < usage["prompt_tokens_cached"] < usage["prompt_tokens"]  # options of a query share its prefix


def test_cache_covering_an_option_is_recomputed(tiny_models, family, hf, images):
    """Scoring the same query again: the cache now holds every option prompt but its last token."""
    v, fake = vllm_backend(tiny_models[family], block_size=1)
    req = ScoreRequest(few_shot(images), OPTIONS)
    first = v.score([req])[0]
    again = v.score([req])[0]
    assert v.usage()["recomputed_requests"] >= len(OPTIONS)
    assert all(p["skip_reading_prefix_cache"] for p in fake.calls[-1][1])
    reference = hf.score([req])[0]
    assert_same_scores(first, reference)
    assert_same_scores(again, reference)


@pytest.mark.parametrize(
    "variant",
    ["trailing-space", "think-block", "trimmed"],
)
def test_template_leads_and_boundaries_match_the_hf_backend(tiny_models, images, variant):
    path = tiny_models["idefics3" if variant != "trimmed" else "llava"]
    h = HFBackend(str(path), device="cpu", dtype="float32")
    v, _ = vllm_backend(path)
    for p in (h.processor, v.processor):
        if variant == "trailing-space":
            p.chat_template = p.chat_template.replace("{{ 'Assistant:' }}", "{{ 'Assistant: ' }}")
        elif variant == "think-block":
            p.chat_template = p.chat_template.replace(
                "{% for part in message['content'] %}",
                "{% if message['role'] == 'assistant' %}<think>\n\n</think>\n\n{% endif %}{% for part in message['content'] %}",
            )
        else:
            p.chat_template = p.chat_template.replace("{{ part['text'] }}", "{{ part['text'] | trim }}")
    options = ("red ", " blue", "There are 3 circles.") if variant == "trimmed" else OPTIONS
    req = ScoreRequest(few_shot(images), options)
    assert_same_scores(v.score([req])[0], h.score([req])[0])


def test_generation_equals_the_hf_backend(tiny_models, family, hf, images):
    v, fake = vllm_backend(tiny_models[family])
    msgs = few_shot(images)
    reqs = [GenerateRequest(msgs, 6), GenerateRequest(msgs[-1:], 4), GenerateRequest(msgs[:3], 6)]
    ours, theirs = v.generate(reqs), hf.generate(reqs)
    assert len(fake.calls) == 1 and [p["max_tokens"] for p in fake.calls[0][1]] == [6, 4, 6]
    for a, b in zip(ours, theirs):
        assert (a.text, a.prompt_tokens, a.output_tokens, a.truncated, a.error) == (
            b.text,
            b.prompt_tokens,
            b.output_tokens,
            b.truncated,
            b.error,
        )


def test_stop_string_ends_generation_and_is_not_truncation(tiny_models, images):
    v, _ = vllm_backend(tiny_models["llava"])
    msgs = few_shot(images)
    free = v.generate([GenerateRequest(msgs, 8)])[0]
    assert free.truncated and free.output_tokens == 8
    stop = free.text.strip()[:2]
    stopped = v.generate([GenerateRequest(msgs, 8, stop=(stop,))])[0]
    assert stopped.text.endswith(stop) and not stopped.truncated and stopped.output_tokens < 8


def test_failures_stay_with_their_request(tiny_models, images):
    v, fake = vllm_backend(tiny_models["llava"], max_model_len=60)
    long, short = few_shot(images), (Message("user", (TextPart("Hi"),)),)
    poison = (Message("user", (TextPart("POISON"),)),)
    gens = v.generate([GenerateRequest(long, 4), GenerateRequest(short, 4), GenerateRequest(poison, 4)])
    assert gens[0].error.startswith("context_overflow")
    assert gens[1].error is None and gens[1].output_tokens > 0
    assert gens[2].error == "RuntimeError: engine failure for this prompt"
    scores = v.score(
        [ScoreRequest(long, OPTIONS), ScoreRequest(short, ("red", "blue")), ScoreRequest(poison, ("a", "b"))]
    )
    assert scores[0].error.startswith("context_overflow") and not scores[0].loglikelihoods
    assert scores[1].error is None and len(scores[1].loglikelihoods) == 2
    assert scores[2].error.startswith("RuntimeError")
    broken = ImagePart(path="/nonexistent.png", sha256="0" * 64)
    bad = v.generate([GenerateRequest((Message("user", (broken, TextPart("?"))),), 4)])[0]
    assert bad.error.startswith("FileNotFoundError")


def test_context_window_rule_is_the_hf_backends(tiny_models, images):
    """Within vLLM's limit but over the window with the generation limit: an error, as in the HF backend."""
    v, _ = vllm_backend(tiny_models["llava"], max_model_len=4096)
    n = v.generate([GenerateRequest(few_shot(images), 1)])[0].prompt_tokens
    v.capabilities = type(v.capabilities)(**{**v.capabilities.__dict__, "context_window": n + 3})
    assert v.generate([GenerateRequest(few_shot(images), 3)])[0].error is None
    assert v.generate([GenerateRequest(few_shot(images), 4)])[0].error.startswith("context_overflow")


def test_identity_capabilities_and_spec(tiny_models, monkeypatch):
    import mmctx.models.vllm as vllm_module
    from mmctx.models import load_backend

    path = tiny_models["idefics3"]
    v = VLLMBackend(str(path), engine=lambda p, s: [], max_images=9, dtype="bfloat16", tensor_parallel_size=2)
    assert v.info.backend == "vllm" and v.info.revision.startswith("local-")
    h = HFBackend(str(path), device="cpu")
    assert v.info.revision == h.info.revision
    settings = {"dtype": "bfloat16", "tensor_parallel_size": 2, "max_model_len": 4096, "scoring": "2"}
    # The tiny Idefics3 is made for images smaller than the paper's 448-px resize: which image
    # settings apply is part of its identity, as in the HF backend.
    assert v.info.settings == {**settings, "adapter": h.adapter.family, "image_settings": "checkpoint"}
    assert h.info.settings["image_settings"] == "checkpoint"
    # The HF backend's family adapter sets vLLM's processor up as it sets its own.
    assert v.adapter.family == h.adapter.family
    assert v.engine_args.get("mm_processor_kwargs", {}) == h.adapter.processor_kwargs == {"do_image_splitting": False}
    paper = VLLMBackend(str(path), engine=lambda p, s: [], image_settings="paper")
    assert "image_settings" not in paper.info.settings
    assert paper.engine_args["mm_processor_kwargs"]["size"] == {"longest_edge": 448, "shortest_edge": 378}
    caps = v.capabilities
    assert (caps.max_images, caps.loglikelihood, caps.interleaved, caps.context_window) == (9, True, True, 4096)
    assert v.generate([]) == [] and v.score([]) == []

    made = {}

    def fake_start(args):
        made.clear()
        made.update(args)
        return None

    monkeypatch.setattr(vllm_module, "start_llm", fake_start)
    monkeypatch.setattr(vllm_module, "run_llm", lambda llm, prompts, params: [])
    b = load_backend(
        f"vllm:{path}",
        device="cuda",
        batch_size=8,
        dtype="float16",
        revision=None,
        trust_remote_code=False,
        max_images=4,
    )
    assert isinstance(b, VLLMBackend) and made["model"] == str(path) and made["dtype"] == "float16"
    assert made["limit_mm_per_prompt"] == {"image": 4, "video": 0, "audio": 0} and made["enable_prefix_caching"] is True
    built = load_backend("vllm:builtin:tiny-llava")
    assert built.info.name == "vllm:builtin:tiny-llava" and made["model"].endswith("tiny-llava")
    with pytest.raises(ModelError, match="quantization"):
        load_backend(f"vllm:{path}", quantization="4bit")


def test_adapters_that_build_inputs_themselves_are_refused(monkeypatch):
    import mmctx.models.vllm as vllm_module
    from mmctx.models.adapters import Adapter

    @dataclass(frozen=True)
    class OwnInputs(Adapter):
        def inputs(self, processor, texts, images):
            return {}

    monkeypatch.setattr(vllm_module, "adapter_for", lambda model, model_type, name: OwnInputs(family="own"))
    with pytest.raises(ModelError, match="the own adapter builds the model's inputs itself"):
        vllm_module.pick_adapter("m", None, None)
    plain = Adapter(family="plain", processor_kwargs={"max_pixels": 1})
    monkeypatch.setattr(vllm_module, "adapter_for", lambda model, model_type, name: plain)
    assert vllm_module.pick_adapter("m", None, None) is plain


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_missing_vllm_says_how_to_install(tiny_models):
    with pytest.raises(ModelError, match=r"pip install 'mmctx\[vllm\]'"):
        VLLMBackend(str(tiny_models["llava"]))


# ---- request building, every tiny family ------------------------------------------------------
#
# vLLM expands, per image, the placeholder its model class names (``get_placeholder_str``);
# mmctx's prompt is the family's own chat template, so the two must agree. Each family's
# placeholder and multi-image support are in `VLLM_IMAGE_PLACEHOLDERS` with their sources.

MARKERS = ("Quoll first?", "wombat one", "Quokka second?", "wallaby two", "Numbat lead:", "Dingo third?")


def interleaved(images) -> tuple[Message, ...]:
    """Demos with one and with two images, and a query whose image sits between two texts."""
    a, b, c = images
    return (
        Message("system", (TextPart("Answer briefly."),)),
        Message("user", (a, TextPart(MARKERS[0]))),
        Message("assistant", (TextPart(MARKERS[1]),)),
        Message("user", (b, c, TextPart(MARKERS[2]))),
        Message("assistant", (TextPart(MARKERS[3]),)),
        Message("user", (TextPart(MARKERS[4]), a, TextPart(MARKERS[5]))),
    )


def sequence(text: str, placeholder: str) -> list[str]:
    """The markers and image placeholders of ``text`` in the order they occur."""
    found = [(text.index(m), m) for m in MARKERS]
    at = text.find(placeholder)
    while at >= 0:
        found.append((at, "IMG"))
        at = text.find(placeholder, at + len(placeholder))
    return [label for _, label in sorted(found)]


def config_type(path) -> str:
    import json

    return json.loads((path / "config.json").read_text())["model_type"]


@pytest.fixture(scope="module", params=TINY_FAMILIES)
def any_family(request):
    return request.param


def test_request_building_per_family(tiny_models, images, any_family):
    """Placeholders in order and turn, images in prompt order, ids as the processor's own, limit from the plan."""
    path = tiny_models[any_family]
    msgs = interleaved(images)
    engine = []
    v = VLLMBackend(str(path), engine=lambda p, s: engine.append(p) or [], max_images=max_images_per_prompt([msgs]))
    assert v.engine_args["limit_mm_per_prompt"] == {"image": 4, "video": 0, "audio": 0}

    prompt = v.engine_prompts([GenerateRequest(msgs, 4)])[0]
    assert isinstance(prompt, dict), prompt
    conversation, parts = chat_conversation(msgs)
    pictures = [load_rgb(p.path, p.sha256) for p in parts]
    sent = prompt["multi_modal_data"]["image"]
    assert [im.tobytes() for im in sent] == [im.tobytes() for im in pictures]  # a, b, c, a

    text, rendered = prompt_text(v.processor, prompt), v.adapter.render(v.processor, conversation, True)
    assert text in (
        rendered,
        f"{v.tokenizer.bos_token}{rendered}",
    )  # the tokenizer's BOS where the template writes none
    placeholder = VLLM_IMAGE_PLACEHOLDERS.get(config_type(path))
    if placeholder is None:
        pytest.skip(f"vLLM's docs list no {config_type(path)} model; nothing to expand")
    # One placeholder per image, each inside its own user turn, in order. Within a turn the
    # template decides: most keep the image between its texts, LLaVA-OneVision's release
    # writes a turn's images before its text.
    demos = ["IMG", MARKERS[0], MARKERS[1], "IMG", "IMG", MARKERS[2], MARKERS[3]]
    assert sequence(text, placeholder) in (
        demos + [MARKERS[4], "IMG", MARKERS[5]],
        demos + ["IMG", MARKERS[4], MARKERS[5]],
    )

    # What vLLM feeds the model is what the family's processor makes of the same conversation.
    fed = vllm_inputs(v.processor, prompt)["input_ids"][0].tolist()
    own = v.processor.apply_chat_template(
        _with_pixels(conversation, pictures), add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    own = own.tolist() if hasattr(own, "tolist") else list(own)
    own = list(own[0]) if own and not isinstance(own[0], int) else own
    assert fed == own
    bos = v.tokenizer.bos_token_id
    assert bos is None or fed[:2] != [bos, bos]
    assert engine == []  # building a request sends nothing


def _with_pixels(conversation: list[dict], pictures) -> list[dict]:
    queue = iter(pictures)
    return [
        {**m, "content": [{**p, "image": next(queue)} if p["type"] == "image" else p for p in m["content"]]}
        for m in conversation
    ]


def test_scores_and_generation_equal_the_hf_backend_per_family(tiny_models, images, any_family):
    """Through an engine that feeds the model what vLLM would: the HF backend's numbers, every family."""
    path = tiny_models[any_family]
    h = HFBackend(str(path), device="cpu", dtype="float32", batch_size=4)
    v, _ = vllm_backend(path)
    v.capabilities = type(v.capabilities)(**{**v.capabilities.__dict__, "max_images": 4})
    msgs = interleaved(images)
    reqs = [ScoreRequest(msgs, OPTIONS[:2]), ScoreRequest(few_shot(images)[-1:], OPTIONS[2:])]
    for a, b in zip(v.score(reqs), h.score(reqs)):
        assert_same_scores(a, b)
    gens = [GenerateRequest(msgs, 4)]
    ours, theirs = v.generate(gens)[0], h.generate(gens)[0]
    assert (ours.text, ours.prompt_tokens, ours.output_tokens, ours.error) == (
        theirs.text,
        theirs.prompt_tokens,
        theirs.output_tokens,
        theirs.error,
    )


def test_a_template_that_drops_an_image_is_refused_before_the_engine(tiny_models, images):
    """vLLM would fail the prompt deep in its processor; mmctx names the model and the counts first."""
    engine = []
    v = VLLMBackend(str(tiny_models["llava"]), engine=lambda p, s: engine.append(p) or [], max_images=4)
    v.processor.chat_template = v.processor.chat_template.replace("<image>", "", 1)
    gen = v.generate([GenerateRequest(interleaved(images), 4)])[0]
    assert "0 image placeholders (<image>) for 4 images" in gen.error and str(tiny_models["llava"]) in gen.error
    score = v.score([ScoreRequest(interleaved(images), ("red", "blue"))])[0]
    assert "placeholder" in score.error
    assert engine == []


def test_a_vision_lora_the_hf_backend_applies_is_refused(tiny_models, tmp_path):
    """Phi-4-multimodal ships its image LoRA in vision-lora/: the HF backend applies it after
    loading; vLLM would run the base model on images without it, so the backend refuses."""
    import shutil

    from mmctx.models.adapters import adapter_for

    path = tiny_models["phi4_multimodal"]
    sub = getattr(adapter_for(str(path), config_type(path)), "vision_adapter", None)
    assert sub, "the phi4_multimodal adapter names the release's vision LoRA folder"
    VLLMBackend(str(path), engine=lambda p, s: [], max_images=2)  # without one: accepted
    copy = shutil.copytree(path, tmp_path / "phi4-with-lora")
    (copy / sub).mkdir()
    (copy / sub / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 320}')
    with pytest.raises(ModelError, match=rf"vision LoRA in {sub}/.*use the HF backend"):
        VLLMBackend(str(copy), engine=lambda p, s: [], max_images=2)


def test_a_run_sizes_the_engine_from_its_plan(tiny_models, shapes_bench, tmp_path):
    """Through `mmctx run`'s own path: limit_mm_per_prompt is the plan's most images a prompt."""
    from mmctx.tasks.fewshot import evaluate

    engines = []

    def factory(spec: str, **kwargs):
        fake = FakeLLM(Path(spec.removeprefix("vllm:")))
        backend = VLLMBackend.from_spec(spec, engine=fake, **kwargs)
        fake.start(backend.engine_args)
        engines.append(backend.engine_args)
        return backend

    spec = f"vllm:{tiny_models['gemma3']}"  # a template that writes BOS, sliding-window layers
    outcome = evaluate(
        shapes_bench, spec, tmp_path / "run", settings="4-random", scorers="generate,ppl", limit=1, tasks=["counting"],
        show_progress=False, backend_factory=factory,
    )  # fmt: skip
    assert outcome.stats.errors == 0 and outcome.stats.done > 0
    assert not [r for r in outcome.results if r.error]
    assert engines[0]["limit_mm_per_prompt"] == {"image": 5, "video": 0, "audio": 0}  # 4 demos + the query


def test_a_checkpoint_whose_template_drops_images_is_refused_before_any_request(tiny_models, tmp_path):
    import shutil

    copy = shutil.copytree(tiny_models["llava"], tmp_path / "llava-no-images")
    template = copy / "chat_template.jinja"
    template.write_text(template.read_text().replace("<image>", ""))
    with pytest.raises(ModelError, match=r"llava-no-images.*0 image placeholders \(<image>\) for 2 images"):
        VLLMBackend(str(copy), engine=lambda p, s: [], max_images=2)
