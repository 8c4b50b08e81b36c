"""Answer extraction time on adversarial answers: linear growth, milliseconds per 100 KB (issue: grading can be made slow).

Workload: the attacks that used to take minutes, each at 140 KB and at 4x
and 16x that: the choice-field bait "answer" + 100 spaces + "!", an
unclosed `\\boxed{` repeated, "Answer:" repeated, and plain prose. Measured
in the same run for every extractor (choice letter, last box, code block):
the time at 140 KB, the growth exponent log4(t(16x) / t(4x)) (1 = linear,
2 = quadratic; the larger sizes keep timer and cache noise out), and as the baseline a linear scan of the same text
(`str.count` of a character, the least any extractor must do).

Last line: "grading extraction: worst growth exponent E, slowest 140 KB case T ms (baseline B ms)".
"""

import math
import sys
import time

from otbench.probe.grading._choice import extract_choice
from otbench.probe.grading._code import extract_code
from otbench.probe.grading._math import last_boxed

ATTACKS = {
    "choice-bait": "answer" + " " * 100 + "!",
    "unclosed-boxes": "\\boxed{",
    "answer-fields": "Answer:",
    "prose": "The C=O stretch of (A) is weak, so the data in D) we see suggest C. ",
}
EXTRACTORS = {"extract_choice": extract_choice, "last_boxed": last_boxed, "extract_code": extract_code}
TARGET_BYTES = 140_000


def best_of(fn, text, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - t)
    return best


def _smoke() -> bool:
    """`--smoke`: the smoke size the test suite runs (14 KB answers, one timing each)."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: 14 KB answers, one timing each")
    return ap.parse_args().smoke


def main() -> None:
    global TARGET_BYTES
    smoke = _smoke()
    if smoke:
        TARGET_BYTES = 14_000
    worst_exp, slowest, base_at_slowest = 0.0, 0.0, 0.0
    print(f"{'attack':16s} {'extractor':15s} {'140KB ms':>9s} {'560KB ms':>9s} {'2.2MB ms':>9s} "
          f"{'exponent':>9s} {'scan ms':>8s}")
    for name, unit in ATTACKS.items():
        reps = max(1, TARGET_BYTES // len(unit))
        base = unit * reps
        scan = best_of(lambda s: s.count("\n"), base)
        for ex_name, fn in EXTRACTORS.items():
            t1, t4, t16 = (best_of(fn, base * k, 1 if smoke else 3) for k in (1, 4, 16))
            exp = math.log(max(t16, 1e-7) / max(t4, 1e-7), 4)
            if t4 > 2e-3:  # below a few milliseconds the ratio is timer noise
                worst_exp = max(worst_exp, exp)
            if t1 > slowest:
                slowest, base_at_slowest = t1, scan
            print(f"{name:16s} {ex_name:15s} {1e3 * t1:9.2f} {1e3 * t4:9.2f} {1e3 * t16:9.2f} "
                  f"{exp:9.2f} {1e3 * scan:8.3f}")
    print(f"grading extraction: worst growth exponent {worst_exp:.2f}, slowest 140 KB case "
          f"{1e3 * slowest:.1f} ms (baseline {1e3 * base_at_slowest:.3f} ms)")


if __name__ == "__main__":
    sys.exit(main())
