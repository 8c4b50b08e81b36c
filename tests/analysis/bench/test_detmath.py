"""Fixed-order arithmetic of the OTBench fits (`_detmath`, issue 24 item 0).

Each kernel is checked two ways: bit for bit against a plain Python twin that
does the stated operations in the stated order (the definition that makes
it machine-independent), and within a stated tolerance against NumPy/BLAS
(that it computes the right thing). The fits are then re-run in fresh
processes under different OpenBLAS kernel selections and must agree to
the last bit, which the BLAS-based fits did not (they gave three different
`bench.json` digests under Haswell, Prescott and Sandybridge kernels).
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.methods import _detmath as dm

# -- twins: the stated order, in plain Python floats ---------------------------------------------

def matmul_twin(A, B):
    n, K = A.shape
    M = B.shape[1]
    out = [[0.0] * M for _ in range(n)]
    for i in range(n):
        for j in range(M):
            s = 0.0
            for k in range(K):
                s = s + float(A[i, k]) * float(B[k, j])
            out[i][j] = s
    return np.asarray(out, dtype=np.float64).reshape(n, M)


def cholesky_twin(S):
    A = [[float(x) for x in row] for row in S]
    m = len(A)
    F = [[0.0] * m for _ in range(m)]
    for j in range(m):
        r = math.sqrt(A[j][j])
        col = [A[i][j] / r for i in range(j, m)]
        for i in range(j, m):
            F[i][j] = col[i - j]
        for a in range(j + 1, m):
            for b in range(j + 1, m):
                A[a][b] = A[a][b] - col[a - j] * col[b - j]
    return np.asarray(F, dtype=np.float64).reshape(m, m)


def finite(lo=-1e3, hi=1e3):
    # whole numbers and signed zeros too: exact cancellations and the sign of a zero sum
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0, 1.0, -1.0])


@st.composite
def matrices(draw):
    n, K, M = (draw(st.integers(0, 5)) for _ in range(3))
    A = np.asarray(draw(st.lists(finite(), min_size=n * K, max_size=n * K)), dtype=np.float64)
    B = np.asarray(draw(st.lists(finite(), min_size=K * M, max_size=K * M)), dtype=np.float64)
    return A.reshape(n, K), B.reshape(K, M)


@settings(max_examples=80)
@given(matrices())
def test_matmul_is_its_twin_bit_for_bit(ab):
    A, B = ab
    got = dm.matmul(A, B)
    assert got.shape == (A.shape[0], B.shape[1])
    assert got.tobytes() == matmul_twin(A, B).tobytes()
    wide, dm._WIDE = dm._WIDE, 0          # the other path (one pass per inner index)
    try:
        assert dm.matmul(A, B).tobytes() == got.tobytes()
    finally:
        dm._WIDE = wide
    # and the product BLAS computes, up to rounding (|A||B| scale)
    scale = np.abs(A) @ np.abs(B) if A.size and B.size else np.zeros_like(got)
    assert np.all(np.abs(got - A @ B) <= 1e-12 * scale + 1e-300)


@st.composite
def spd(draw):
    m = draw(st.integers(1, 6))
    r = draw(st.integers(0, m))          # rank of the PSD part: flat and rank-deficient too
    V = np.asarray(draw(st.lists(finite(-3, 3), min_size=m * r, max_size=m * r))).reshape(m, r)
    lam = draw(st.sampled_from([1e-3, 1e-1, 1.0, 10.0]))
    return dm.matmul(V, V.T) + lam * np.eye(m)


@settings(max_examples=80)
@given(spd(), st.integers(1, 3))
def test_cholesky_and_solve(S, r):
    F = dm.cholesky(S)
    assert F.tobytes() == cholesky_twin(S).tobytes()
    assert np.allclose(F, np.linalg.cholesky(S), rtol=1e-9, atol=1e-9 * np.abs(S).max())
    B = np.arange(S.shape[0] * r, dtype=np.float64).reshape(-1, r) - 1.5
    X = dm.cho_solve(F, B)
    assert np.allclose(X, np.linalg.solve(S, B), rtol=1e-6, atol=1e-6)


def test_cholesky_refuses_indefinite():
    with pytest.raises(ValueError, match="not positive definite"):
        dm.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))


@settings(max_examples=60)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=0, max_size=20))
def test_transcendentals_within_an_ulp_of_libm(xs):
    x = np.asarray(xs, dtype=np.float64)
    assert np.all(np.abs(dm.log1p(x) - np.log1p(x)) <= 2 * np.spacing(np.log1p(x)))
    y = -x / 1e4
    assert np.all(np.abs(dm.expm1(y) - np.expm1(y)) <= 2 * np.spacing(np.abs(np.expm1(y))) + 1e-300)
    for v in xs[:3]:
        assert dm.log1p_scalar(v) == dm.log1p(np.array([v]))[0]
    assert dm.expm1(np.array([800.0]))[0] == math.inf


def test_geomspace_and_norm():
    g = dm.geomspace(1 / 8, 32.0, 20)
    assert g[0] == 1 / 8 and g[-1] == 32.0 and len(g) == 20
    assert np.allclose(g, np.geomspace(1 / 8, 32.0, 20), rtol=1e-14)
    assert dm.geomspace(1.0, 4.0, 3) == [1.0, 2.0, 4.0]           # exact powers stay exact
    v = np.array([3.0, 4.0, 0.0])
    assert dm.norm(v) == 5.0 and dm.norm(v[:0]) == 0.0


# -- the fits under different BLAS kernels ------------------------------------------------------

FIT = r"""
import hashlib, json, numpy as np
from otbench.analysis import simulate
from otbench.analysis.methods._baselines import PredictiveScheduling, ThinkSwitcher
from otbench.analysis.methods._features import units_of
from otbench.analysis.bench._splits import assign_splits
ms = assign_splits(simulate("small", 1))
tr, va, te = (ms.take(np.flatnonzero(ms.split == s)) for s in range(3))
_, tunits = units_of(te)
h = hashlib.sha256()
for m in (ThinkSwitcher(), PredictiveScheduling()):
    m.fit(tr, va)
    h.update(np.asarray(m.theta_grid(21)).tobytes())
    h.update(m._ridge.predict(tunits).tobytes())
    h.update(json.dumps(m.config(), sort_keys=True).encode())
print(h.hexdigest())
"""


def _fit_digest(coretype):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    r = subprocess.run([sys.executable, "-c", FIT], env=env, capture_output=True, text=True, check=False,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_fits_are_the_same_bits_under_every_blas_kernel():
    digests = {ct: _fit_digest(ct) for ct in (None, "Prescott", "Haswell")}
    assert len(set(digests.values())) == 1, json.dumps(digests)
