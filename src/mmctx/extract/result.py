"""The public result type of answer extraction."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Extraction:
    """Outcome of answer extraction.

    ``index`` points into the options as shown to the model, or is ``None``
    when the response could not be parsed; ``rule`` names the rule that decided
    (for ``None``: ``"empty"``, ``"hedged"``, ``"ambiguous"``, ``"contradictory"``
    or ``"no_match"``);
    ``span`` is the text that rule matched, for viewers and debugging.
    """

    index: int | None
    rule: str
    span: str = ""

    @property
    def parsed(self) -> bool:
        return self.index is not None
