"""Arithmetic whose every bit is the same on every machine (the OTBench fits).

A fitted baseline's numbers (its `θ` sweep, its predictions, hence its
decisions) are written into ``bench`` documents and must not depend on the
CPU. Two things in NumPy do depend on it:

* matrix products and decompositions (`@`, `dot`, `linalg.solve`,
  `linalg.eigh`) call BLAS/LAPACK, whose kernels are picked per CPU (and
  by variables such as ``OPENBLAS_CORETYPE``) and sum in kernel-specific
  orders and block sizes;
* some transcendental ufuncs (`log1p`, `expm1`, `log10`, ... ) use
  SIMD implementations on some CPUs (AVX-512) and the C library elsewhere,
  whose last bits differ; the C library itself may pick FMA variants per
  CPU.

What is the same everywhere: IEEE-754 `+ - * /` and `sqrt` of two float64
values (correctly rounded), elementwise NumPy ufuncs of those (one rounding
per operation; separate ufunc calls are never fused), and NumPy's own
reductions (`sum`, `mean`), whose order is fixed by NumPy's code and the
array's shape, not by the CPU. The functions here are built only from
those, in a stated order, and the transcendental functions from Python's
`decimal` (software arithmetic, `libmpdec`), rounded once to float64.
Costs: `matmul` and `cholesky` do the textbook operation count with one
Python iteration per inner index, a few times slower than BLAS at the sizes
of a question-level fit (hundreds of units; at most ~1,000 columns).
"""

import decimal
import math

import numpy as np
from otbench.errors import ArgumentError

_WIDE = 1 << 14      # outputs of at least this many entries: loop over the inner index
_BLOCK = 1 << 22     # products held at once on the skinny path (32 MiB)
_CTX = decimal.Context(prec=40, rounding=decimal.ROUND_HALF_EVEN, Emax=999999, Emin=-999999)


def matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """`A @ B` (float64 2-D), every entry summed over the inner index in increasing order.

    ``out[i, j] = ((A[i,0] B[0,j] + A[i,1] B[1,j]) + A[i,2] B[2,j]) + ...``,
    each product and each sum rounded once.
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ArgumentError(f"matmul: shapes {A.shape} and {B.shape} do not chain")
    n, K = A.shape
    M = B.shape[1]
    out = np.zeros((n, M), dtype=np.float64)
    if out.size == 0 or K == 0:
        return out
    if n * M >= _WIDE:
        # Wide output: one pass per inner index, each a large elementwise update.
        tmp = np.empty_like(out)
        for k in range(K):
            np.multiply(A[:, k, None], B[None, k, :], out=tmp)
            out += tmp
        return out
    # Skinny output (e.g. predictions): all products of a block of rows at once, then
    # `add.accumulate` along the inner axis, which sums strictly in increasing k. Its
    # first term is the product itself rather than 0 + product; the two differ only
    # in the sign of a zero sum, which the final `+ 0.0` makes +0.0 as in the loop.
    rows = max(1, _BLOCK // (K * M))
    for r0 in range(0, n, rows):
        P = A[r0:r0 + rows, :, None] * B[None, :, :]
        out[r0:r0 + rows] = np.add.accumulate(P, axis=1)[:, -1, :] + 0.0
    return out


def cholesky(S: np.ndarray) -> np.ndarray:
    """Lower factor `F` of a symmetric positive-definite `S = F Fᵀ` (right-looking, in order).

    Column `j` is scaled by `sqrt` of the pivot, then the trailing block
    loses the outer product of that column: every entry of `S` receives its
    updates in increasing `j`. Raises `ValueError` for a non-positive pivot.
    """
    A = np.array(S, dtype=np.float64)
    m = A.shape[0]
    F = np.zeros_like(A)
    for j in range(m):
        piv = A[j, j]
        if not piv > 0.0:
            raise ArgumentError(f"cholesky: pivot {j} is {piv!r}; the matrix is not positive definite")
        col = A[j:, j] / math.sqrt(piv)
        F[j:, j] = col
        rest = col[1:]
        A[j + 1:, j + 1:] -= np.multiply.outer(rest, rest)
    return F


def cho_solve(F: np.ndarray, B: np.ndarray) -> np.ndarray:
    """`X` with `F Fᵀ X = B` (`F` from `cholesky`; `B` float64[m, r]), substitution in order."""
    Z = np.array(B, dtype=np.float64)
    m = F.shape[0]
    for j in range(m):                 # F Z = B, forward
        Z[j] /= F[j, j]
        Z[j + 1:] -= np.multiply.outer(F[j + 1:, j], Z[j])
    for j in range(m - 1, -1, -1):     # Fᵀ X = Z, backward
        Z[j] /= F[j, j]
        Z[:j] -= np.multiply.outer(F[j, :j], Z[j])
    return Z


def _dec(x: float) -> decimal.Decimal:
    return decimal.Decimal(float(x))   # exact: a float is a finite binary fraction


def _ctx(x: decimal.Decimal) -> decimal.Context:
    """40 significant digits of `log(1 + x)` / `exp(x) - 1`, also for tiny `x`.

    Both are about `x` near 0, so `1 + x` (and `exp(x)`) must be carried to
    40 digits *below* `x`'s own magnitude.
    """
    tiny = 0 if x.is_zero() else max(0, -x.adjusted())
    return _CTX.copy() if tiny == 0 else decimal.Context(
        prec=_CTX.prec + tiny, rounding=_CTX.rounding, Emax=_CTX.Emax, Emin=_CTX.Emin)


def log1p_scalar(x: float) -> float:
    """float64 `log(1 + x)` (x > -1) in decimal, rounded once."""
    d = _dec(x)
    c = _ctx(d)
    return float(c.ln(c.add(1, d)))


def log1p(x: np.ndarray) -> np.ndarray:
    """float64 `log(1 + x)` elementwise (x > -1), each computed in decimal and rounded once."""
    flat = np.asarray(x, dtype=np.float64)
    out = [log1p_scalar(v) for v in flat.reshape(-1).tolist()]
    return np.asarray(out, dtype=np.float64).reshape(flat.shape)


def expm1(x: np.ndarray) -> np.ndarray:
    """float64 `exp(x) - 1` elementwise, in decimal, rounded once (overflow: inf)."""
    flat = np.asarray(x, dtype=np.float64)
    out = []
    for v in flat.reshape(-1).tolist():
        if v > 710.0:
            out.append(math.inf)
            continue
        d = _dec(v)
        c = _ctx(d)
        out.append(float(c.subtract(c.exp(d), 1)))
    return np.asarray(out, dtype=np.float64).reshape(flat.shape)


def geomspace(lo: float, hi: float, n: int) -> list[float]:
    """`n >= 2` values from `lo` to `hi` (> 0) in a constant ratio, in decimal, rounded once.

    Value `i` is `lo (hi / lo)^(i / (n - 1))`; the ends are exactly `lo` and `hi`.
    """
    a, b = _dec(lo), _dec(hi)
    ratio = _CTX.divide(b, a)
    out = [float(lo)]
    for i in range(1, n - 1):
        e = _CTX.divide(decimal.Decimal(i), decimal.Decimal(n - 1))
        out.append(float(_CTX.multiply(a, _CTX.power(ratio, e))))
    return out + [float(hi)]


def norm(v: np.ndarray) -> float:
    """Euclidean norm of a 1-D float64 vector: `sqrt` of the correctly rounded sum of squares."""
    v = np.asarray(v, dtype=np.float64)
    return math.sqrt(math.fsum((v * v).tolist()))
