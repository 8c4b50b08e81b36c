"""The Model Runner V2 processor makes the V1 processor's decisions (CPU torch stand-ins, no GPU).

vLLM's V2 runner needs Triton, so it cannot run here: these tests build its
per-step inputs by hand -- the real `LogitsProcRequestState` / `LogitsContext`
dataclasses over CPU tensors laid out as `RequestState` keeps them (tokens
per slot up to ``total_len``, slots from a free list, rows reordered every
step, prefill chunks whose sample is dropped) -- and compare, request by
request, with `ExitProcessorV1` run alone on the same token stream and
the same logits.
"""

import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from _toy_tables import BOUNDARY, END, EOS, NL_END, NL_START, PREFIX, SEP, STOP, V, toy_tables
from otbench.probe.online import OnlineControlError, request_args

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
v2 = pytest.importorskip("vllm.v1.worker.gpu.sample.logits_processor")

from otbench.probe.online import PROCESSOR, ExitProcessor, ExitProcessorV1, ExitProcessorV2
from vllm.v1.sample.logits_processor import BatchUpdate

M = 96                     # max_model_len of the stand-in token buffer




def _config():
    mc = types.SimpleNamespace(tokenizer="unused", get_vocab_size=lambda: V,
                               hf_config=types.SimpleNamespace(eos_token_id=EOS))
    return types.SimpleNamespace(speculative_config=None, model_config=mc)


class _Buf:
    """A `StagedWriteTensor` / `UvaBackedTensor` stand-in: `.gpu` (here CPU) and `.np` views."""

    def __init__(self, shape, forbid=False):
        self.cpu = torch.zeros(shape, dtype=torch.int32)
        self.np = self.cpu.numpy()
        self.forbid = forbid
        self.reads = 0

    @property
    def gpu(self):
        if self.forbid:
            raise AssertionError("device buffer read with no live control in the batch")
        self.reads += 1
        return self.cpu


def _req_states(slots: int, forbid=False):
    return v2.LogitsProcRequestState(device=torch.device("cpu"), max_num_reqs=slots, vocab_size=V,
                                     all_token_ids=_Buf((slots, M), forbid), prompt_len=_Buf(slots),
                                     prefill_len=_Buf(slots), total_len=_Buf(slots, forbid))


def _with_tables(proc, span):
    impl = getattr(proc, "_impl", proc)
    impl._tables_for = lambda family, boundary: toy_tables(span)
    return proc


def _row(seed: int, req: int, length: int) -> torch.Tensor:
    """The model's logits for request `req` about to sample its output token `length` (deterministic)."""
    g = np.random.default_rng([seed, req, length])
    x = g.normal(size=V).astype(np.float32)
    x[STOP] += np.float32(g.uniform(-2.0, 3.0))
    if g.random() < 0.2:                          # a tie with the signal at the top
        x[int(g.integers(0, V))] = x[STOP] = x.max()
    return torch.from_numpy(x)


def _sample(row: torch.Tensor, script, length):
    fin = torch.isfinite(row).nonzero().view(-1)
    if fin.numel() == 1:
        return int(fin[0])
    return int(script[length]) if length < len(script) else 0


class _Req(types.SimpleNamespace):
    pass


def _run_v1(seed, r, req, row=None):
    row = row or _row
    proc = _with_tables(ExitProcessorV1(_config(), torch.device("cpu"), False), req.span)
    out: list[int] = []
    params = types.SimpleNamespace(extra_args=req.args)
    proc.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, params, list(req.prompt), out)],
                                  moved=[]))
    chunks = req.chunks
    while len(out) < req.n_out:
        logits = row(seed, r, len(out))[None].clone()
        logits = proc.apply(logits)           # under V1 before vLLM's penalties: the raw row
        tok = _sample(logits[0], req.script, len(out))
        if chunks:
            chunks -= 1                           # a prefill chunk: its sample is dropped
        else:
            out.append(tok)
        proc.update_state(None)
    ctl = proc._req.get(0)
    if ctl is not None:
        ctl.step()                                # fold in the last token, as a next step would
    return out, ctl


def _penalize(logits, prompts, outputs, pens):
    """vLLM's own penalty function on the batch (V1's, the arithmetic of V2's kernel, `undo_penalties`)."""
    from vllm.model_executor.layers.utils import apply_penalties

    def pad(seqs):
        w = max(1, max(len(q) for q in seqs))
        return torch.tensor([list(q) + [V] * (w - len(q)) for q in seqs], dtype=torch.long)

    pp = torch.tensor([p.get("presence_penalty", 0.0) for p in pens], dtype=torch.float32)
    fp = torch.tensor([p.get("frequency_penalty", 0.0) for p in pens], dtype=torch.float32)
    return apply_penalties(logits, pad(prompts), pad(outputs), pp, fp, torch.ones(len(pens)))


def _run_v2(seed, reqs, slots, order_seed, make=ExitProcessorV2, row=None):
    """All of `reqs` through one V2 processor, `slots` at a time, rows shuffled each step.

    A request's `pen` (presence/frequency penalties) reaches the processor in its sampling
    parameters and is applied to its row before the processor sees it, as V2's sampler does.
    """
    row = row or _row
    rs = _req_states(slots)
    proc = _with_tables(make(_config(), rs), reqs[0].span)
    rng = np.random.default_rng(order_seed)
    free = list(range(slots))
    pending = list(range(len(reqs)))
    active: dict[int, list] = {}               # slot -> [request number, chunks left]
    done: dict[int, tuple] = {}
    tokens = rs.all_token_ids.cpu
    total = rs.total_len.cpu
    while pending or active:
        while free and pending and (not active or rng.random() < 0.7):
            r = pending.pop(0)
            s = free.pop()                      # `RequestState.add_request`: free_indices.pop()
            req = reqs[r]
            p = len(req.prompt)
            tokens[s].fill_(-7)                 # stale tokens of the slot's last occupant stay
            tokens[s, :p] = torch.tensor(req.prompt, dtype=torch.int32)
            rs.prompt_len.np[s] = rs.prefill_len.np[s] = p
            total[s] = p
            proc.add_request(s, types.SimpleNamespace(extra_args=req.args, **getattr(req, "pen", {})))
            active[s] = [r, req.chunks]
        order = [int(x) for x in rng.permutation(sorted(active))]
        seq_ub = []
        rows = []
        for s in order:
            r, chunks = active[s]
            length = int(total[s]) - len(reqs[r].prompt)
            seq_ub.append(int(total[s]) - chunks if chunks else int(total[s]))
            rows.append(row(seed, r, length))
        logits = torch.stack(rows)
        if any(getattr(active_req, "pen", None) for active_req in (reqs[active[s][0]] for s in order)):
            reqs_b = [reqs[active[s][0]] for s in order]
            logits = _penalize(logits, [q.prompt for q in reqs_b],
                               [tokens[s, len(q.prompt):int(total[s])].tolist() for s, q in zip(order, reqs_b)],
                               [getattr(q, "pen", None) or {} for q in reqs_b])
        idx = torch.tensor(order, dtype=torch.int32)
        ctx = v2.LogitsContext(expanded_idx_mapping=idx, idx_mapping=idx,
                               idx_mapping_np=np.asarray(order, dtype=np.int32),
                               expanded_local_pos=torch.zeros(len(order), dtype=torch.int32),
                               input_ids=torch.zeros(len(order), dtype=torch.int32),
                               pos=torch.tensor(seq_ub, dtype=torch.int32) - 1,
                               seq_lens_upper_bound_np=np.asarray(seq_ub, dtype=np.int32))
        logits = proc.apply(logits, ctx)
        for b, s in enumerate(order):
            r, chunks = active[s]
            req = reqs[r]
            p = len(req.prompt)
            tok = _sample(logits[b], req.script, int(total[s]) - p)
            if chunks:
                active[s][1] -= 1
                continue
            tokens[s, int(total[s])] = tok      # `_post_update_kernel`
            total[s] += 1
            if int(total[s]) - p >= req.n_out:
                impl = getattr(proc, "_impl", proc)
                impl._drain()                   # the last step's lagged replay, as a next step would
                st_ = impl._slots.get(s)
                ctl = None if st_ is None else st_.ctl
                output = tokens[s, p:int(total[s])].tolist()
                if ctl is not None and not ctl.done:
                    # No remove hook: the processor never reads a finished request's last
                    # token; fold it in as a next step would (the V1 run does the same).
                    st_.out.extend(output[len(st_.out):])
                    ctl.step()
                done[r] = (output, ctl)
                del active[s]
                free.append(s)                  # `RequestState.remove_request`: no processor hook
    impl = getattr(proc, "_impl", proc)
    assert not impl._disagreed                  # the device's actions were the replayed control's
    return done, rs


def _summary(ctl):
    if ctl is None:
        return None
    return (ctl.summary(), [(L, {k: float(v) for k, v in sig.items()}, stop)
                            for L, sig, stop in getattr(ctl, "decisions", [])])


methods = st.sampled_from(["thinkbrake-onectx", "thinkbrake-lengths", "cap", "refused", None])
tokens = st.lists(st.sampled_from([0, 1, 2, BOUNDARY, NL_END, NL_START, STOP]), min_size=0, max_size=24)


@st.composite
def requests(draw, span):
    method = draw(methods)
    script = draw(tokens)
    prompt = draw(st.lists(st.sampled_from([1, 2, NL_END, BOUNDARY]), min_size=1, max_size=4))
    theta = draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0]))
    if method is None:
        args = None
    elif method == "refused":
        args = request_args("cap", 1, "f") | {"otbench_method": "no.such:Rule"}
    elif method == "cap":
        args = request_args("cap", draw(st.integers(0, 8)), "f")
    else:
        lengths = draw(st.lists(st.integers(0, 20), max_size=4)) if method.endswith("lengths") else None
        args = request_args("thinkbrake-onectx", theta, "f", boundary="vocab+span" if span else "vocab",
                            lengths=lengths)
    return _Req(args=args, script=script, prompt=prompt, span=span, n_out=len(script) + 5,
                chunks=draw(st.integers(0, 2)))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), span=st.booleans(), slots=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_v2_makes_the_v1_decisions_on_every_stream(data, span, slots, seed):
    reqs = data.draw(st.lists(requests(span), min_size=1, max_size=5))
    done, _ = _run_v2(seed, reqs, slots, seed + 1)
    assert sorted(done) == list(range(len(reqs)))
    for r, req in enumerate(reqs):
        out1, ctl1 = _run_v1(seed, r, req)
        out2, ctl2 = done[r]
        assert out2 == out1, r
        assert _summary(ctl2) == _summary(ctl1), r


def _row_high(seed, req, length):
    """`_row` moved up to [20, 60): where vLLM's penalty subtractions are exact (`undo_penalties`)."""
    return _row(seed, req, length) + 40.0


@settings(max_examples=40, deadline=None)
@given(data=st.data(), span=st.booleans(), slots=st.integers(1, 3), seed=st.integers(0, 2**31 - 1),
       pen=st.sampled_from([{"presence_penalty": 1.5}, {"presence_penalty": 1.5, "frequency_penalty": 0.5},
                            {"frequency_penalty": 0.25}]))
def test_v2_with_penalties_reads_the_offline_signal_bit_for_bit(data, span, slots, seed, pen):
    # The family's sampling (qwen3-thinking: presence_penalty = 1.5). V2 sees the rows after
    # vLLM's penalties; V1 (and the probe's recorded signal) the raw rows: same decisions,
    # same signals to the bit.
    reqs = data.draw(st.lists(requests(span), min_size=1, max_size=4))
    for q in reqs:
        q.pen = pen
    done, _ = _run_v2(seed, reqs, slots, seed + 1, row=_row_high)
    for r, req in enumerate(reqs):
        out1, ctl1 = _run_v1(seed, r, req, row=_row_high)
        assert done[r][0] == out1, r
        assert _summary(done[r][1]) == _summary(ctl1), r


def test_the_penalty_would_have_moved_the_signal_without_the_undo():
    # Guard for the test above: the penalised rows differ from the raw ones where it matters.
    args = request_args("thinkbrake-onectx", -1e9, "f")              # never stops: decides at every boundary
    script = [BOUNDARY, 0, BOUNDARY, 0, BOUNDARY, 0, BOUNDARY]
    req = _Req(args=args, script=script, prompt=[1], span=False, n_out=7, chunks=0,
               pen={"presence_penalty": 1.5})
    done, _ = _run_v2(2, [req], 1, 0, row=lambda s, r, L: _row_high(s, r, L).index_fill(0, torch.tensor([0]), 70.0))
    _, ctl1 = _run_v1(2, 0, req, row=lambda s, r, L: _row_high(s, r, L).index_fill(0, torch.tensor([0]), 70.0))
    got = [sig["margin"] for _, sig, _ in done[0][1].decisions]
    assert got == [sig["margin"] for _, sig, _ in ctl1.decisions] and len(got) == 4
    # At length 3 token 0 (the best other, logit 70) is in the output: vLLM lowers it by 1.5.
    from otbench.probe.online._processor._core import signal_values

    raw = _row_high(2, 0, 3).index_fill(0, torch.tensor([0]), 70.0)[None]
    pen = _penalize(raw.clone(), [[1]], [script[:3]], [{"presence_penalty": 1.5}])
    assert float(pen[0, 0]) == 70.0 - 1.5 and float(raw[0, 0]) == 70.0
    margin = lambda x: float(np.diff(signal_values(x, torch.tensor([STOP]))[0].double().numpy())[0])
    assert done[0][1].decisions[2][0] == 3
    assert got[2] == margin(raw) and abs(got[2] - margin(pen) - 1.5) < 1e-4


def _row_low_then_high(seed, req, length):
    """The signal far below the others at length 0 (no stop at θ = 10), far above after it
    (every later decision stops under θ >= -30)."""
    x = _row(seed, req, length).clone()
    x[STOP] = -40.0 if length == 0 else 40.0
    return x


@pytest.mark.parametrize("prompt,script,theta,row", [
    # A prompt ending with a line feed, an output starting with one: no span boundary at
    # length 1 (the span rule pairs output tokens only), so no stop there.
    ([1, NL_END], [NL_START, 0, 0, BOUNDARY, 0, 0, 0], 10.0, _row_low_then_high),
    # The thinking end in the prompt (an earlier turn) is no natural end: decide at length 0.
    ([1, STOP], [0, 1, 2, 0, 0], 1e9, None),
])
@pytest.mark.parametrize("chunks", [0, 2])
def test_the_device_decision_at_the_edges_of_the_output(prompt, script, theta, row, chunks):
    args = request_args("thinkbrake-onectx", theta, "f", boundary="vocab+span")
    req = _Req(args=args, script=script, prompt=prompt, span=True, n_out=len(script), chunks=chunks)
    done, _ = _run_v2(4, [req], 1, 0, row=row)
    out1, ctl1 = _run_v1(4, 0, req, row=row)
    assert done[0][0] == out1 and _summary(done[0][1]) == _summary(ctl1)
    assert ctl1.stop_length == (4 if theta == 10.0 else 0)


def test_a_plug_in_rule_runs_on_the_host_with_the_same_decisions(monkeypatch):
    from otbench.probe.online import PLUGINS_ENV

    monkeypatch.setenv(PLUGINS_ENV, "_toy_tables:SecondDecision")
    args = request_args("thinkbrake-onectx", 0.0, "f") | {"otbench_method": "_toy_tables:SecondDecision"}
    script = [BOUNDARY, 0, BOUNDARY, 1, BOUNDARY, 2, 2, 2, 2, 2]
    reqs = [_Req(args=args, script=script, prompt=[1], span=False, n_out=10, chunks=1),
            _Req(args=request_args("thinkbrake-onectx", 0.5, "f"), script=script, prompt=[2], span=False,
                 n_out=10, chunks=0)]
    done, _ = _run_v2(11, reqs, 2, 3, row=_row_low_then_high)
    for r, req in enumerate(reqs):
        out1, ctl1 = _run_v1(11, r, req, row=_row_low_then_high)
        assert done[r][0] == out1 and _summary(done[r][1]) == _summary(ctl1)
    assert done[0][1].stop_length == 3 and done[1][1].stop_length == 1   # host rule; device rule


def test_a_boundary_stop_forces_the_thinking_end_and_the_public_class_runs_v2():
    # Stop at the first boundary: margins there are forced low by θ = +inf.
    args = request_args("thinkbrake-onectx", 1e9, "f", lengths=[3])
    script = [1, 2, 0, 2, 2, 2, 2]
    reqs = [_Req(args=args, script=script, prompt=[1, 2], span=False, n_out=7, chunks=1),
            _Req(args=None, script=[2] * 6, prompt=[1], span=False, n_out=6, chunks=0)]
    built = []

    def make(cfg, rs):
        built.append(ExitProcessor(cfg, rs))
        return built[-1]

    done, _ = _run_v2(5, reqs, 2, 9, make=make)
    assert built[0].runner == "v2"
    out, ctl = done[0]
    assert out[:3] == script[:3]
    assert out[3:6] == [SEP, END, PREFIX]     # 0 does not end with a line feed: separator first
    assert ctl.stop_length == 3 and ctl.broken is None and ctl.done
    assert done[1][0] == [2] * 6 and done[1][1] is None


def test_no_device_read_without_a_live_control():
    rs = _req_states(3, forbid=True)
    proc = _with_tables(ExitProcessorV2(_config(), rs), False)
    assert proc.add_request(0, types.SimpleNamespace(extra_args=None)) is False
    assert proc.add_request(2, types.SimpleNamespace(extra_args={"other": 1})) is False
    logits = torch.zeros(2, V)
    ctx = v2.LogitsContext(expanded_idx_mapping=torch.tensor([2, 0]), idx_mapping=torch.tensor([2, 0]),
                           idx_mapping_np=np.array([2, 0]), expanded_local_pos=torch.zeros(2),
                           input_ids=torch.zeros(2), pos=torch.zeros(2),
                           seq_lens_upper_bound_np=np.array([4, 4]))
    assert proc.apply(logits, ctx) is logits and bool((logits == 0).all())
    # A live control in another slot, not scheduled this step: still no read.
    assert proc.add_request(1, types.SimpleNamespace(extra_args=request_args("cap", 3, "f"))) is True
    assert proc.apply(logits, ctx) is logits


def test_one_read_per_step_and_none_once_the_control_is_done():
    args = request_args("cap", 2, "f")
    reqs = [_Req(args=args, script=[1, 1, 1, 1, 1, 1, 1, 1], prompt=[1], span=False, n_out=8, chunks=0)]
    done, rs = _run_v2(0, reqs, 1, 0)
    out, ctl = done[0]
    assert out[:5] == [1, 1, SEP, END, PREFIX] and ctl.stop_length == 2
    # The steps at lengths 0..5 read once each (the last forced token is seen at 5);
    # 6 and 7 read nothing; the window never fell short (no second read).
    assert rs.total_len.reads == 6 and rs.all_token_ids.reads == 6


def test_signals_are_the_masked_maximum_batched_or_not():
    from otbench.probe.online._processor._core import _ExitCore, signal_values

    g = np.random.default_rng(3)
    x = torch.from_numpy(g.normal(size=(9, V)).astype(np.float32))
    x[1, STOP] = x[1].max() + 1           # the signal is the top token
    x[2, [0, STOP]] = x[2].max() + 1      # tied at the top with another
    x[3, [0, 1]] = x[3].max() + 1         # two others tied at the top
    sids = torch.tensor([STOP] * 9)
    got = signal_values(x, sids)
    for i in range(9):
        lp = x[i].log_softmax(dim=-1, dtype=torch.float32)
        masked = lp.clone()
        masked[STOP] = float("-inf")
        assert got[i, 0].item() == lp[STOP].item()
        assert got[i, 1].item() == masked.max().item()
        one = _ExitCore._signals(x[i], STOP)
        assert (one["logp_end"], one["logp_other"]) == (got[i, 0].item(), got[i, 1].item())


def test_both_loaders_accept_the_one_fqcn_and_each_runner_builds_its_own():
    from vllm.v1.sample.logits_processor import _load_logitsprocs_by_fqcns
    from vllm.v1.worker.gpu.sample.logits_processor.loader import (
        _load_v2_logitsprocs_by_fqcns,
        build_custom_logits_processors,
    )

    assert _load_v2_logitsprocs_by_fqcns([PROCESSOR]) == [ExitProcessor]
    assert _load_logitsprocs_by_fqcns([PROCESSOR]) == [ExitProcessor]
    with pytest.raises(ValueError, match="not a subclass"):
        _load_v2_logitsprocs_by_fqcns([ExitProcessorV1])          # what V2 refused before
    assert _load_v2_logitsprocs_by_fqcns([ExitProcessorV2]) == [ExitProcessorV2]
    rs = types.SimpleNamespace(device=torch.device("cpu"), max_num_reqs=4, vocab_size=V,
                               all_token_ids=_Buf((4, M)), prompt_len=_Buf(4), prefill_len=_Buf(4),
                               total_len=_Buf(4))
    (built,) = build_custom_logits_processors(_config(), rs, False, [PROCESSOR])
    assert isinstance(built, ExitProcessor) and built.runner == "v2"
    assert isinstance(built._impl, ExitProcessorV2)
    v1 = ExitProcessor(_config(), torch.device("cpu"), False)
    assert v1.runner == "v1" and isinstance(v1._impl, ExitProcessorV1)
    with pytest.raises(TypeError):
        ExitProcessor(_config())
    with pytest.raises(OnlineControlError, match="speculative"):
        ExitProcessor(types.SimpleNamespace(speculative_config={"method": "ngram"}, model_config=None),
                      _req_states(1))


@pytest.mark.parametrize("use_v2", [False, True])
def test_the_frontend_validates_with_the_same_class_under_either_runner(use_v2):
    from otbench.probe.engines import EngineConfig
    from otbench.probe.engines._vllm import engine_kwargs
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.engine.input_processor import InputProcessor

    kw = engine_kwargs(EngineConfig(model="m", logits_processors=(PROCESSOR,)), "cuda")
    assert kw["logits_processors"] == [PROCESSOR]      # one FQCN whatever runner vLLM picks
    fake = types.SimpleNamespace(
        model_config=types.SimpleNamespace(logits_processors=kw["logits_processors"],
                                           runner_type="generate"),
        vllm_config=types.SimpleNamespace(use_v2_model_runner=use_v2))
    validate = InputProcessor._build_logits_processors_params_validator(fake)
    good = request_args("thinkbrake-onectx", 0.5, "generic-chat")
    validate(SamplingParams(max_tokens=4, extra_args=good))
    validate(SamplingParams(max_tokens=4, repetition_penalty=1.3))      # not controlled: untouched
    # The family's own sampling: additive penalties are undone before the signal is read.
    validate(SamplingParams(max_tokens=4, extra_args=good, presence_penalty=1.5, frequency_penalty=0.5))
    for bad in ({"extra_args": {**good, "otbench_theta": "x"}},
                {"extra_args": good, "min_tokens": 2},
                {"extra_args": good, "repetition_penalty": 1.3},        # rescales: not undone
                {"extra_args": good, "thinking_token_budget": 8}):      # V2 forces it after ours
        with pytest.raises(VLLMValidationError) as e:
            validate(SamplingParams(max_tokens=4, **bad))
        assert "\n" not in str(e.value)
