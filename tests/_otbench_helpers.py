"""Shared pieces of the OTBench tests: random sets, a plain exact oracle with backtracking, twins.

Everything here is written straight from the SPEC §5 / §6 definitions with
Python loops and `Fraction`s, independently of `otbench.analysis`.
"""

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st
from otbench.analysis import from_ragged, ragged
from otbench.analysis.measurement._types import SPLITS


def build(trajs, splits=None, synthetic=True):
    """A set from [(model, group, question, trajectory, probes, L, C, margin)] tuples.

    `splits`: {(group, question): split name}.
    """
    cols = list(zip(*trajs))
    sp = None if splits is None else [splits[(g, q)] for g, q in zip(cols[1], cols[2])]
    return from_ragged(model=list(cols[0]), group=list(cols[1]), question=list(cols[2]),
                       trajectory=np.asarray(cols[3]), probes=np.asarray(cols[4]),
                       L=ragged(list(cols[5]), np.int64), C=ragged(list(cols[6]), np.int64),
                       y=np.zeros(len(trajs), dtype=np.int64), split=sp,
                       question_text=[f"text of {q} in {g}" for g, q in zip(cols[1], cols[2])],
                       signals={"margin": ragged(list(cols[7]), np.float64)},
                       synthetic=synthetic)


@st.composite
def bench_sets(draw, max_models=2, max_groups=2, max_q=3, max_r=3, max_n=5, max_p=3):
    """Ragged sets with SPEC §2 edge cases (ties, flat curves, zero-length steps,
    n = 0, one-trajectory questions, unequal R and P), a margin signal with
    ties, and a random question split with a non-empty train and test split."""
    trajs = []
    splits = {}
    groups = draw(st.integers(1, max_groups))
    qs = [draw(st.integers(1, max_q)) for _ in range(groups)]
    for g in range(groups):
        for q in range(qs[g]):
            splits[(f"g{g}", f"q{q}")] = draw(st.sampled_from(SPLITS))
    keys = sorted(splits)
    splits[keys[0]] = "test"
    if len(keys) > 1:
        splits[keys[-1]] = "train"
    for m in range(draw(st.integers(1, max_models))):
        for g in range(groups):
            for q in range(qs[g]):
                p = draw(st.integers(1, max_p))
                for s in range(draw(st.integers(1, max_r))):
                    n = draw(st.integers(0, max_n))
                    steps = draw(st.lists(st.sampled_from([0, 1, 2, 5]), min_size=n, max_size=n))
                    L = np.r_[0, np.cumsum(steps, dtype=np.int64)].tolist()
                    if draw(st.booleans()):
                        C = [draw(st.integers(0, p))] * (n + 1)          # flat curve
                    else:
                        C = draw(st.lists(st.integers(0, p), min_size=n + 1, max_size=n + 1))
                    M = draw(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 2.0]),
                                      min_size=n + 1, max_size=n + 1))
                    trajs.append((f"m{m}", f"g{g}", f"q{q}", s, p, L, C, M))
    return build(trajs, splits)


# -- a plain exact oracle (SPEC §5) with backtracking ------------------------------------

def cell_units(ms, rows, strategy):
    """Units of one cell's rows: lists of (cost, reward, decision) actions.

    Decisions: DR True/False (think), FB the cap, DEE the position. Unit keys
    identify the unit: question index (DR, FB) or row (DEE).
    """
    by_q = {}
    for t in rows:
        by_q.setdefault(int(ms.question[t]), []).append(int(t))
    units, keys = [], []
    for q, ts in sorted(by_q.items()):
        Ls = [ms.L[t, :ms.n[t] + 1].tolist() for t in ts]
        Cs = [ms.C[t, :ms.n[t] + 1].tolist() for t in ts]
        if strategy == "dee":
            for t, L, C in zip(ts, Ls, Cs):
                units.append([(L[k], C[k], k) for k in range(len(L))])
                keys.append(t)
            continue
        if strategy == "dr":
            zero = sum(C[max(k for k in range(len(L)) if L[k] == 0)] for L, C in zip(Ls, Cs))
            units.append([(0, zero, False), (sum(L[-1] for L in Ls), sum(C[-1] for C in Cs), True)])
        else:
            acts = []
            for cap in sorted({x for L in Ls for x in L}):
                pos = [max(k for k in range(len(L)) if L[k] <= cap) for L in Ls]
                acts.append((sum(L[k] for k, L in zip(pos, Ls)),
                             sum(C[k] for k, C in zip(pos, Cs)), cap))
            units.append(acts)
        keys.append(q)
    return units, keys


def oracle(units):
    """{total reward: (min total cost, decisions per unit)}; ties keep the first found."""
    states = {0: (0, ())}
    for acts in units:
        new = {}
        for r, (c, dec) in states.items():
            for cost, rew, d in acts:
                r2, c2 = r + rew, c + cost
                if r2 not in new or c2 < new[r2][0]:
                    new[r2] = (c2, dec + (d,))
        states = new
    return states


def best_under(states, budget):
    """(reward, cost, decisions) of the largest reward whose minimum cost is <= budget."""
    r = max(r for r, (c, _) in states.items() if c <= budget)
    return r, states[r][0], states[r][1]


# -- evaluator twin ---------------------------------------------------------------------

def weights_twin(cells_model):
    """Equal-weight chain as nested means: [cell] weight Fractions."""
    models = sorted(set(cells_model))
    return [Fraction(1, len(models)) * Fraction(1, cells_model.count(m)) for m in cells_model]


def nondominated_twin(cost, acc):
    out = []
    for i in range(len(cost)):
        dominated = any(
            (cost[j] <= cost[i] and acc[j] >= acc[i] and (cost[j] < cost[i] or acc[j] > acc[i]))
            or (j < i and cost[j] == cost[i] and acc[j] == acc[i])
            for j in range(len(cost)))
        out.append(not dominated)
    return out
