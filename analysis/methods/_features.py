"""Decision units, offline question features, and closed-form ridge regression (docs/rules.md).

Features are computed from what is known before a model thinks (docs/rules.md):
the question text, its benchmark group and dataset, and stored question-
level features. A *featurizer* is any object with ``transform(units) ->
float64[unit, dim]`` (and optionally ``fit(units)``, called on the training
units only); the baselines take one, so stored prompt embeddings replace the
default text features without touching the methods.

`HashedText` (the default) needs no vocabulary and no training, so it works
offline, on CPU and identically for every split:

* text block (`dim` columns): lower-cased alphanumeric word n-grams
  (``ngrams``, default 1 and 2), each hashed with BLAKE2b-64 (keyed by
  ``"otbench/features/v1"``; Python's own `hash` is salted per process and
  would break reproducibility) into a bucket (`h mod dim`) with a sign from
  the top bit (signed hashing keeps collisions unbiased); counts, then the
  row scaled to unit L2 norm;
* categorical block (`cat_dim` columns): ``group=<name>`` and
  ``dataset=<name>`` hashed the same way, value 1;
* two length columns: `log1p(words) / 4` and `log1p(characters) / 8`
  (scaled to about 1, so the ridge penalty treats them like the rest).

`StoredFeatures(name)` reads a stored vector per unit (see
`read_question_features`); `Concat` joins featurizers.
"""

import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet, MeasurementSetError

from . import _detmath as detmath
from ._contract import UnitTable
from otbench.errors import ArgumentError

_KEY = b"otbench/features/v1"
_WORD = re.compile(r"[a-z0-9]+")
DEFAULT_LAMBDAS = tuple(float(10.0 ** (e / 2)) for e in range(-6, 7))
"""Ridge penalties tried on validation: 1e-3 .. 1e3, half-decade steps."""


# -- decision units ---------------------------------------------------------------

def units_of(ms: MeasurementSet, stored: Mapping[str, Mapping] | None = None
             ) -> tuple[np.ndarray, UnitTable]:
    """(unit of each row int64[traj], the `UnitTable`) of a set's (model, question) pairs.

    Units are ordered by (cell, question), the set's row order, and do not
    depend on the input order. `stored` (from `read_question_features`)
    adds stored feature vectors per unit.
    """
    key = ms.cell.astype(np.int64) * max(ms.num_questions, 1) + ms.question
    _, first, unit = np.unique(key, return_index=True, return_inverse=True)
    unit = unit.reshape(-1).astype(np.int64)
    cells = ms.cell[first].astype(np.int64)
    qs = ms.question[first].astype(np.int64)
    mi = ms.cell_model[cells].astype(np.int64)
    gi = ms.question_group[qs].astype(np.int64)
    model = tuple(ms.models[m] for m in mi.tolist())
    group = tuple(ms.groups[g] for g in gi.tolist())
    qid = tuple(ms.question_id[q] for q in qs.tolist())
    feats = {}
    for name, table in sorted((stored or {}).items()):
        rows = []
        for m, g, q in zip(model, group, qid):
            v = table.get((m, g, q), table.get((None, g, q)))
            if v is None:
                raise MeasurementSetError("question_features", f"no {name!r} features for question "
                                                               f"{q!r} of group {g!r} (model {m!r})")
            rows.append(v)
        feats[name] = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
        feats[name].setflags(write=False)
    table = UnitTable(model=model, group=group,
                      dataset=tuple(ms.question_dataset[q] for q in qs.tolist()),
                      question_id=qid,
                      text=tuple(ms.question_text[q] for q in qs.tolist()),
                      model_index=mi, group_index=gi, models=ms.models, groups=ms.groups,
                      features=feats)
    for a in (table.model_index, table.group_index):
        a.setflags(write=False)
    return unit, table


def unit_mean(unit: np.ndarray, values: np.ndarray, num_units: int) -> np.ndarray:
    """float64[unit] mean of per-row `values` over each unit's trajectories."""
    s = np.bincount(unit, weights=np.asarray(values, dtype=np.float64), minlength=num_units)
    c = np.bincount(unit, minlength=num_units)
    return s / np.maximum(c, 1)


def read_question_features(table: Any) -> dict[str, dict]:
    """Stored question-level features from an Arrow table (e.g. the set's `question_features`).

    Columns: ``group``, ``question`` (strings), optionally ``model`` (null or
    absent = the same vector for every model), and one list-of-float column
    per feature name. Returns name -> {(model or None, group, question):
    float64[dim]}; every vector of a name must have the same length.
    """
    cols = set(table.column_names)
    for c in ("group", "question"):
        if c not in cols:
            raise MeasurementSetError("question_features", f"missing column {c!r}")
    g = table.column("group").to_pylist()
    q = table.column("question").to_pylist()
    m = table.column("model").to_pylist() if "model" in cols else [None] * len(g)
    out: dict[str, dict] = {}
    for name in sorted(cols - {"group", "question", "model"}):
        vals = table.column(name).to_pylist()
        d: dict = {}
        dim = None
        for i, v in enumerate(vals):
            if not isinstance(v, list) or not all(isinstance(x, (int, float)) for x in v):
                raise MeasurementSetError(f"question_features: row {i}",
                                          f"{name!r} must be a list of numbers")
            if dim is None:
                dim = len(v)
            elif len(v) != dim:
                raise MeasurementSetError(f"question_features: row {i}",
                                          f"{name!r} has {len(v)} values, expected {dim}")
            key = (m[i], g[i], q[i])
            if key in d:
                raise MeasurementSetError(f"question_features: row {i}",
                                          f"duplicate entry for question {q[i]!r} of group {g[i]!r}")
            d[key] = np.asarray(v, dtype=np.float64)
        out[name] = d
    return out


# -- featurizers ----------------------------------------------------------------------

def _hash(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8, key=_KEY).digest(),
                          "big")


@dataclasses.dataclass(frozen=True)
class HashedText:
    """Hashed word n-grams + hashed group/dataset + lengths (module docstring)."""

    dim: int = 1024
    ngrams: tuple[int, ...] = (1, 2)
    cat_dim: int = 32

    @property
    def width(self) -> int:
        return self.dim + self.cat_dim + 2

    def config(self) -> dict[str, Any]:
        return {"featurizer": "hashed-text/1", "dim": self.dim, "ngrams": list(self.ngrams),
                "cat_dim": self.cat_dim}

    def transform(self, units: UnitTable) -> np.ndarray:
        X = np.zeros((len(units), self.width), dtype=np.float64)
        cache: dict[str, int] = {}

        def h(tok: str) -> int:
            v = cache.get(tok)
            if v is None:
                v = cache[tok] = _hash(tok)
            return v

        done: dict[tuple, int] = {}
        for i in range(len(units)):
            # Units of different models share the question: compute it once.
            key = (units.text[i], units.group[i], units.dataset[i])
            if key in done:
                X[i] = X[done[key]]
                continue
            done[key] = i
            text = units.text[i] or ""
            words = _WORD.findall(text.lower())
            row = X[i]
            for n in self.ngrams:
                for j in range(len(words) - n + 1):
                    v = h(" ".join(words[j:j + n]))
                    row[v % self.dim] += 1.0 if v >> 63 else -1.0
            norm = detmath.norm(row[:self.dim])
            if norm > 0:
                row[:self.dim] /= norm
            for tok in (f"group={units.group[i]}", f"dataset={units.dataset[i]}"):
                v = h(tok)
                row[self.dim + v % self.cat_dim] += 1.0 if v >> 63 else -1.0
            row[-2] = detmath.log1p_scalar(len(words)) / 4.0
            row[-1] = detmath.log1p_scalar(len(text)) / 8.0
        return X


@dataclasses.dataclass(frozen=True)
class StoredFeatures:
    """The stored feature vectors `units.features[name]` (e.g. prompt embeddings)."""

    name: str

    def config(self) -> dict[str, Any]:
        return {"featurizer": "stored/1", "name": self.name}

    def transform(self, units: UnitTable) -> np.ndarray:
        if self.name not in units.features:
            raise MeasurementSetError("question_features",
                                      f"no stored feature {self.name!r} (have: "
                                      f"{', '.join(sorted(units.features)) or 'none'})")
        return np.asarray(units.features[self.name], dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class Concat:
    """Columns of several featurizers side by side."""

    parts: tuple[Any, ...]

    def config(self) -> dict[str, Any]:
        return {"featurizer": "concat/1", "parts": [_config(p) for p in self.parts]}

    def transform(self, units: UnitTable) -> np.ndarray:
        return np.concatenate([p.transform(units) for p in self.parts], axis=1)


def _config(f: Any) -> Any:
    return f.config() if callable(getattr(f, "config", None)) else type(f).__name__


def featurizer(spec: str | Any) -> Any:
    """``"hashed"`` (default text features), ``"stored:NAME"``, ``"hashed+stored:NAME"``, or an object."""
    if not isinstance(spec, str):
        if not callable(getattr(spec, "transform", None)):
            raise ArgumentError("`features` must be 'hashed', 'stored:NAME' or an object with "
                                f"transform(units), got {spec!r}")
        return spec
    parts = []
    for part in spec.split("+"):
        if part == "hashed":
            parts.append(HashedText())
        elif part.startswith("stored:") and len(part) > len("stored:"):
            parts.append(StoredFeatures(part[len("stored:"):]))
        else:
            raise ArgumentError(f"`features` must be 'hashed', 'stored:NAME' or both joined by '+', "
                                f"got {spec!r}")
    return parts[0] if len(parts) == 1 else Concat(tuple(parts))


# -- ridge regression (closed form, fixed-order arithmetic) ---------------------------
#
# Every product and solve goes through `_detmath` (no BLAS/LAPACK), so a fit --
# and the θ sweep, predictions and decisions built on it -- is the same to the
# last bit on every machine (issue 24; docs/guides/scale.md, determinism).

@dataclasses.dataclass(frozen=True)
class Ridge:
    """`y ≈ X w + b` with an unpenalized intercept; `w: float64[dim, out]`, `b: float64[out]`."""

    w: np.ndarray
    b: np.ndarray
    lam: float

    def predict(self, X: np.ndarray) -> np.ndarray:
        return detmath.matmul(X, self.w) + self.b


@dataclasses.dataclass(frozen=True)
class _Gram:
    """The smaller Gram matrix of a centered design, and its Cholesky factor per penalty.

    `dual`: `G = Xc Xcᵀ` (more columns than rows), else `G = Xcᵀ Xc`. The
    factors of `G + lam I` are cached per `lam`, so designs shared by
    several models or targets are factored once per penalty.
    """

    xm: np.ndarray       # float64[dim] column means
    Xc: np.ndarray       # float64[n, dim] centered design
    G: np.ndarray        # float64[r, r], r = min(n, dim)
    dual: bool
    factors: dict = dataclasses.field(default_factory=dict, compare=False)

    @staticmethod
    def of(X: np.ndarray) -> "_Gram":
        X = np.asarray(X, dtype=np.float64)
        xm = X.mean(axis=0)
        Xc = X - xm
        dual = Xc.shape[1] > Xc.shape[0]
        G = detmath.matmul(Xc, Xc.T) if dual else detmath.matmul(Xc.T, Xc)
        return _Gram(xm=xm, Xc=Xc, G=G, dual=dual)

    def factor(self, lam: float) -> np.ndarray:
        F = self.factors.get(lam)
        if F is None:
            F = self.factors[lam] = detmath.cholesky(self.G + lam * np.eye(self.G.shape[0]))
        return F

    def solve(self, Y: np.ndarray, lams: Sequence[float]) -> list[Ridge]:
        Y = np.asarray(Y, dtype=np.float64)
        ym = Y.mean(axis=0)
        Yc = Y - ym
        rhs = Yc if self.dual else detmath.matmul(self.Xc.T, Yc)
        out = []
        for lam in lams:
            w = detmath.cho_solve(self.factor(float(lam)), rhs)
            if self.dual:
                w = detmath.matmul(self.Xc.T, w)
            out.append(Ridge(w=w, b=ym - detmath.matmul(self.xm[None, :], w)[0], lam=float(lam)))
        return out


def ridge_fit(X: np.ndarray, Y: np.ndarray, lam: float) -> Ridge:
    """Minimize `|Y - X w - b|^2 + lam |w|^2` in closed form.

    Centering removes the intercept from the penalty. With at most as many
    columns as rows, `w = (Xcᵀ Xc + lam I)⁻¹ Xcᵀ Yc`; with more columns
    than rows the dual form `w = Xcᵀ (Xc Xcᵀ + lam I)⁻¹ Yc` solves an
    `n x n` system instead of `dim x dim`; both are the same minimizer. The
    system is solved by Cholesky in fixed-order arithmetic (`_detmath`).

    Args:
      X: float64[n, dim]; Y: float64[n, out] (n >= 1); lam > 0.
    """
    return _Gram.of(X).solve(Y, [lam])[0]


def ridge_path(X: np.ndarray, Y: np.ndarray, lambdas: Sequence[float],
               gram: "_Gram | None" = None) -> list[Ridge]:
    """`ridge_fit` for every penalty from one Gram matrix, which `gram` may supply
    when several targets share a design (tests compare with `ridge_fit` and a
    least-squares twin)."""
    g = _Gram.of(X) if gram is None else gram
    return g.solve(Y, lambdas)


def ridge_select(X: np.ndarray, Y: np.ndarray, Xv: np.ndarray, Yv: np.ndarray,
                 lambdas: Sequence[float] = DEFAULT_LAMBDAS,
                 gram: _Gram | None = None) -> tuple[Ridge, list[float]]:
    """Fit on (X, Y) for every penalty; keep the one with the least validation MSE.

    Ties go to the larger penalty (the simpler model). Without validation
    rows the middle penalty of `lambdas` is used. Returns (model, MSE per
    penalty; empty without validation).
    """
    if len(Xv) == 0:
        return ridge_path(X, Y, [lambdas[len(lambdas) // 2]], gram)[0], []
    fits = ridge_path(X, Y, lambdas, gram)
    mse = [float(np.mean((r.predict(Xv) - Yv) ** 2)) for r in fits]
    best = min(range(len(lambdas)), key=lambda i: (mse[i], -lambdas[i]))
    return fits[best], mse


@dataclasses.dataclass
class PerModelRidge:
    """One ridge model per model name (outcomes are model-specific), pooled as a fallback.

    A model without training units (possible only when all its questions fell
    outside train) is predicted by the ridge fit on all models' units.
    """

    featurizer: Any
    lambdas: tuple[float, ...] = DEFAULT_LAMBDAS
    fits: dict[str, Ridge] = dataclasses.field(default_factory=dict)
    pooled: Ridge | None = None
    chosen: dict[str, float] = dataclasses.field(default_factory=dict)

    def fit(self, units: UnitTable, Y: np.ndarray, vunits: UnitTable, Yv: np.ndarray) -> None:
        if len(units) == 0:
            raise ArgumentError("the train split has no decision units to learn from")
        if callable(getattr(self.featurizer, "fit", None)):
            self.featurizer.fit(units)
        X, Xv = self.featurizer.transform(units), self.featurizer.transform(vunits)
        Y, Yv = np.asarray(Y, dtype=np.float64), np.asarray(Yv, dtype=np.float64)
        self.chosen = {}
        self.fits = {}
        self.pooled = None
        if set(units.model) != set(units.models):
            # Some model of the set has no training unit: it gets the pooled fit.
            self.pooled, _ = ridge_select(X, Y, Xv, Yv, self.lambdas)
            self.chosen["*"] = self.pooled.lam
        vm = np.asarray(vunits.model)
        # Models usually share their training questions, hence their design:
        # decompose each distinct design once.
        grams: list[tuple[np.ndarray, _Gram]] = []
        for name in sorted(set(units.model)):
            sel = np.asarray(units.model) == name
            vsel = vm == name
            Xs = X[sel]
            g = next((g for x, g in grams if x.shape == Xs.shape and np.array_equal(x, Xs)), None)
            if g is None:
                g = _Gram.of(Xs)
                grams.append((Xs, g))
            r, _ = ridge_select(Xs, Y[sel], Xv[vsel], Yv[vsel], self.lambdas, g)
            self.fits[name] = r
            self.chosen[name] = r.lam

    def predict(self, units: UnitTable) -> np.ndarray:
        if not self.fits:
            raise ArgumentError("predict() before fit()")
        X = self.featurizer.transform(units)
        width = next(iter(self.fits.values())).w.shape[1]
        out = np.zeros((len(units), width), dtype=np.float64)
        names = np.asarray(units.model, dtype=object)
        for name in sorted(set(units.model)):
            sel = names == name
            r = self.fits.get(name, self.pooled)
            if r is None:
                raise ArgumentError(f"no fit for model {name!r} (it was not in the training set's "
                                    "name tables)")
            out[sel] = r.predict(X[sel])
        return out
