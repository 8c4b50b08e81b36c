"""Model Runner V2's thinking-budget count, as restated in `probe/online/_cap/_count.py`.

V2's rule is a Triton kernel (vLLM 0.32 `v1/worker/gpu/sample/thinking_budget.py`,
`_thinking_budget_kernel`) that cannot run on a CPU, so the restatement is pinned here case by
case against the kernel's lines: the last start anywhere opens the count (327-333), the budget
is reached at ``tokens after it >= budget`` (334), the forced id continues the longest proper end
prefix the tail already has (337-364), and forcing stops at the natural end (327). The first
case is vLLM's own unit test of the kernel (`tests/v1/worker/test_thinking_budget.py`,
``[1, START, 10, 11, 12]`` with budget 3 forces END). A brute-force twin of the whole walk
(`predict_cut`) is checked over random sequences with hypothesis.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otbench.errors import ArgumentError
from otbench.probe.online import predict_cut, v2_forced
from otbench.probe.online._cap._count import last_index

START, END, NL = 100, 101, 9


def test_vllms_own_case_forces_the_end_once_the_budget_is_spent():
    assert v2_forced([1, START, 10, 11, 12], 3, [START], [END], [END]) == END
    assert v2_forced([1, START, 10, 11], 3, [START], [END], [END]) is None


def test_the_count_restarts_at_every_later_start():
    # the default start of the V1 era, the prompt's last token "\n": every line break restarts V2
    seq = [1, NL, 5, 5, 5, NL, 5]
    assert v2_forced(seq, 3, [NL], [END], [END]) is None          # one token since the last "\n"
    assert v2_forced(seq + [5, 5], 3, [NL], [END], [END]) == END
    assert v2_forced([1, START, 5, 5, 5, NL, 5], 3, [START], [END], [END]) == END


def test_a_natural_end_after_the_last_start_stops_forcing():
    assert v2_forced([1, START, 5, 5, 5, END, 5, 5], 1, [START], [END], [END]) is None
    # the state is off without natural-end ids (line 49): nothing is ever forced
    assert v2_forced([1, START, 5, 5, 5], 1, [START], [END], []) is None


def test_the_forced_id_continues_an_end_prefix_the_tail_already_has():
    end = [7, 8, END]
    assert v2_forced([START, 5, 5], 2, [START], end, [END]) == 7
    assert v2_forced([START, 5, 7], 2, [START], end, [END]) == 8          # tail is end[:1]
    assert v2_forced([START, 5, 7, 8], 2, [START], end, [END]) == END     # tail is end[:2]


def test_predict_cut_v2_counts_from_the_marker_and_stops_at_the_parsers_end():
    marker = [START, NL]
    close = [NL, END, 42]                       # separator, end marker, answer prefix
    p = predict_cut([1, 2, *marker], [5] * 10, 4, runner="v2", start=marker, end=close, natural_end=[END])
    assert p.cut == 4 and p.close == (NL, END) and p.restarts == ()
    # without a parser the natural end is the whole end string: all of it is forced
    q = predict_cut([1, 2, *marker], [5] * 10, 4, runner="v2", start=marker, end=close, natural_end=close)
    assert q.cut == 4 and q.close == tuple(close)


def test_predict_cut_v2_with_a_recurring_one_token_start_cuts_late():
    thinking = [5, 5, NL, 5, 5, 5, 5, 5]
    p = predict_cut([1, NL], thinking, 3, runner="v2", start=[NL], end=[END], natural_end=[END])
    assert p.restarts == (3,) and p.cut == 6


def test_predict_cut_v1_lets_a_longer_start_through_by_its_length_less_one():
    p = predict_cut([1, START, NL], [5] * 10, 4, runner="v1", start=[START, NL], end=[END], natural_end=[END])
    assert p.cut == 5 and p.close == (END,)
    assert predict_cut([1, NL], [5] * 3, 4, runner="v1", start=[NL], end=[END], natural_end=[END]).cut is None
    with pytest.raises(ArgumentError, match="runner"):
        predict_cut([1], [5], 1, runner="v3", start=[1], end=[END], natural_end=[END])


def _brute_cut(prompt, thinking, budget, start, natural):
    """The kernel's test written out per step: count after the last start, unless a natural end follows."""
    for t in range(len(thinking) + 1):
        seq = prompt + thinking[:t]
        s = max((i for i in range(len(seq) - len(start) + 1) if seq[i:i + len(start)] == start), default=-1)
        e = max((i for i in range(len(seq) - len(natural) + 1) if seq[i:i + len(natural)] == natural), default=-1)
        if s >= 0 and s > e and len(seq) - s - len(start) >= budget:
            return t
    return None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=6), st.lists(st.integers(0, 3), max_size=20),
       st.integers(0, 8), st.lists(st.integers(0, 3), min_size=1, max_size=2))
def test_predict_cut_v2_matches_a_brute_force_walk(prompt, thinking, budget, start):
    natural = [3]
    p = predict_cut(prompt, thinking, budget, runner="v2", start=start, end=[3], natural_end=natural)
    assert p.cut == _brute_cut(prompt, thinking, budget, start, natural)
    assert last_index(prompt + thinking, start) == max(
        (i for i in range(len(prompt + thinking) - len(start) + 1) if (prompt + thinking)[i:i + len(start)] == start),
        default=-1)
