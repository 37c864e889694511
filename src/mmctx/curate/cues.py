"""Surface cues: features of the option text alone that tell the correct option from the others.

A benchmark item should be answerable only by looking at the image. If, across a task, the correct
option starts lower-case, ends in punctuation, or is the longest more (or less) often than chance,
a model can score above chance without the image. VALSE's relations file is the case in point: in
70 of its 535 valid pairs the caption starts lower-case and the foil is capitalised, never the
reverse, so "pick the lower-case option" is right every time it applies.

`find_surface_cues` scores ``mcqa`` and ``caption_foil`` items (``binary`` items' options are the
fixed words Yes/No, and ``open`` items have none). For each task and feature:

* An item is *informative* when the feature holds for some of its options but not all; the others
  say nothing about it and are left out.
* Under the hypothesis that the feature is independent of correctness, the correct option of an
  informative item with ``k`` of ``n`` options showing the feature has it with probability
  ``k / n`` (1/2 for a caption/foil pair). The number of items whose correct option has it is then
  a sum of independent Bernoulli draws (a binomial against 0.5 for pairs), and its exact
  distribution gives a two-sided p-value (outcomes no more likely than the one observed).
* A cue is reported when there are at least `MIN_INFORMATIVE` informative items, the observed rate
  is at least `MIN_EFFECT` away from chance, and either the p-value is below `ALPHA`, or the
  feature is *never wrong* and the p-value is below `ALPHA_NEVER_WRONG`. Never wrong: in every
  informative item the correct option is the only one with the feature (or the only one without
  it), so choosing by the feature picks the answer every time it applies; for pairs, every
  informative item goes one way. (An MCQA answer that is merely never the shortest is not that:
  such a rule only rules one option out.)
* "Shortest" is tested on items of three or more options only: for a pair it is the mirror of
  "longest", one finding that would otherwise be reported twice.

Why these numbers: ``ALPHA`` = 1e-4 per task and feature keeps a build of ten tasks near a 1-in-200
chance of a false alarm on fair data. A rule that is never wrong is a construction artefact
rather than a skew, so ten informative pairs all one way (p = 0.002, VALSE existence's case) are
enough, while eight or nine (which fair data produces somewhere among many tasks) are not.
``MIN_EFFECT`` keeps a large task's harmless 52 % from being reported. Measured on simulated fair
data (4,000 tasks of 15 to 600 items, caption/foil pairs and four-option MCQA with random case,
final punctuation and lengths): 3 cues fired, under one task in a thousand.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.stats import binom

from mmctx.schema import Sample

MIN_INFORMATIVE = 10
MIN_EFFECT = 0.10
ALPHA = 1e-4
ALPHA_NEVER_WRONG = 5e-3
SCORED_FORMATS = ("mcqa", "caption_foil")


def _lowercase_start(options: Sequence[str]) -> list[bool]:
    return [o.strip()[:1].islower() for o in options]


def _trailing_punctuation(options: Sequence[str]) -> list[bool]:
    return [unicodedata.category(o.strip()[-1:] or " ").startswith("P") for o in options]


def _surrounding_whitespace(options: Sequence[str]) -> list[bool]:
    return [o != o.strip() for o in options]


def _longest(options: Sequence[str]) -> list[bool]:
    lengths = [len(o.strip()) for o in options]
    return [n == max(lengths) for n in lengths]


def _shortest(options: Sequence[str]) -> list[bool]:
    if len(options) == 2:  # the mirror of `_longest`: one finding, reported once
        return [False, False]
    lengths = [len(o.strip()) for o in options]
    return [n == min(lengths) for n in lengths]


# feature name -> (what the correct option does, as `describe` says it; per-option test)
FEATURES: dict[str, tuple[str, Callable[[Sequence[str]], list[bool]]]] = {
    "lowercase_start": ("starts lower-case", _lowercase_start),
    "trailing_punctuation": ("ends in punctuation", _trailing_punctuation),
    "surrounding_whitespace": ("has leading or trailing spaces", _surrounding_whitespace),
    "longest": ("is the longest (characters)", _longest),
    "shortest": ("is the shortest (characters)", _shortest),
}


@dataclass(frozen=True)
class SurfaceCue:
    """One feature that separates correct from wrong options across a task more than chance allows."""

    task: str
    feature: str  # a key of `FEATURES`
    samples: int  # scored items of the task
    informative: int  # items where the feature holds for some options but not all
    hits: int  # informative items whose correct option has the feature
    chance: float  # the rate expected if the feature were independent of correctness
    p_value: float  # exact two-sided

    @property
    def rate(self) -> float:
        return self.hits / self.informative

    def describe(self) -> str:
        """One line: task, what the correct option does, how often, against what chance."""
        phrase = FEATURES[self.feature][0]
        return (
            f"{self.task}: the correct option {phrase} in {self.hits} of {self.informative} items "
            f"where the options differ in it ({self.rate:.0%}; chance {self.chance:.0%}; "
            f"p={self.p_value:.1g}; {self.samples} items scored)"
        )

    def __str__(self) -> str:
        return self.describe()


def find_surface_cues(samples: Iterable[Sample], key: Callable[[Sample], str] = lambda s: s.task) -> list[SurfaceCue]:
    """Every surface cue of every group of ``samples`` (grouped by task unless ``key`` says otherwise).

    Items outside `SCORED_FORMATS`, with fewer than two choices, or whose answer is not among its
    choices are not scored (validation reports the last two). Ordered by group, then `FEATURES`.
    """
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        if sample.format in SCORED_FORMATS and len(sample.choices) >= 2 and sample.answer in sample.choices:
            groups[key(sample)].append(sample)
    cues = []
    for group in sorted(groups):
        for feature in FEATURES:
            cue = _test(group, feature, groups[group])
            if cue is not None:
                cues.append(cue)
    return cues


def _test(group: str, feature: str, samples: list[Sample]) -> SurfaceCue | None:
    has = FEATURES[feature][1]
    hits = 0
    singled = 0  # informative items where the correct option is alone on its side of the feature
    odds: list[Fraction] = []  # per informative item, the chance its correct option has the feature
    for sample in samples:
        flags = has(sample.choices)
        if all(flags) or not any(flags):
            continue
        odds.append(Fraction(sum(flags), len(flags)))
        mine = flags[sample.choices.index(sample.answer)]
        hits += mine
        singled += sum(flag == mine for flag in flags) == 1
    if len(odds) < MIN_INFORMATIVE:
        return None
    chance = float(sum(odds) / len(odds))
    if abs(hits / len(odds) - chance) < MIN_EFFECT:
        return None
    p_value = _two_sided_p(hits, odds)
    # Never wrong: the feature singles the answer out wherever it varies, so a rule built on it
    # picks the answer every time it applies (for pairs: every informative item goes one way).
    never_wrong = singled == len(odds) and hits in (0, len(odds))
    if not (p_value < ALPHA or (never_wrong and p_value < ALPHA_NEVER_WRONG)):
        return None
    return SurfaceCue(group, feature, len(samples), len(odds), hits, chance, p_value)


def _two_sided_p(observed: int, odds: list[Fraction]) -> float:
    """P(an outcome no more likely than ``observed``) for a sum of independent Bernoulli(``odds``).

    Items sharing one probability form a binomial; the exact distribution of the sum is the
    convolution of those few binomials (the "minlike" two-sided rule, as scipy's binomtest uses).
    """
    pmf = np.ones(1)
    counts: dict[Fraction, int] = defaultdict(int)
    for p in odds:
        counts[p] += 1
    for p, n in counts.items():
        pmf = np.convolve(pmf, binom.pmf(np.arange(n + 1), n, float(p)))
    at = pmf[observed]
    return float(min(1.0, pmf[pmf <= at * (1 + 1e-7)].sum()))
