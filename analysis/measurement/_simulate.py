"""A calibrated simulator of STP measurement sets, clearly marked synthetic (docs/rules.md).

Without the original model outputs the paper's numbers cannot be recomputed,
so `simulate` draws measurement sets with the paper's shapes (docs/rules.md) and
aggregates near the paper's (docs/rules.md), for scale, performance and end-to-end
work. Every set it returns has ``synthetic=True`` and records the generator
(``otbench.simulate/1``), every parameter, the scale and the seed in
``provenance``. Model names are invented look-alikes under ``sim/`` and stand
for no real checkpoint; question texts are placeholders.

Generative model. All draws come from one ``numpy.random.default_rng(seed)``
in a fixed order, so a seed gives a bit-identical set. Logit units unless
stated; ``N`` is a fresh standard normal, ``sigmoid(x) = 1/(1+e^-x)``; group
parameters (`_Group`) carry a ``_g`` suffix, model parameters (`_Model`) ``_m``.

1. Questions. A question of group ``g`` gets a topic (uniform over the
   group's topics) and a latent difficulty ``d = topic_offset + diff_sd_g N``.
   Its text names dataset, number and topic, and its length grows with ``d``,
   so offline text features are weakly informative, as real ones are.
2. Trajectory counts. ``R`` per (model, question) is uniform on the scale's
   range (``tiny``: 3..4, so unequal ``R`` always occurs).
3. Zero-step accuracy. Position 0 retains no thinking, so every trajectory
   of a (model, question) sees the same prompt and gets the same probe
   accuracy ``p0 = sigmoid(z0)``, ``z0 = skill_m + zero_m + zero_g - d +
   1.5 N_mq``.
4. Length. ``log L_raw = log tokens_g + length_m + len_diff_g d + 0.2 N_mq
   + len_sd_g N - 0.3 e`` (``e`` from step 6: trajectories that struggle
   think longer). With probability 0.001 thinking closes at once (``L = 0``,
   ``n = 0``). ``L(n) = min(round(L_raw), 32768)``; reaching the limit gives
   ``finished = False``.
5. Steps (docs/rules.md, ``b = 256``). ``n = max(1, floor(L(n)/256 + 1/2))``;
   with probability ``few_blocks_g`` the text has fewer boundaries than that
   and ``n`` shrinks to ``max(1, floor(n U(0.3, 1)))``. Step ``i`` gets
   ``L(n) w_i / sum(w)`` tokens, ``w_i ~ Gamma(4, 1)`` (spread 1/2 around the
   mean step), but ``w_i = 0`` with probability 0.01: an empty step, i.e. a
   repeated ``L`` value. Cumulative lengths are rounded, so ``L(0) = 0`` and
   ``L`` is non-decreasing. ``u_k = L(k)/L(n)`` is the thinking fraction.
6. Answer state. A chain over positions with states undecided / holding
   the correct answer / lost (committed to a wrong answer after holding the
   right one). It starts holding with probability ``p0**2`` (a confident
   direct answer carries over), else undecided. Between ``u_{k-1}`` and
   ``u_k`` the transition probability is ``1 - exp(-(H(u_k) - H(u_{k-1})))``
   for the cumulative hazards
   * discovery (undecided -> holding): ``H = lam u**a`` with ``lam =
     -log(1 - pi)``, ``pi = sigmoid(skill_m + solve_g - d + e)``, ``e = 0.8
     N`` and ``a = lateness_m lateness_g``; without corruption ``pi`` is the
     chance to find the answer by the end, ``a`` moves it later (``a > 1``) or
     earlier, which sets the overthinking ratio;
   * corruption (holding -> lost, overthinking): ``H = mu u**3``, so the
     risk grows with later steps; ``mu = corrupt_g overthink_m exp(0.7 N)``,
     strong for GPQA, weak for MATH;
   * rediscovery (lost -> holding): half the discovery hazard.
   Empty steps change nothing (same prefix, same state).
7. Probes. ``p(0) = p0``; at ``k >= 1`` ``p(k) = sigmoid(level + jitter_k)``
   with level ``h = hi_g + 0.5 skill_m - 0.3 d + 0.5 N`` while holding,
   ``l = lo_g + 0.3 skill_m + 0.5 N`` when lost, ``z0`` while undecided, and
   i.i.d. ``jitter_k = jitter_g N`` (an empty step repeats its predecessor's
   jitter). ``C(k) ~ Binomial(P, p(k))`` independently per position.
8. Original answer. ``y ~ Bernoulli(p(n))`` when thinking finished and
   ``Bernoulli(0.5 p(n))`` when it was cut at the limit (such generations
   often end without a final answer).
9. Signal ``margin`` (docs/rules.md): at every boundary, log-probability of the
   most likely non-ending token minus that of the thinking-end token, in
   nats. The model's confidence ``conf`` is an exponential moving average of
   "holding" over ``u`` (rate 8 per unit); ``margin_k = b + 6 (1 - conf_k) +
   3 (1 - u_k) + N`` with ``b = 1.5 + 0.7 N`` per trajectory. It falls once
   the answer has been held a while and as thinking goes on, so a threshold
   (ThinkBrake-style) rule is informative but, through the noise, imperfect.
   At the prefix a finished trajectory ended on the model did choose to end,
   so the margin there is ``-1 + 0.7 N``. Empty steps repeat the margin.

Calibration (paper scale, seeds 0-2; tests/test_simulate.py recomputes it
with an independent NumPy OR/AD): macro OR 65.6-66.2 % (paper 64.3), macro
AD 9.8-9.9 pp (9.03), MATH500 80-82 % / 2.1-2.3 pp (78.8 / 1.83), GPQA the
largest AD at 17.3-17.5 pp (16.98), per-model OR 48-76 % and AD 6.8-12.2 pp
(41.1-74.4, 5.64-13.40), original accuracy 71-72 % (71.78), STP endpoint
71-72.5 % (72.33), macro mean thinking tokens 8,330-8,470 (8,281; pooled
about 6,100-6,260 per trajectory, 565-579 M in all against 577 M). Thinning
to 4 / 8 / 12 probes gives expected OR about 74 / 70 / 68 % and earliest-
maximizer retention about 54 / 70 / 83 %, close to docs/rules.md without being
tuned for it.

Scales: ``paper`` -- 6 models x 963 questions (AIME 3 x 30, MATH500 500,
GPQA-Diamond 198, LiveCodeBench 175) x 16 trajectories, 16 probes (92,448
trajectories); ``small`` -- 3 models x 81 questions x 8 trajectories, 8
probes; ``tiny`` -- 2 models x 2 groups (AIME, GPQA-Diamond) x 4 questions x
3-4 trajectories, 4 probes, for tests. ``small`` and ``tiny`` force one
``n = 0`` and one capped trajectory so these edge cases always occur. Splits
are left unassigned.
"""

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from . import _libm
from ._build import from_ragged
from ._calibration import GROUPS, MODELS, SCALE_SIZES, Group, Model
from ._field import add_field_signals
from ._peer_signals import add_peer_signals
from ._types import MeasurementSet
from otbench.errors import ArgumentError

GENERATOR = "otbench.simulate/1"
SCALES = ("tiny", "small", "paper")
THINKING_LIMIT = 32_768
"""Thinking-token limit (docs/rules.md); longer trajectories are cut here, finished=False."""
STEP_TOKENS = 256
"""Target average step length `b` (docs/rules.md)."""


# Global constants of the generative model (module docstring).
_EMPTY_RATE = 0.001        # trajectories with no thinking at all
_ZERO_STEP_RATE = 0.01     # empty steps (repeated L)
_STEP_SHAPE = 4.0          # Gamma shape of step weights
_CAPPED_Y = 0.5            # y-probability factor of trajectories cut at the limit
_RECOVER = 0.5             # rediscovery hazard relative to discovery
_CORRUPT_POWER = 3.0       # corruption cumulative hazard grows like u**power
_CONF_RATE = 8.0           # confidence EMA rate per unit of thinking fraction
_ZERO_SD = 1.5             # zero-step logit spread per (model, question)
_MARGIN = {"base": 1.5, "base_sd": 0.7, "unconfident": 6.0, "remaining": 3.0, "noise": 1.0,
           "end": -1.0, "end_sd": 0.7}   # margin signal, nats (module docstring, item 9)
_UNDECIDED, _HELD, _LOST = 0, 1, 2   # answer states
_FILLER = ("placeholder", "text", "of", "a", "synthetic", "question", "without", "content")


def _simulate_iv(scale: Any, seed: Any) -> tuple[str, int]:
    """Validate `simulate`'s arguments; messages are pinned by tests/test_simulate.py."""
    if not isinstance(scale, str) or scale not in SCALES:
        raise ArgumentError(f"`scale` must be one of {'|'.join(SCALES)}, got {scale!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ArgumentError(f"`seed` must be a non-negative integer, got {seed!r}")
    return scale, int(seed)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + _libm.tanh(0.5 * x))


def _parameters(scale: str) -> dict[str, Any]:
    """JSON-serializable description of every generator parameter (for provenance)."""
    sc = SCALE_SIZES[scale]
    return {
        "scale": dataclasses.asdict(sc),
        "groups": [dataclasses.asdict(GROUPS[g]) for g in sc.groups],
        "models": [dataclasses.asdict(MODELS[m]) for m in sc.models],
        "thinking_limit": THINKING_LIMIT, "step_tokens": STEP_TOKENS,
        "empty_rate": _EMPTY_RATE, "zero_step_rate": _ZERO_STEP_RATE,
        "step_shape": _STEP_SHAPE, "capped_y": _CAPPED_Y, "recover": _RECOVER,
        "corrupt_power": _CORRUPT_POWER, "conf_rate": _CONF_RATE, "zero_sd": _ZERO_SD,
        "margin": dict(_MARGIN),
    }


def _questions(scale: str, rng: np.random.Generator):
    """Per-question tables: group index, id, dataset, difficulty, text."""
    sc = SCALE_SIZES[scale]
    q_group, q_id, q_dataset = [], [], []
    for j, g in enumerate(sc.groups):
        grp = GROUPS[g]
        nd = len(grp.datasets)
        for i_ds, (ds, count) in enumerate(grp.datasets):
            if sc.questions is not None:  # the group's quota, spread over its datasets
                count = sc.questions[j] // nd + (i_ds < sc.questions[j] % nd)
            for i in range(count):
                q_group.append(g)
                q_id.append(f"{ds}-{i + 1:03d}")
                q_dataset.append(ds)
    q_group_arr = np.array(q_group, dtype=np.int64)
    Q = q_group_arr.size
    topic_u = rng.random(Q)
    z = rng.standard_normal(Q)
    diff = np.empty(Q)
    q_topic = np.empty(Q, dtype=object)
    for g in sc.groups:
        grp = GROUPS[g]
        sel = q_group_arr == g
        t = np.minimum((topic_u[sel] * len(grp.topics)).astype(np.int64), len(grp.topics) - 1)
        offsets = np.array([o for _, o in grp.topics])
        diff[sel] = offsets[t] + grp.diff_sd * z[sel]
        q_topic[sel] = np.array([name for name, _ in grp.topics], dtype=object)[t]
    # Placeholder statements whose length grows with difficulty (item 1).
    words = rng.poisson(np.clip(30.0 + 12.0 * diff, 5.0, None))
    text = [f"[synthetic] {ds} question {qid.rsplit('-', 1)[1]}, topic {tp}: "
            + " ".join(_FILLER[j % len(_FILLER)] for j in range(int(w)))
            for ds, qid, tp, w in zip(q_dataset, q_id, q_topic, words)]
    return q_group_arr, q_id, q_dataset, diff, text


def _chain(n: np.ndarray, off: np.ndarray, u: np.ndarray, start: np.ndarray, lam: np.ndarray,
           late: np.ndarray, mu: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Run the answer-state chain and the confidence average over every trajectory.

    Args:
      n: int64[traj] steps; off: int64[traj + 1] flat row offsets (row length n + 1).
      u: float64[flat] thinking fraction L(k)/L(n) at every valid position.
      start: int8[traj] state at k = 0; lam, late, mu: float64[traj] hazard
        parameters (discovery lam * u**late, corruption mu * u**3).
      U: float64[flat] uniforms driving the transitions (entry k = 0 unused).

    Returns:
      (int8[flat] state, float64[flat] confidence) at every valid position.
    """
    # Rows sorted by n (descending) are active at position k exactly when they
    # lie in a prefix, so the loop touches only valid positions: work ~ sum(n).
    order = np.argsort(-n, kind="stable")
    neg_n = -n[order]
    base = off[:-1][order]
    lam, mu = lam[order], mu[order]
    u_late = _libm.power(u, np.repeat(late, n + 1))
    st = start[order].copy()
    conf = np.zeros(n.size)
    state = np.zeros(u.size, dtype=np.int8)
    confs = np.zeros(u.size)
    state[off[:-1]] = start
    u_pow = _libm.power(u, _CORRUPT_POWER)
    for k in range(1, int(n.max(initial=0)) + 1):
        m = int(np.searchsorted(neg_n, -k, side="right"))  # rows with n >= k
        idx = base[:m] + k
        du = u[idx] - u[idx - 1]
        s = st[:m]
        p_corrupt = -_libm.expm1(-mu[:m] * (u_pow[idx] - u_pow[idx - 1]))
        p_find = -_libm.expm1(-lam[:m] * (u_late[idx] - u_late[idx - 1])
                           * np.where(s == _LOST, _RECOVER, 1.0))
        Uk = U[idx]
        new = np.where(s == _HELD, np.where(Uk < p_corrupt, _LOST, _HELD),
                       np.where(Uk < p_find, _HELD, s)).astype(np.int8)
        st[:m] = new
        c = conf[:m]
        conf[:m] = c + ((new == _HELD) - c) * -_libm.expm1(-_CONF_RATE * du)
        state[idx] = new
        confs[idx] = conf[:m]
    return state, confs


class _Rows(NamedTuple):
    """The (model, question, trajectory) rows and their per-row parameters."""

    row_m: np.ndarray    # int64[T] model index
    row_q: np.ndarray    # int64[T] question index
    row_s: np.ndarray    # int64[T] trajectory index within its (model, question)
    mq: np.ndarray       # int64[T] flat (model, question) index
    gi: np.ndarray       # int64[T] group index
    G: dict              # group parameter -> float64[T]
    Mp: dict             # model parameter -> float64[T]
    d: np.ndarray        # float64[T] question difficulty
    n_mq: int            # number of (model, question) pairs, M * Q


class _Latents(NamedTuple):
    """Per-trajectory latent draws of the generative model (module docstring)."""

    z0: np.ndarray       # zero-step logit
    p0: np.ndarray       # zero-step accuracy
    len_mq: np.ndarray   # shared length effect of the (model, question)
    e: np.ndarray        # trajectory ability noise
    lam: np.ndarray      # solve hazard
    mu: np.ndarray       # corruption rate
    h: np.ndarray        # held-answer logit
    lo: np.ndarray       # lost-answer logit
    base: np.ndarray     # margin baseline
    start: np.ndarray    # int8 initial answer state


class _Steps(NamedTuple):
    """Ragged positions 0..n of every trajectory (flat arrays of V entries)."""

    n: np.ndarray         # int64[T] steps
    finished: np.ndarray  # bool[T]
    off: np.ndarray       # int64[T + 1] row offsets
    row: np.ndarray       # int64[V] row of each entry
    step: np.ndarray      # bool[V] entry is a real step (k > 0)
    last: np.ndarray      # int64[T] entry of position n
    L: np.ndarray         # int64[V] cumulative thinking tokens
    u: np.ndarray         # float64[V] share of the trajectory's tokens
    src: np.ndarray       # int64[V] entry whose prefix each entry repeats


def simulate(scale: str = "small", seed: int = 0, field_signals: bool = False,
             peer_signals: bool = False) -> MeasurementSet:
    """Draw a synthetic STP measurement set (the module docstring has the model).

    Args:
      scale: ``"tiny"`` (tests), ``"small"`` or ``"paper"`` (92,448 trajectories).
      seed: non-negative integer; the same seed gives a bit-identical set.
      field_signals: also draw the synthetic ``answer``, ``answer_conf``,
        ``hesitation`` and ``answer_tokens`` signals (`add_field_signals`,
        a stream of their own: the other arrays do not change).
      peer_signals: also draw the synthetic signals of Dynasor-CoT's and
        DEER's own probes (``dynasor_*``, ``deer_*``; `add_peer_signals`,
        another stream of their own: every other array, the field signals
        included, stays bit-identical).

    Returns:
      A validated `MeasurementSet` with ``synthetic=True``, a float64
      per-position signal ``"margin"`` and unassigned splits.
    """
    scale, seed = _simulate_iv(scale, seed)
    sc = SCALE_SIZES[scale]
    rng = np.random.default_rng(seed)
    # The phases draw from one stream in a fixed order; reordering them changes every set.
    q_group, q_id, q_dataset, diff, q_text = _questions(scale, rng)
    rows = _rows(sc, rng, q_group, diff)
    lat = _latents(rows, rng)
    st = _steps(sc, rng, rows, lat)
    C, y, conf = _answers(sc, rng, rows, lat, st)
    margin = _margin(rng, lat, st, conf)

    # The draws are already ragged, so they go straight to the one validation
    # path (`from_dense` would only unpad a padded copy first); every SPEC §2
    # rule is checked exactly as for data read from disk.
    models = [MODELS[m].name for m in sc.models]
    T = rows.row_m.size
    ms = from_ragged(
        model=[models[m] for m in rows.row_m.tolist()],
        group=[GROUPS[g].name for g in rows.gi.tolist()],
        question=[q_id[q] for q in rows.row_q.tolist()],
        trajectory=rows.row_s, probes=np.full(T, sc.probes), n=st.n,
        L=(st.L, st.off), C=(C, st.off), y=y, finished=st.finished,
        dataset=[q_dataset[q] for q in rows.row_q.tolist()],
        question_text=[q_text[q] for q in rows.row_q.tolist()],
        signals={"margin": (margin, st.off)},
        synthetic=True,
        provenance={
            "generator": GENERATOR, "scale": scale, "seed": seed,
            "synthetic": "SYNTHETIC data from a calibrated simulator; no model was run",
            "rng": "numpy.random.default_rng(seed) (PCG64), draws in a fixed order",
            "parameters": _parameters(scale),
        },
    )
    ms = add_field_signals(ms, seed) if field_signals else ms
    return add_peer_signals(ms, seed) if peer_signals else ms


def _rows(sc, rng, q_group, diff) -> _Rows:
    """Rows (model, question, trajectory): R per (model, question) drawn from the scale's range."""
    Q, M = q_group.size, len(sc.models)
    lo_r, hi_r = sc.trajectories
    R = rng.integers(lo_r, hi_r + 1, size=(M, Q))
    if lo_r < hi_r and np.all(R == R.flat[0]):
        R[0, 0] = lo_r if R[0, 0] == hi_r else hi_r  # the scale promises unequal R
    mq = np.repeat(np.arange(M * Q), R.ravel())      # flat (model, question) of each row
    row_m, row_q = mq // Q, mq % Q
    row_s = np.arange(mq.size) - np.concatenate([[0], np.cumsum(R.ravel())[:-1]])[mq]
    gi = q_group[row_q]
    G = {f.name: np.array([getattr(g, f.name) for g in GROUPS])[gi]
         for f in dataclasses.fields(Group) if f.type is float}
    Mp = {f.name: np.array([getattr(MODELS[m], f.name) for m in sc.models])[row_m]
          for f in dataclasses.fields(Model) if f.type is float}
    return _Rows(row_m, row_q, row_s, mq, gi, G, Mp, diff[row_q], M * Q)


def _latents(rows: _Rows, rng) -> _Latents:
    """Latents per (model, question) and per trajectory."""
    G, Mp, d, mq = rows.G, rows.Mp, rows.d, rows.mq
    T = mq.size
    z0 = (Mp["skill"] + Mp["zero"] + G["zero"] - d
          + _ZERO_SD * rng.standard_normal(rows.n_mq)[mq])
    p0 = _sigmoid(z0)
    len_mq = rng.standard_normal(rows.n_mq)[mq]
    e = 0.8 * rng.standard_normal(T)
    pi = _sigmoid(Mp["skill"] + G["solve"] - d + e)
    lam = -_libm.log1p(-np.minimum(pi, 1.0 - 1e-12))
    mu = G["corrupt"] * Mp["overthink"] * _libm.exp(0.7 * rng.standard_normal(T))
    h = G["hi"] + 0.5 * Mp["skill"] - 0.3 * d + 0.5 * rng.standard_normal(T)
    lo = G["lo"] + 0.3 * Mp["skill"] + 0.5 * rng.standard_normal(T)
    base = _MARGIN["base"] + _MARGIN["base_sd"] * rng.standard_normal(T)
    start = np.where(rng.random(T) < p0 ** 2, _HELD, _UNDECIDED).astype(np.int8)
    return _Latents(z0, p0, len_mq, e, lam, mu, h, lo, base, start)


def _steps(sc, rng, rows: _Rows, lat: _Latents) -> _Steps:
    """Thinking lengths, the thinking limit, step counts and step lengths (docs/rules.md)."""
    G, Mp, d = rows.G, rows.Mp, rows.d
    T = d.size
    log_len = (_libm.log(G["tokens"]) + Mp["length"] + G["len_diff"] * d + 0.2 * lat.len_mq
               + G["len_sd"] * rng.standard_normal(T) - 0.3 * lat.e)
    L_raw = np.rint(_libm.exp(log_len))
    empty = rng.random(T) < _EMPTY_RATE
    if sc.force_edges:
        pick = rng.choice(T, size=2, replace=False)
        empty[pick[0]], empty[pick[1]] = True, False
        L_raw[pick[1]] = THINKING_LIMIT + 1000.0
    L_raw[empty] = 0.0
    finished = L_raw < THINKING_LIMIT
    L_end = np.minimum(L_raw, THINKING_LIMIT).astype(np.int64)
    n = np.where(L_end > 0, np.maximum(1, (L_end + STEP_TOKENS // 2) // STEP_TOKENS), 0)
    few = (rng.random(T) < G["few_blocks"]) & (n > 1)
    shrink = rng.uniform(0.3, 1.0, size=T)
    n = np.where(few, np.maximum(1, np.floor(n * shrink)).astype(np.int64), n)

    # Flat layout: row t owns entries off[t] .. off[t] + n[t] (positions 0..n).
    off = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(n + 1, out=off[1:])
    V = int(off[-1])
    row = np.repeat(np.arange(T), n + 1)
    k = np.arange(V) - off[row]
    step = k > 0
    w = np.zeros(V)
    w[step] = rng.gamma(_STEP_SHAPE, 1.0, size=V - T)
    w[step & (rng.random(V) < _ZERO_STEP_RATE)] = 0.0
    last = off[1:] - 1
    w_sum = np.add.reduceat(w, off[:-1]) if T else np.zeros(0)
    dead = (w_sum == 0) & (n > 0)  # every step came out empty: keep one real step
    w[last[dead]] = 1.0
    cw = np.cumsum(w)
    cw = cw - cw[off[:-1]][row]    # per-row cumulative weight, 0 at k = 0
    L = np.rint(cw / np.maximum(cw[last], 1e-300)[row] * L_end[row]).astype(np.int64)
    u = np.where(L_end[row] > 0, L / np.maximum(L_end, 1)[row], 0.0)
    # Entry whose prefix each entry repeats (itself unless its step is empty).
    moved = ~step
    moved[1:] |= L[1:] > L[:-1]
    src = np.maximum.accumulate(np.where(moved, np.arange(V), 0))
    return _Steps(n, finished, off, row, step, last, L, u, src)


def _answers(sc, rng, rows: _Rows, lat: _Latents, st: _Steps):
    """Answer state along each trajectory, correct-probe counts C and the original answer y."""
    G, Mp, row = rows.G, rows.Mp, st.row
    V, T = row.size, st.n.size
    state, conf = _chain(st.n, st.off, st.u, lat.start, lat.lam, Mp["lateness"] * G["lateness"],
                         lat.mu, rng.random(V))
    jitter = (G["jitter"][row] * rng.standard_normal(V))[st.src]
    level = np.select([state == _HELD, state == _LOST], [lat.h[row], lat.lo[row]], lat.z0[row])
    p = np.where(st.step, _sigmoid(level + jitter), lat.p0[row])
    C = rng.binomial(sc.probes, p)
    p_end = p[st.last]
    y = (rng.random(T) < p_end * np.where(st.finished, 1.0, _CAPPED_Y)).astype(np.int8)
    return C, y, conf


def _margin(rng, lat: _Latents, st: _Steps, conf: np.ndarray) -> np.ndarray:
    """The ThinkBrake-style margin signal at every position (docs/rules.md)."""
    row, src, last = st.row, st.src, st.last
    V, T = row.size, st.n.size
    noise = _MARGIN["noise"] * rng.standard_normal(V)[src]
    margin = (lat.base[row] + _MARGIN["unconfident"] * (1.0 - conf)
              + _MARGIN["remaining"] * (1.0 - st.u) + noise)
    end_margin = _MARGIN["end"] + _MARGIN["end_sd"] * rng.standard_normal(T)
    at_end = st.finished[row] & (src == src[last][row])  # the prefix the model ended on
    return np.where(at_end, end_margin[row], margin)
