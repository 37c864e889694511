"""Seeded randomness: one private RNG per sample, and draws balanced across a generator's samples.

Seeds are derived with SHA-256 rather than Python's ``hash`` (salted per process), so the same
(seed, task, format, index) gives the same sample on every machine and every run.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


def derive_seed(*parts: object) -> int:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class Draw:
    """Everything a task generator may draw from for sample ``index`` of generator ``key``."""

    seed: int
    key: str
    index: int
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(derive_seed(self.seed, self.key, self.index))

    def balanced(self, name: str, options: Sequence[T]) -> T:
        """An option such that every consecutive block of ``len(options)`` indices sees each once.

        Independent draws would leave a 10-query set lopsided (e.g. 7 "Yes" of 10); a shuffled
        round-robin keeps labels and answer positions balanced without being predictable.
        """
        n = len(options)
        order = list(range(n))
        random.Random(derive_seed(self.seed, self.key, name, self.index // n)).shuffle(order)
        return options[order[self.index % n]]

    def arrange(self, answer: str, distractors: Sequence[str], name: str = "slot") -> list[str]:
        """Choices with ``answer`` at a balanced position and the distractors shuffled around it."""
        others = list(distractors)
        self.rng.shuffle(others)
        slot = self.balanced(name, range(len(others) + 1))
        return others[:slot] + [answer] + others[slot:]
