"""Frontier bootstrap replicates pinned against stored reference replicates (issue 17).

The replicates in `artifacts/reference/bootstrap-frontiers-replicates.npz`
were computed with the frontier pipeline as it stood before the issue-17
speed work (commit 1901c5b: NumPy units, JAX DP), on three small sets that
cover the SPEC §2 edge cases (a simulated tiny set, a simulated small set,
and a hand-built ragged set with zero-length steps, `n = 0`, unequal `R`
and `P` and a (model, question) a model lacks). Every replicate of every
frontier (reward, reward at β = 1, tokens, probes, endpoint) must stay
equal bit for bit, for any batch size, with worker processes, and across a
checkpoint and resume.

Regenerate (only for an intended change, said in the commit):
`python tests/analysis/resampling/test_bootstrap_frontiers_reference.py --write`.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

REFERENCE = (Path(__file__).resolve().parents[3] / "artifacts" / "reference"
             / "bootstrap-frontiers-replicates.npz")
FIELDS = ("reward", "reward_one", "tokens", "probes", "endpoint")


def ragged_reference_set():
    """2 models x 2 groups; unequal R and P, a missing (model, question), zero-length
    steps, n = 0, flat curves and ties (seeded, so the test rebuilds it exactly)."""
    from otbench.analysis import from_ragged, ragged

    rng = np.random.default_rng(17)
    rows = []
    for m in ("a", "b"):
        for g, qs in (("g1", ("q1", "q2", "q3")), ("g2", ("q4", "q5", "q6", "q7"))):
            for q in qs:
                if m == "b" and q == "q2":
                    continue
                P = int(rng.integers(1, 6))
                for s in range(int(rng.integers(1, 5))):
                    n = int(rng.integers(0, 6))
                    L = np.r_[0, np.cumsum(rng.choice([0, 1, 7, 30], n))].tolist()
                    C = (rng.integers(0, P + 1, n + 1) if rng.random() < 0.7
                         else np.full(n + 1, int(rng.integers(0, P + 1)))).tolist()
                    rows.append((m, g, q, s, P, L, C))
    cols = list(zip(*rows))
    return from_ragged(model=list(cols[0]), group=list(cols[1]), question=list(cols[2]),
                       trajectory=np.asarray(cols[3]), probes=np.asarray(cols[4]),
                       L=ragged(list(cols[5]), np.int64), C=ragged(list(cols[6]), np.int64),
                       y=np.zeros(len(rows), dtype=np.int64), synthetic=True)


def cases():
    """name -> (set builder, bootstrap settings)."""
    from otbench.analysis import simulate

    return {
        "tiny": (lambda: simulate("tiny", seed=3), {"replicates": 48, "seed": 11, "grid": 101}),
        "small": (lambda: simulate("small", seed=3), {"replicates": 10, "seed": 12, "grid": 101}),
        "ragged": (ragged_reference_set, {"replicates": 48, "seed": 13, "grid": 11}),
    }


def run(name, **extra):
    from otbench.analysis.resampling._bootstrap import bootstrap

    make, settings = cases()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # undefined cells in the ragged set's replicates
        return bootstrap(make(), frontiers=True, **settings, **extra).frontiers


def reference(name):
    with np.load(REFERENCE) as z:
        return {f: z[f"{name}/{f}"] for f in FIELDS}


def assert_reference(name, got):
    want = reference(name)
    for f in FIELDS:
        x = np.asarray(getattr(got, f))
        assert x.dtype == np.int64 and x.shape == want[f].shape, (name, f, x.shape)
        bad = np.argwhere(x != want[f])
        assert bad.size == 0, (name, f, "first differing index", bad[:3].tolist())


@pytest.mark.parametrize("name,batch", [("tiny", None), ("tiny", 5), ("small", 4),
                                        ("ragged", None), ("ragged", 7)])
def test_replicates_equal_reference(name, batch):
    assert_reference(name, run(name, batch=batch))


def test_workers_equal_reference():
    assert_reference("ragged", run("ragged", batch=16, workers=1))


def test_resume_equals_reference(tmp_path):
    # Stop after two batches (checkpoint every batch), then resume to the end.
    from otbench.analysis.resampling._bootstrap import bootstrap

    make, settings = cases()["tiny"]
    calls = []

    def stop(done):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bootstrap(make(), frontiers=True, batch=6, checkpoint_dir=tmp_path, checkpoint_every=1,
                  progress=stop, **settings)
    assert_reference("tiny", run("tiny", batch=6, checkpoint_dir=tmp_path, resume=True))


def write() -> None:
    out = {}
    for name in cases():
        f = run(name)
        for field in FIELDS:
            out[f"{name}/{field}"] = np.asarray(getattr(f, field))
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(REFERENCE, **out)
    print(f"wrote {REFERENCE} ({REFERENCE.stat().st_size} bytes)")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: test_bootstrap_frontiers_reference.py --write")
    write()
