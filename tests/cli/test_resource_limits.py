"""Numbers that size memory are estimated before anything is allocated (issue 24, item 3).

Every argument a user types that sizes arrays or loops (`--grid`, `--draws`,
`--theta-grid`, `--replicates`, `--batch`) is checked against a memory model
(and a time model where the loop is the cost) before the first allocation:
a call over budget is one line naming the estimate, what is available and the
largest accepted value, exit 2. The huge cases never run here: in-process
the available memory is pinned, and in a subprocess a real address-space
limit (RLIMIT_AS) shows they fail fast instead of growing.
"""

import subprocess
import sys
import time

import pytest
from _bad_input import cli
from otbench import resources
from otbench.errors import OtbenchError, ResourceLimitError

GIB = 1 << 30


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("lim") / "S"
    assert cli("simulate", "--out", d, "--scale", "tiny").exit_code == 0   # with the default split
    return d


def test_check_budget_refuses_exactly_past_the_largest_accepted_value():
    kw = dict(per_unit=1000, fixed=10_000, available=GIB, unit="draw")
    largest = int((resources.HEADROOM * GIB - 10_000) // 1000)
    resources.check_budget("x", "`draws`", largest, **kw)                 # fits: no error
    with pytest.raises(ResourceLimitError) as e:
        resources.check_budget("thinning", "`draws`", largest + 1, **kw)
    assert isinstance(e.value, OtbenchError) and isinstance(e.value, ValueError)
    assert str(e.value) == (
        f"thinning: `draws` = {largest + 1:,} needs about 0.8 GiB of memory (1,000 bytes per "
        f"draw), but 1.0 GiB is available (a plan may use 80%); the largest accepted `draws` "
        f"here is {largest:,}")


def test_check_budget_time_bound_and_nothing_fits():
    with pytest.raises(ResourceLimitError, match=r"needs about 7\.2e\+12 element operations "
                       r"\(over 2\.0 h at 1e\+09/s; the bound is 1 h\); the largest accepted "
                       r"`n` here is 3,600,000,000,000$"):
        resources.check_budget("w", "`n`", 7_200_000_000_000, per_unit=0, per_unit_ops=1,
                               available=GIB)
    with pytest.raises(ResourceLimitError, match=r"no `n` fits \(the rest of the computation "
                       r"alone needs about 2\.0 GiB\)"):
        resources.check_budget("w", "`n`", 1, per_unit=1, fixed=2 * GIB, available=GIB)


def test_available_memory_sees_the_address_space_limit():
    code = ("import resource; from otbench.resources import available_memory as a; "
            "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY)); "
            "print(a())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0 < int(out.stdout) <= 4 << 30


CASES = {
    "frontier": (("frontier", "{s}", "--grid", "30000000"),
                 "`--grid` = 30,000,000 needs about", "the largest accepted `--grid` here is"),
    "report": (("report", "{s}", "--out", "{out}", "--grid", "30000000"),
               "`--grid` = 30,000,000 needs about", "the largest accepted `--grid` here is"),
    "thinning": (("thinning", "{s}", "--draws", "200000000"),
                 "trajectory thinning of 4 cells at 2 levels: `--draws` = 200,000,000 needs "
                 "about 166.9 GiB of memory (896 bytes per draw)",
                 "the largest accepted `--draws` here is"),
    "bench": (("bench", "run", "{s}", "--method", "thinkbrake-onectx", "--theta-grid", "2000000"),
              "a θ sweep over 4 cells, ", "`--theta-grid` = 2,000,000 needs about",
              "the largest accepted `--theta-grid` here is"),
    "bootstrap": (("bootstrap", "{s}", "--replicates", "2000000", "--batch", "2000000"),
                  "bootstrap of 4 cells, 55 trajectories: `--batch` = 2,000,000 needs about",
                  "results never depend on the batch"),
    "bootstrap-replicates": (("bootstrap", "{s}", "--replicates", "200000000"),
                             "`--replicates` = 200,000,000 needs about",
                             "the largest accepted `--replicates` here is"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_huge_numbers_are_refused_before_allocating(case, tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "available_memory", lambda: 2 * GIB)
    args, *needles = CASES[case]
    out = tmp_path / "out"
    r = cli(*[a.format(s=tiny, out=out) for a in args])
    assert r.exit_code == 2 and "Traceback" not in r.output, (r.output, r.exception)
    last = r.stderr.strip().splitlines()[-1]          # after the banner and progress lines
    for n in (*needles, "2.0 GiB is available"):
        assert n in last, (n, last)
    assert not out.exists()


@pytest.mark.parametrize("case", ["frontier", "bootstrap"])
def test_under_a_real_memory_limit_they_fail_fast(case, tiny, tmp_path):
    """With an 8 GiB address-space limit the process is refused in seconds, not killed."""
    args = [a.format(s=tiny, out=tmp_path / "out") for a in CASES[case][0]]
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (8 << 30, "
            "resource.RLIM_INFINITY)); from otbench.cli import main; sys.exit(main(sys.argv[1:]))")
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "needs about" in r.stderr.strip().splitlines()[-1]
    assert time.monotonic() - t < 120


def test_reuse_freed_memory_runs_the_block_and_passes_errors_through():
    import numpy as np

    with resources.reuse_freed_memory():
        a = np.arange(4_000_000)               # 32 MB: a heap block inside, an mmap outside
        b = a.copy()
        del a
        c = np.arange(4_000_000)
    assert np.array_equal(b, c)
    with pytest.raises(ZeroDivisionError), resources.reuse_freed_memory():
        _ = 1 / 0
    d = np.arange(4_000_000)                   # the allocator works as before afterwards
    assert int(d[-1]) == 3_999_999
