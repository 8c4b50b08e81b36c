"""DeepConf's signal replayed from its source's control flow (issue 42).

Twins, restated in plain Python from facebookresearch/deepconf at commit 675529d:

* `_processor_stop`: ``ConfPerReqLogitsProcessor.__call__`` (processors.py
  lines 36-55): a ``deque(maxlen=conf_group_size)`` of token confidences, a
  running sum, and the forced end of sequence at the first token where the
  deque is full and the mean is below the threshold;
* `_least_grouped`: ``compute_least_grouped`` (utils.py lines 53-62) without
  its rounding, and ``min_conf = min(...)`` (line 301);
* `_compute_conf`: ``compute_conf`` (processors.py lines 29-34) on a logits
  row: softmax, top-k, log, ``-sum / k``.
"""

import math
from collections import deque

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st


def _processor_stop(confs, threshold, group):
    q, grouped = deque(maxlen=group), 0.0
    for t, c in enumerate(confs, start=1):
        if len(q) < group:
            q.append(c)
            grouped += c
        else:
            grouped -= q.popleft()
            q.append(c)
            grouped += c
        if len(q) >= group and grouped / len(q) < threshold:
            return t
    return None


def _least_grouped(confs, group):
    if len(confs) < group:
        return [sum(confs) / len(confs)] if confs else [0]
    return [sum(confs[i:i + group]) / group for i in range(len(confs) - group + 1)]


def _compute_conf(logits, k):
    p = np.exp(logits - logits.max())
    p = p / p.sum()
    top = np.sort(p)[::-1][:k]
    return float(-np.log(top).sum() / k)


confs_st = st.lists(st.floats(0.0, 30.0, allow_nan=False, width=32), max_size=40)


def _grid(n_tokens, cuts):
    """A non-decreasing position grid 0 = L(0) <= ... <= n_tokens, zero-length steps allowed."""
    L = sorted({0, n_tokens, *[min(c, n_tokens) for c in cuts]})
    return L + [L[-1]] * (cuts[0] % 2 if cuts else 0)      # a repeated last position (empty step)


@given(confs_st, st.integers(1, 8), st.lists(st.integers(0, 40), max_size=6))
def test_min_confs_equal_the_source_twin_at_every_position(confs, window, cuts):
    from otbench.probe.grading import deepconf_min_confs

    L = _grid(len(confs), cuts)
    got = deepconf_min_confs(confs, L, window)
    assert len(got) == len(L)
    for k, Lk in enumerate(L):
        want = min(_least_grouped(confs[:Lk], window))
        assert math.isclose(got[k], want, rel_tol=1e-9, abs_tol=1e-9), (k, Lk)


@given(confs_st, st.integers(1, 8), st.floats(0.0, 30.0, allow_nan=False))
def test_stop_token_is_the_processors(confs, window, threshold):
    from otbench.probe.grading import deepconf_stop_token

    assert deepconf_stop_token(confs, threshold, window) == _processor_stop(confs, threshold, window)


@given(confs_st, st.integers(1, 8), st.floats(0.0, 30.0, allow_nan=False),
       st.lists(st.integers(0, 40), max_size=6))
def test_the_boundary_rule_stops_in_the_step_the_processor_ends(confs, window, threshold, cuts):
    """OTBench's restated rule at boundaries: the first `k` where `deepconf_stop` holds is the
    first boundary at or after the processor's token (never before it: no look-ahead)."""
    from otbench.analysis.measurement import deepconf_stop
    from otbench.probe.grading import deepconf_min_confs

    L = _grid(len(confs), cuts)
    low = deepconf_min_confs(confs, L, window)
    stops = [bool(deepconf_stop(np.array([low[k]]), np.array([L[k]]), threshold, window)[0])
             for k in range(len(L))]
    t = _processor_stop(confs, threshold, window)
    first = stops.index(True) if any(stops) else None
    if t is None:
        assert first is None
    else:
        assert first is not None and L[first] >= t and (first == 0 or L[first - 1] < t)
        # once a window went below, it stays below (the lowest group confidence only falls)
        assert all(stops[first:])


def test_pinned_cases():
    from otbench.probe.grading import deepconf_min_confs, deepconf_stop_token

    # n = 0: no token -> 0 (utils.py returns [0] for no confidences)
    assert deepconf_min_confs([], [0], 2048) == (0.0,)
    # shorter than the window: the mean of all; the processor never stops
    assert deepconf_min_confs([1.0, 3.0], [0, 1, 2], 4) == (0.0, 1.0, 2.0)
    assert deepconf_stop_token([0.0] * 3, 100.0, 4) is None
    # the window fills at token 3; the mean (1+2+0)/3 = 1 is not < 1 (strict), the next is
    assert deepconf_stop_token([1.0, 2.0, 0.0, 0.5], 1.0, 3) == 4
    assert deepconf_min_confs([1.0, 2.0, 0.0, 0.5], [0, 2, 4], 3) == (0.0, 1.5, 2.5 / 3)
    # a flat curve: equal to the threshold never stops
    assert deepconf_stop_token([5.0] * 10, 5.0, 2) is None
    with pytest.raises(ValueError, match="in order"):
        deepconf_min_confs([1.0, 2.0], [0, 2, 1], 2)


def test_token_confidence_is_compute_conf_on_the_engines_top_mean():
    """An engine returns the mean of the top-k raw log-probabilities (`Completion.top_mean`);
    DeepConf's confidence is its negation, equal to compute_conf on the same logits."""
    from otbench.probe.grading import token_confidence

    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = rng.normal(0, 3, size=64)
        logp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
        top_mean = np.sort(logp)[::-1][:20].mean()
        assert math.isclose(token_confidence([top_mean])[0], _compute_conf(logits, 20), rel_tol=1e-9)


def test_vllm_top_means_read_both_logprob_forms():
    """`_top_means` on what vLLM 0.32 builds (`append_logprobs_for_next_position`): the flat form
    keeps the sampled entry then the top k; the dict form merges a sampled token inside the top k."""
    logprobs = pytest.importorskip("vllm.logprobs")
    from otbench.probe.engines._vllm import _top_means

    rng = np.random.default_rng(1)
    k, rows = 20, []
    flat, dicts = logprobs.FlatLogprobs(), []
    for pos in range(6):
        lp = np.sort(rng.normal(-5, 2, size=40))[::-1]
        lp = np.minimum(lp, 0.0)
        ids = rng.permutation(1000)[:40]
        sampled = 3 if pos % 2 else 30             # inside the top k, then outside it
        tok = [int(ids[sampled]), *map(int, ids[:k])]
        vals = [float(lp[sampled]), *map(float, lp[:k])]
        for target in (flat, dicts):
            logprobs.append_logprobs_for_next_position(target, tok, vals, [None] * (k + 1),
                                                       sampled + 1, k)
        rows.append(float(np.mean(lp[:k])))
    for form in (flat, dicts):
        got = _top_means(form, 6, k)
        assert np.allclose(got, rows, rtol=0, atol=1e-12)
    with pytest.raises(RuntimeError, match="positions of log-probabilities"):
        _top_means(flat, 7, k)


def test_openai_top_means():
    from otbench.probe.engines._openai_wire import ServerError, completions

    choice = {"token_ids": [5, 6], "finish_reason": "length",
              "logprobs": {"top_logprobs": [{"token_id:1": -0.1, "token_id:2": -2.0, "token_id:9": -9.0},
                                            {"token_id:1": -1.0, "token_id:3": -1.0}]}}
    c = completions([choice], set(), set(), "server", top_logprobs=2)[0]
    assert c.top_mean == (-1.05, -1.0)
    bad = {**choice, "logprobs": {"top_logprobs": [{"token_id:1": -0.1}, {"token_id:1": 0.5, "token_id:2": -1}]}}
    with pytest.raises(ServerError, match="top log-probabilities"):
        completions([bad], set(), set(), "server", top_logprobs=2)


def test_transformers_engine_top_mean_is_the_raw_top_k(hf_engine):
    """The transformers engine's `top_mean` equals the top-20 mean of the raw log-softmax read on
    the same context (`position_logits` where the engine has it, else a fresh forward pass), and
    asking for it changes no sampled token."""
    import torch

    from otbench.probe.config import Sampling
    from otbench.probe.engines import GenRequest

    prompt = [1, 2, 3, 4, 5]
    plain = hf_engine.generate([GenRequest(prompt, 1, 7, 6, ())], Sampling(temperature=0.8))[0][0]
    c = hf_engine.generate([GenRequest(prompt, 1, 7, 6, (), top_logprobs=20)], Sampling(temperature=0.8))[0][0]
    assert c.token_ids == plain.token_ids and plain.top_mean is None
    assert len(c.top_mean) == len(c.token_ids)
    model = hf_engine._model
    ids = torch.tensor([prompt + list(c.token_ids)])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    for i in range(len(c.token_ids)):
        row = torch.log_softmax(logits[len(prompt) - 1 + i], dim=-1)
        want = float(torch.topk(row, 20).values.mean())
        assert math.isclose(c.top_mean[i], want, rel_tol=1e-5, abs_tol=1e-5)


def test_vllm_sampled_logprobs_gathered_at_once_equal_the_per_position_reading():
    """`VLLMEngine._sampled` reads the flat form with one gather; against the dict form read position
    by position, bit for bit, including positions whose first entry is not the sampled token."""
    logprobs = pytest.importorskip("vllm.logprobs")
    from otbench.probe.engines._vllm import VLLMEngine

    rng = np.random.default_rng(7)
    flat, dicts, ids = logprobs.FlatLogprobs(), [], []
    for pos in range(50):
        k = 0 if pos % 5 else 3
        toks = [int(t) for t in rng.permutation(500)[:k + 1]]
        vals = [float(v) for v in -np.abs(rng.normal(0, 3, size=k + 1))]
        for target in (flat, dicts):
            logprobs.append_logprobs_for_next_position(target, toks, vals, [None] * (k + 1), 1, k)
        # every fifth position lists the sampled id second, behind another: read by its id
        ids.append(toks[1] if k and pos % 10 == 5 else toks[0])
    want = tuple(float(d[t].logprob) for d, t in zip(dicts, ids))
    got = VLLMEngine._sampled(flat, ids)
    assert got == want == VLLMEngine._sampled(dicts, ids)
    assert got[5] != float(flat.logprobs[flat.start_indices[5]])      # the looked-up case happened
    assert VLLMEngine._sampled(flat, ids[:10]) == want[:10]
    assert VLLMEngine._sampled(flat, []) == ()


# --- the warm-up value (utils.py compute_confidence, compute_least_grouped, process_output) ---

def _source_warmup(token_dicts, window):
    """utils.py lines 41-62 and 288-301 in plain Python: `token_dicts` per output token a dict
    {id: logprob} as vLLM returns it; np.mean of its values, round(-mean, 3) on a NumPy float (so
    NumPy's rounding), the sliding means of `window`, each round(sum / len, 3), or the plain mean."""
    confs = [round(-np.mean(list(d.values())), 3) for d in token_dicts if d]
    if not confs:
        return 0
    if len(confs) < window:
        groups = [sum(confs) / len(confs)]
    else:
        groups = [round(sum(confs[i:i + window]) / window, 3) for i in range(len(confs) - window + 1)]
    return min(groups)


@given(st.lists(st.floats(-12.0, 0.0, allow_nan=False), min_size=0, max_size=60),
       st.integers(1, 12), st.integers(0, 2 ** 31 - 1))
def test_warmup_min_conf_equals_the_source_twin(means, window, seed):
    """`warmup_confidence` + `warmup_min_conf` on the per-token means of every returned value give
    the source's `min_conf` bit for bit (dicts of one value each carry the mean itself)."""
    from otbench.probe.grading import warmup_confidence, warmup_min_conf

    got = warmup_min_conf(warmup_confidence(means), window)
    want = _source_warmup([{0: m} for m in means], window)
    assert got == float(want)


def test_warmup_pinned_cases():
    from otbench.probe.grading import warmup_confidence, warmup_min_conf

    # NumPy rounds 2.0005 (stored a hair below) and 0.0125 the way np.round does
    assert warmup_confidence([-2.0005, -0.0125, -1.0]) == [float(np.round(2.0005, 3)), 0.012, 1.0]
    assert warmup_min_conf([], 4) == 0.0
    assert warmup_min_conf([1.0, 3.0], 4) == 2.0                       # short: the unrounded mean
    assert warmup_min_conf([1.0, 1.0, 1.0, 4.0], 3) == 1.0              # windows 1.0 and 2.0
    assert warmup_min_conf([0.1, 0.2, 0.4], 2) == 0.15                  # round(0.15000000000000002, 3)
    with pytest.raises(Exception, match="at least one token"):
        warmup_min_conf([1.0], 0)


def test_vllm_returned_means_read_both_prompt_logprob_forms():
    """`_returned_means` on what vLLM 0.32 builds for prompt log-probabilities: the token's own entry
    first, then the top k; counted once when it is among them (the dict form merges it), so the
    mean is over k or k + 1 values -- the values DeepConf's compute_confidence averages."""
    logprobs = pytest.importorskip("vllm.logprobs")
    from otbench.probe.engines._vllm_logprobs import _returned_means

    rng = np.random.default_rng(2)
    k, want = 20, []
    flat, dicts = logprobs.FlatLogprobs(), []
    for target in (flat, dicts):
        target.append(None)                        # the first prompt token: nothing predicts it
    for pos in range(6):
        lp = np.minimum(np.sort(rng.normal(-5, 2, size=40))[::-1], 0.0)
        ids = rng.permutation(1000)[:40]
        own = 3 if pos % 2 else 30                  # inside the top k, then outside it
        tok = [int(ids[own]), *map(int, ids[:k])]
        vals = [float(lp[own]), *map(float, lp[:k])]
        for target in (flat, dicts):
            logprobs.append_logprobs_for_next_position(target, tok, vals, [None] * (k + 1), own + 1, k)
        want.append(float(np.mean(vals[1:] if own < k else vals)))
    for form in (flat, dicts):
        got = _returned_means(form, 1, 6, k)
        assert np.allclose(got, want, rtol=0, atol=1e-12)
        assert _source_warmup([form[i] and {t: v.logprob for t, v in form[i].items()} for i in range(1, 7)], 4) \
            == pytest.approx(_source_warmup([{0: m} for m in got], 4), abs=1e-12)
    with pytest.raises(RuntimeError, match="positions of prompt"):
        _returned_means(flat, 1, 7, k)


def test_openai_prompt_returned_means():
    from otbench.probe.engines._openai_wire import prompt_returned_means, prompt_top_means

    choice = {"prompt_logprobs": [None, {"5": {"logprob": -0.5}, "1": {"logprob": -0.1}, "2": {"logprob": -0.2}},
                                  {"1": {"logprob": -0.1}, "2": {"logprob": -0.3}}]}
    assert prompt_top_means(choice, 3, 2, "server") == pytest.approx((-0.15, -0.2))
    assert prompt_returned_means(choice, 3, "server") == pytest.approx((-0.8 / 3, -0.2))


def test_transformers_engine_prompt_returned_mean(hf_engine):
    """The transformers engine's `prompt_returned_mean`: per prompt token the mean of its own raw
    log-probability and the 20 largest, counted once (a plain NumPy reading of the same logits)."""
    import torch

    from otbench.probe.stp._field_probes import GREEDY, confidence_request

    prompt, output = [1, 2, 3, 4, 5], [9, 17, 3, 250, 8, 8]
    for _ in range(3):                   # three greedy tokens (inside the top 20), then the others
        with torch.inference_mode():
            last = hf_engine._model(input_ids=torch.tensor([prompt])).logits[0, -1]
        prompt = prompt + [int(torch.argmax(last))]
    prompt, output = prompt[:5], prompt[5:] + output
    c = hf_engine.generate([confidence_request(prompt, output)], GREEDY)[0][0]
    ids = prompt + output
    assert len(c.prompt_returned_mean) == len(c.prompt_top_mean) == len(ids) - 1
    with torch.inference_mode():
        lp = torch.log_softmax(hf_engine._model(input_ids=torch.tensor([ids])).logits[0].float(), -1).numpy()
    inside = 0
    for i in range(1, len(ids)):
        row = lp[i - 1].astype(np.float64)
        top = list(np.argsort(-row, kind="stable")[:20])
        inside += ids[i] in top
        vals = [row[ids[i]]] + [row[j] for j in top if j != ids[i]]
        assert math.isclose(c.prompt_returned_mean[i - 1], float(np.mean(vals)), abs_tol=1e-5)
        assert math.isclose(c.prompt_top_mean[i - 1], float(np.mean(row[top])), abs_tol=1e-5)
    assert 0 < inside < len(ids) - 1                  # both cases met
