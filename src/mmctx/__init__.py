"""mmctx: multimodal in-context benchmarks."""

__version__ = "0.1.0"
