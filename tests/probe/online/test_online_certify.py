"""The certificate's arithmetic (plain-Python twins), and the replay's requests on a scripted stream, without an engine."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from otbench.probe.engines import Completion, StreamBase
from otbench.probe.online import (
    OnlineResult,
    Trajectory,
    certificate_line,
    compare,
    first_at_or_below,
)


def test_compare_counts_and_costs():
    t = [Trajectory("a", 0, (1,), (5, 6, 7, 8), (0, 2, 4), 1, 2),
         Trajectory("b", 0, (1,), (5, 6, 7, 8, 9, 9), (0, 3, 6), 3, 4)]
    on = [OnlineResult(2, 1, (5, 6), (), True), OnlineResult(None, 2, (5, 6, 7, 8, 9, 9), (), True)]
    cert = compare(t, on, np.array([1, 1]), np.array([0.5, 1.0]), np.array([1, 0]),
                   online_signal_k=np.array([1, 2]))
    assert cert["equal"] == 1 and cert["equal_online_context"] == 2 and cert["faithful"] == 2
    # one cell (questions a, b): relative cost pools the cell's tokens, accuracy its probes
    assert cert["online_rel_cost"] == (2 + 6) / 10 and cert["offline_rel_cost"] == (2 + 3) / 10
    assert np.isclose(cert["cost_gap_pp"], 30.0) and np.isclose(cert["acc_gap_pp"], 50 - 75)
    assert cert["verdict"] == "not certified" and cert["questions_per_cell"] == [2]
    line = certificate_line(cert, 2.5)
    assert line.startswith("online_certify: stop position equal in 1 of 2 trajectories (2 faithful replays), "
                           "accuracy gap -25.0 pp [")
    assert ", overhead 2.5% tokens/s vs plain generate; not certified: too few questions: 2 in the " \
        "smallest cell" in line
    # probes weight the pooled accuracy: Σ P y / Σ P online, Σ C / Σ P offline
    w = compare(t, on, np.array([1, 1]), np.array([0.5, 1.0]), np.array([1, 0]), probes=np.array([1.0, 3.0]))
    assert np.isclose(w["online_acc"], 1 / 4) and np.isclose(w["offline_acc"], (0.5 + 3) / 4)


@given(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), max_size=8), st.sampled_from([-2.0, 0.0, 0.5, 1.0]))
def test_first_at_or_below_is_thinkbrakes_walk(margins, theta):
    want = next((k for k, m in enumerate(margins) if m <= theta), len(margins))
    assert first_at_or_below(np.array(margins), theta) == want


# -- replay's request: the probe's thinking cut (`GenRequest.cut`) -----------------------

W, BOUND, SEP, END, PRE, A, EOS = range(1, 8)


class _Fmt:
    family = type("F", (), {"native_thinking": True})()
    span = None
    signal_id = END
    think_stop_ids = (END,)
    separator_ids, end_ids, answer_prefix_ids, answer_stop_ids = (SEP,), (END,), (PRE,), (EOS,)
    vocab = type("V", (), {"mask": np.isin(np.arange(8), [BOUND]), "ends_newline": np.zeros(8, bool),
                           "starts_newline": np.zeros(8, bool)})()


class _Engine:
    """Plays one scripted output per prompt (what the controller's processor lets the model write);
    with `honour`, ends a `cut` request as a stream may (`GenRequest.cut`)."""

    def __init__(self, outputs, honour):
        self.outputs, self.honour, self.decoded, self.reqs = outputs, honour, 0, []

    def stream(self, sampling):
        eng, queue = self, []

        class S(StreamBase):
            def submit(self, tag, req):
                eng.reqs.append(req)
                queue.append((tag, req))

            def in_flight(self):
                return len(queue)

            def poll(self):
                out = []
                for tag, req in queue:
                    ids = list(eng.outputs[req.prompt[0]])[:req.max_tokens]
                    stop = None
                    if EOS in ids:
                        ids, stop = ids[:ids.index(EOS)], EOS
                    if eng.honour and req.cut is not None:
                        limit, marker = req.cut
                        window = limit + len(marker) - 1
                        starts = [j for j in range(min(len(ids), window)) if tuple(ids[j:j + len(marker)]) == marker]
                        if len(ids) >= window and not any(j < limit for j in starts):
                            ids, stop = ids[:window], None
                    eng.decoded += len(ids)
                    out.append((tag, [Completion(tuple(ids), stop)]))
                queue.clear()
                return out
        return S()


def test_replay_cuts_the_thinking_as_the_probe_does_and_certifies_the_same():
    from otbench.probe.online import replay

    limit, ans = 12, 6
    think = [W, W, BOUND] * 4                                    # 12 tokens, boundaries at 3, 6, 9, 12
    outputs = {
        # forced at the last boundary before the limit (L = 9): separator, end, prefix, answer
        100: think[:9] + [SEP, END, PRE, A, EOS],
        # the model's own end within the limit
        101: think[:6] + [END, A, A, EOS],
        # no end within the limit: runs on (a reply after it is not the probe's)
        102: think + [W] * 40,
        # its own end starts at the limit: the probe's split counts none (cut at the limit)
        103: think + [END, A, EOS],
    }
    trajs = [Trajectory(f"q{p}", 0, (p,), tuple(think[:6]) if p == 101 else tuple(think),
                        (0, 3, 6) if p == 101 else (0, 3, 6, 9, 12), 1, 2) for p in outputs]
    got = {}
    for honour in (False, True):
        eng = _Engine(outputs, honour)
        got[honour] = replay(eng, None, _Fmt(), trajs, method="thinkbrake-onectx", theta=0.0, family="qwen3",
                             boundary="vocab", thinking_limit=limit, answer_limit=ans)
        assert all(r.cut == (limit + 2, (END,)) for r in eng.reqs)   # reach: limit + separator + 1
        got[honour, "decoded"] = eng.decoded
    assert got[False] == got[True]
    stop, own, none, late = got[True]
    assert (stop.stop_length, stop.position, stop.answer_ids) == (9, 3, (PRE, A))
    assert (own.stop_length, own.thinking, own.answer_ids) == (None, tuple(think[:6]), (A, A))
    assert none.thinking == late.thinking == tuple(think) and none.answer_ids == late.answer_ids == ()
    # the cut decodes fewer: 102 stops at limit + 2 tokens instead of max_tokens
    assert got[True, "decoded"] < got[False, "decoded"]
