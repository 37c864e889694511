"""Option scoring of one model: the fast path vs one full forward per option.

`families_speed.py` for a single model (by default the shipped ``builtin:shapes-vlm``) with
more queries per format and more rounds: the same planning, warm-up, alternating rounds,
identical-output checks and printout. Any of its flags may be given and wins over these
defaults; ``--models`` takes a tiny family name (built at ``--hidden 256 --layers 4``) too.

    python benchmarks/score_speed.py [--models builtin:shapes-vlm] [--queries 6] [--rounds 5] [--threads 1]
"""

from __future__ import annotations

import sys

from families_speed import SHIPPED, main

DEFAULTS = ["--models", SHIPPED, "--queries", "6", "--rounds", "5"]

if __name__ == "__main__":
    raise SystemExit(main(DEFAULTS + sys.argv[1:]))  # argparse keeps the last value given
