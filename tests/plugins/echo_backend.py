"""A backend in one file: every answer is one fixed letter; an option scores minus its length."""

from __future__ import annotations

from dataclasses import dataclass

from mmctx.models import Capabilities, Generation, ModelInfo, OptionScores, backend


@dataclass(frozen=True)
class EchoOptions:
    letter: str = "A"  # what every generation answers


@backend("echo", options=EchoOptions)
class EchoBackend:
    def __init__(self, spec: str, options: EchoOptions):
        self.letter = options.letter
        self.info = ModelInfo(spec, revision="1", backend="echo", settings={"letter": options.letter})
        self.capabilities = Capabilities(
            max_images=None, interleaved=True, loglikelihood=True, chat_template=True, context_window=None
        )

    def generate(self, requests):
        return [Generation(text=self.letter, output_tokens=1) for _ in requests]

    def score(self, requests):
        return [OptionScores(tuple(-float(len(o)) for o in r.options), (1,) * len(r.options)) for r in requests]
