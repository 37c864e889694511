"""Word lists the extraction rules share: numbers, ordinals, yes/no words, fillers."""

from __future__ import annotations

UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
NUMBER_WORDS = {**UNITS, **TENS}
# "the red one", "which one": here "one" is a pronoun, not the number 1.
ONE_AS_PRONOUN_AFTER = frozenset(
    "the this that which each every any another other no same only first second third last".split()
)

# Words that negate the word right after them ("not red", "neither A nor B"); "n't" too.
NEGATORS = ("not", "never", "nor", "neither", "none", "no")

YES = frozenset({"yes", "yeah", "yep", "yup", "true", "correct", "affirmative"})
NO = frozenset({"no", "nope", "nah", "false", "incorrect", "wrong", "negative"})
# Only these count when deciding whether an option *set* is yes/no-like.
YES_OPTION = frozenset({"yes", "true", "correct"})
NO_OPTION = frozenset({"no", "false", "incorrect"})

ORDINALS = {
    "first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3,
    "fifth": 4, "5th": 4, "sixth": 5, "6th": 5, "seventh": 6, "7th": 6, "eighth": 7, "8th": 7,
    "ninth": 8, "9th": 8, "tenth": 9, "10th": 9,
}  # fmt: skip
ORDINAL_ALT = "|".join(sorted(ORDINALS, key=len, reverse=True)) + "|last"
REF_NOUNS = r"caption|option|choice|image|picture|photo|sentence|description|statement"

# "It's B.", "I think (B)": still essentially just the label.
BARE_FILLER = (
    r"(?:i\s+think|i\s+believe|i'?d\s+say|i\s+would\s+say|i\s+(?:choose|pick|select)|it'?s|it\s+is"
    r"|that'?s|that\s+is|probably|likely|definitely|so|therefore|thus|hence)"
)
# "A dog", "I think": these labels double as ordinary English words, so they
# only count as labels when something marks them as such.
WORDLIKE_LABELS = frozenset({"a", "i"})
# ... unless followed by one of these ("Answer: A because ...").
LABEL_FOLLOWERS = frozenset(
    "because since as is was would should seems appears and which for given due it this that".split()
)

# Speakers a base model invents when it keeps writing the conversation on its own.
ROLES = ("user", "assistant", "human", "gpt", "system", "question", "q")
ASSISTANT_ROLES = frozenset({"assistant", "gpt", "model"})

# Openers of a self-correction ("Wait, it's C"); they count at the start of a sentence or clause.
REVISION_CUES = (
    r"wait|actually|no\s+wait|no\s*,|on\s+second\s+thought|correction|scratch\s+that|i\s+mean|make\s+that"
    r"|oops|sorry|hmm+,?\s+no"
)
