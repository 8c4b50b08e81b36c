"""The KV ledger (probe/stp/_kv.py) against a brute-force block manager, and the planner's batch against it."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.probe.stp._kv import GROWTH_TOKENS, KVLedger, _Request, blocks, group_blocks, steady_batch


def _vllm_blocks(seqs, block: int) -> int:
    """What vLLM's block manager holds for `seqs` = [(context ids, decoded tokens)]: every whole block of
    a context once per distinct content (prefix caching hashes a block with everything before it), and
    each sequence's own blocks past its context's whole blocks (the partial block and what it decoded)."""
    shared, own = set(), 0
    for ctx, decoded in seqs:
        full = len(ctx) // block
        shared.update(tuple(ctx[:(i + 1) * block]) for i in range(full))
        own += blocks(len(ctx) + decoded, block) - full
    return len(shared) + own


group = st.tuples(st.integers(0, 90),                                    # shared prefix length
                  st.lists(st.tuples(st.integers(0, 20), st.integers(1, 4), st.integers(1, 60),
                                     st.integers(0, 40)),                # extra, n, max_tokens, age
                           min_size=1, max_size=4))


@settings(max_examples=200, deadline=None)
@given(st.lists(group, min_size=1, max_size=5), st.sampled_from([4, 16, 32]))
def test_the_ledger_counts_what_the_block_manager_holds(groups, block):
    """Groups with distinct prefixes, requests with distinct tails: the ledger's count at step `now` is the
    block manager's for sequences decoded `min(max_tokens, age + GROWTH_TOKENS)` tokens, exactly."""
    now, ledger, seqs = 50, KVLedger(10 ** 9, block), []
    uid = 0
    for g, (shared, reqs) in enumerate(groups):
        prefix = [10_000 + g] + [g] * max(0, shared - 1) if shared else []
        for extra, n, cap, age in reqs:
            uid += 1
            ctx = prefix + [20_000 + uid] * extra       # its own tail: shares nothing past the prefix
            ledger.add(uid, g, len(prefix), len(ctx), n, cap, now - age)
            # the n samples of one request share their context's whole blocks, as they do in vLLM
            seqs += [(ctx, min(cap, age + GROWTH_TOKENS))] * n
    assert ledger.held(now) == _vllm_blocks(seqs, block)


def test_fits_removes_and_lets_a_run_move():
    led = KVLedger(64 * 16, 16)                           # 64 blocks
    assert led.fits(0, 10 ** 6)                           # nothing in flight: one group always goes
    led.add("a", "g", 100, 100, 4, 10, 0)                 # 6 whole blocks + 4 x blocks(4 + 10) = 10
    assert led.held(0) == 10 and led.fits(0, 54) and not led.fits(0, 55)
    led.add("b", "g", 100, 101, 1, 1, 0)                  # same group: its prefix is not charged twice
    assert led.held(0) == 11
    led.add("c", "g", 100, 130, 2, 1, 0)                  # 2 more whole blocks shared by its 2 samples
    assert led.held(0) == 11 + 2 + 2 * 1
    led.remove("c")
    led.remove("a")
    assert led.held(0) == 6 + 1 and len(led) == 1
    led.remove("b")
    assert led.held(0) == 0 and led.fits(0, 10 ** 6)
    # a sequence is charged what it can have decoded by now: its context, then one token a step
    led.add("t", "t", 20, 20, 1, 1000, 0)
    assert [led.held(s) for s in (0, 27, 28)] == [blocks(20 + GROWTH_TOKENS, 16)] + [
        blocks(20 + s + GROWTH_TOKENS, 16) for s in (27, 28)]
    assert led.held(28 - GROWTH_TOKENS + 1) > led.held(28 - GROWTH_TOKENS)      # a block boundary crossed


@pytest.mark.parametrize("block,prompt,prefix,answer,P", [(16, 300, 2000, 90, 16), (128, 60, 700, 40, 4),
                                                          (16, 6000, 12000, 1400, 16)])
def test_the_planners_batch_is_what_the_ledger_admits(block, prompt, prefix, answer, P):
    """`steady_batch` (the plan's batch) = P x the probe groups of the mean shape that the driver's ledger
    admits, each answer at its mean length (what the ledger charges once answers have finished), the
    signals at their one token."""
    kv = 2_000_000
    shared = prompt + prefix
    led, step, admitted = KVLedger(kv, block), answer, 0
    ctxs = [(shared, P, 10 ** 6)] + [(shared, 1, 1)] * 2
    per = group_blocks(shared, ctxs, block, decoded=step + GROWTH_TOKENS)
    while led.fits(step, per) and admitted < 10 ** 5:
        for i, (length, n, cap) in enumerate(ctxs):
            led.add((admitted, i), admitted, shared, length, n, cap, 0)
        admitted += 1
    got = steady_batch(kv, prompt=prompt, prefix=prefix, answer=answer, P=P, block=block, max_num_seqs=10 ** 9)
    assert admitted == math.floor(got / P + 1e-9)
    assert steady_batch(kv, prompt=prompt, prefix=prefix, answer=answer, P=P, block=block, max_num_seqs=8) == 8


def test_a_finished_sample_frees_its_blocks_while_its_siblings_decode():
    """With the stream's count of a request's samples still decoding, the finished ones are not charged
    (vLLM frees them at once); the request's shared whole blocks stay while any sample runs."""
    live = {"p": 16}
    led = KVLedger(10 ** 6, 16, live=live.get)
    led.add("p", "g", 64, 70, 16, 100, 0)          # 4 shared blocks; each sample its partial block and more
    per = lambda step: blocks(70 + step + GROWTH_TOKENS, 16) - 4  # noqa: E731
    assert led.held(0) == 4 + 16 * per(0)
    live["p"] = 5
    assert led.held(1) == 4 + 5 * per(1)
    live["p"] = None                                # the stream no longer knows it: all counted again
    assert led.held(2) == 4 + 16 * per(2)
    assert per(0) >= 1


@st.composite
def _nested_run(draw):
    """Questions whose prompts start with a common template, R trajectories each, positions in flight at
    nested retained lengths, each group a probe request and a one-token read with their own suffixes,
    and think requests of some questions: (block, [(ledger.add arguments, context ids, samples, decoded)])."""
    block = draw(st.sampled_from([4, 16, 32]))
    common = [7] * draw(st.integers(0, 40))
    adds, uid = [], 0
    for q in range(draw(st.integers(1, 3))):
        prompt = common + [100 + q] * draw(st.integers(0, 30))
        path_q = (("all", len(common) // block), (("q", q), len(prompt) // block))
        for r in range(draw(st.integers(1, 2))):
            thinking = [1_000 * (q + 1) + 10 * r + i % 7 for i in range(draw(st.integers(1, 120)))]
            if draw(st.booleans()):              # this trajectory is still being sampled
                uid += 1
                adds.append(((uid, ("t", q, r), len(prompt), len(prompt), 1, 500, 0, len(prompt), path_q),
                             prompt, 1, draw(st.integers(0, 60))))
            for k in sorted(set(draw(st.lists(st.integers(1, len(thinking)), max_size=4)))):
                tree = len(prompt) + k - 1
                path = path_q + ((("u", q, r), None),)
                for j, n in ((0, draw(st.integers(1, 4))), (1, 1)):
                    uid += 1
                    ctx = prompt + thinking[:k - 1] + [90_000 + uid] * draw(st.integers(1, 20))
                    adds.append(((uid, (q, r, k), tree, len(ctx), n, 40, 0, tree, path), ctx, n,
                                 draw(st.integers(0, 40))))
    return block, draw(st.permutations(adds))          # submitted in any order


@settings(max_examples=200, deadline=None)
@given(_nested_run())
def test_nested_prefixes_are_counted_once_as_the_block_manager_shares_them(run):
    """The prompts' common template, a question's prompt and a trajectory's thinking up to each position
    are whole blocks vLLM shares between every context that starts with them: the ledger's count is the
    brute-force block manager's, and `fits_group` charges a new group only the blocks not yet held."""
    block, adds = run
    now, ledger, seqs = 100, KVLedger(10 ** 9, block), []
    for (tag, grp, shared, length, n, cap, _, tree, path), ctx, n_, age in adds:
        before = ledger.held(now)
        fresh = grp not in ledger._groups
        need = ledger.need(shared, [(length, n, cap)], tree, path) if fresh else None
        ledger.add(tag, grp, shared, length, n, cap, now - age, tree, path)
        seqs += [(ctx, min(cap, age + GROWTH_TOKENS))] * n_
        assert ledger.held(now) == _vllm_blocks(seqs, block)
        if fresh and age + GROWTH_TOKENS <= GROWTH_TOKENS:      # charged at submission: need is exact
            assert before + need == ledger.held(now)
    for (tag, *_), _, _, _ in adds[::2]:
        ledger.remove(tag)
    rest = [(ctx, min(40 if grp[0] != "t" else 500, age + GROWTH_TOKENS))
            for (tag, grp, *_), ctx, n_, age in adds[1::2] for _ in range(n_)]
    assert ledger.held(now) == _vllm_blocks(rest, block)


@pytest.mark.parametrize("block,prompt,thinking,positions,answer,P,kv",
                         [(16, 300, 8000, 32, 200, 16, 2_000_000), (16, 300, 8000, 32, 200, 16, 60_000),
                          (32, 40, 160, 5, 20, 16, 5_888), (16, 6000, 24000, 94, 1400, 16, 700_000)])
def test_the_planners_batch_follows_nested_positions(block, prompt, thinking, positions, answer, P, kv):
    """Trajectories queued whole, their positions evenly spread over the thinking: the groups the ledger
    admits (each answer at its expected length, nested prefixes shared) against `steady_batch`'s count with
    `positions`, within 10 %; both well above the count without sharing where a trajectory's
    prefixes dominate the cache."""
    step, led, admitted, now = thinking / positions, KVLedger(kv, block), 0, 0
    led.expect("probe", answer)
    for t in range(10 ** 4):
        path = (("all", 0), (("q", t), prompt // block), (("u", t), None))
        for k in range(positions):
            shared = prompt + int((k + 1) * step) - 1
            ctxs = [(shared + 8, P, 10 ** 6)] + [(shared + 8, 1, 1)] * 2
            if not led.fits_group(now, shared, ctxs, shared, path, "probe"):
                break
            for i, (length, n, cap) in enumerate(ctxs):
                led.add((t, k, i), (t, k), shared, length, n, cap, 0, shared, path, "probe")
            admitted += 1
        else:
            continue
        break
    mean = prompt + 8 + (positions + 1) * step / 2 - 1 - prompt - 8     # mean retained thinking
    got = steady_batch(kv, prompt=prompt + 8, prefix=mean, answer=answer, P=P, block=block,
                       max_num_seqs=10 ** 9, positions=positions)
    assert got / P == pytest.approx(admitted, rel=0.10)
    alone = steady_batch(kv, prompt=prompt + 8, prefix=mean, answer=answer, P=P, block=block, max_num_seqs=10 ** 9)
    assert got >= alone


def test_a_sequence_is_charged_its_expected_length_until_it_outgrows_it():
    """`expect(kind, tokens)`: a sequence of that kind is charged at least the mean length of those that
    finished (capped at its max_tokens), its own length once longer; other kinds are not touched, and a
    new group's `need` is charged the same."""
    led = KVLedger(10 ** 6, 16)
    led.add("p", "g", 64, 70, 4, 100, 0, kind="probe")
    led.add("s", "g", 64, 71, 1, 1, 0, kind="signal")
    plain = lambda d: 4 + 4 * (blocks(70 + min(100, d), 16) - 4) + blocks(71 + 1, 16) - 4  # noqa: E731
    assert led.held(5) == plain(5 + GROWTH_TOKENS)
    led.expect("probe", 40)
    assert led.held(5) == plain(40 + GROWTH_TOKENS)
    assert led.held(60) == plain(60 + GROWTH_TOKENS)
    assert led.held(500) == plain(100)                      # never past max_tokens
    ctxs = [(70, 4, 100), (71, 1, 1)]
    assert led.need(64, ctxs, kind="probe") == 4 + 4 * (blocks(70 + 40 + GROWTH_TOKENS, 16) - 4) + 1
    assert led.need(64, ctxs) == 4 + 4 * (blocks(70 + GROWTH_TOKENS, 16) - 4) + 1


def test_the_planners_batch_leaves_the_trajectories_their_share():
    """Trajectories sampled beside the probes: as many as hold the cache at their full length (at most the
    default units less those probing), sampled at every age alike (the steady state), each projected to
    grow while the probes run; the ledger admits the probe groups into the rest, and `steady_batch`
    counts both (the trajectories decode one sequence each)."""
    block, kv, prompt, thinking, limit, answer, P, positions = 16, 777_000, 600, 9000, 32_768 + 4096, 900, 16, 30
    full = prompt + limit
    led = KVLedger(kv, block)
    led.expect("think", thinking)
    led.expect("probe", answer)
    T = 0
    while (T + 1) * blocks(full, block) <= led.capacity and T < 64 - 8:      # `fits_think`, the unit bounds
        T += 1
    assert T == kv // block // blocks(full, block)
    for i in range(T):                            # sampled at ages spread evenly over the thinking
        age = int((i + 0.5) * thinking / T)
        led.add(("t", i), ("t", i), prompt, prompt, 1, limit, -age, prompt, ((("q", i), prompt // block),),
                "think")
    step, admitted = thinking / positions, 0
    for t in range(10 ** 4):
        path = (("all", 0), (("q", 1000 + t), prompt // block), (("u", t), None))
        for k in range(positions):
            shared = prompt + int((k + 1) * step) - 1
            ctxs = [(shared + 8, P, 10 ** 6)] + [(shared + 8, 1, 1)] * 2
            if not led.fits_group(0, shared, ctxs, shared, path, "probe"):
                break
            for i, (length, n, cap) in enumerate(ctxs):
                led.add((t, k, i), (t, k), shared, length, n, cap, 0, shared, path, "probe")
            admitted += 1
        else:
            continue
        break
    mean = (positions + 1) * step / 2 - 1
    got = steady_batch(kv, prompt=prompt + 8, prefix=mean, answer=answer, P=P, block=block, max_num_seqs=10 ** 9,
                       positions=positions, trajectory_tokens=prompt + thinking, trajectory_full=full)
    assert (got - T) / P == pytest.approx(admitted, rel=0.10)
    assert steady_batch(kv, prompt=prompt + 8, prefix=mean, answer=answer, P=P, block=block, max_num_seqs=10 ** 9,
                        positions=positions) > got            # without them the probes had the whole cache


_op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 5), st.integers(0, 70), st.integers(0, 90), st.integers(1, 4),
              st.integers(1, 60), st.integers(0, 3), st.sampled_from([None, "probe", "think"])),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("step"), st.integers(-3, 40)),
    st.tuples(st.just("expect"), st.sampled_from(["probe", "think"]), st.floats(0, 80)),
    st.tuples(st.just("live"), st.integers(0, 30), st.integers(0, 4)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=60), st.sampled_from([4, 16]), st.booleans())
def test_the_kept_count_is_a_full_recount(ops, block, with_live):
    """`held` keeps its count up to date as requests come and go, steps pass and expected lengths move;
    after every operation it equals a count afresh over every group and request (`recount`), where
    groups share nodes, tags are reused, steps go back, and samples finish (`live`)."""
    live: dict = {}
    led = KVLedger(10 ** 6, block, live=live.get if with_live else None)
    now, tag = 0, 0
    for op in ops:
        if op[0] == "add":
            _, g, shared, extra, n, cap, lag, kind = op
            tag += 1
            q = g % 2                                   # groups 0, 2, 4 and 1, 3, 5 share a question's node
            path = (("all", 2), (("q", q), 3 + q), (("u", g), None))
            led.add(tag % 31, g, shared, shared + extra, n, cap, now - lag, tree=shared, path=path, kind=kind)
        elif op[0] == "remove":
            led.remove(op[1])
        elif op[0] == "step":
            now = max(0, now + op[1])
        elif op[0] == "expect":
            led.expect(op[1], op[2])
        else:
            live[op[1]] = op[2]
        assert led._count(now) == led.recount(now)      # the kept count, not the per-step memo


def _simulated_peak(led: KVLedger, step: int, new=()) -> int:
    """`peak` by brute force: every request in flight (and each of `new`, submitted now) decodes one token
    a step until its expected end (a trajectory, or a request of no phase, throughout), and the most
    blocks held at any step up to the last end, prefixes as `held` counts them; plain Python."""
    reqs = []
    for tag, r in led._requests.items():
        n = r.n if tag not in led._asked else min(r.n, led._live(tag))
        reqs.append((r.length, n, r.cap, max(0, step - r.step), led._end(r, step), led._groups[r.group].full))
    reqs += list(new)
    horizon = max([int(end - now) - 1 for _, n, _, now, end, _ in reqs
                   if n > 0 and end != float("inf") and end > now] + [0])
    best = 0
    for t in range(horizon + 1):
        total = 0
        for length, n, cap, now, end, full in reqs:
            if n > 0 and now + t < end:
                decoded = min(cap, end, now + t + GROWTH_TOKENS)
                total += length // led.block - full + n * (blocks(length + decoded, led.block) - length // led.block)
        best = max(best, total)
    return led._prefix_now(step) + best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 80), st.integers(0, 40), st.integers(1, 4),
                          st.integers(1, 90), st.integers(0, 60), st.sampled_from([None, "probe", "think", "signal"])),
                min_size=1, max_size=12),
       st.sampled_from([4, 16, 32]), st.dictionaries(st.sampled_from(["probe", "think"]), st.floats(0, 70)),
       st.integers(0, 4), st.lists(st.tuples(st.sampled_from(["probe", "signal"]), st.sampled_from([1, 40, 90]),
                                             st.lists(st.integers(0, 95), min_size=1, max_size=5)), max_size=4))
def test_the_projected_peak_is_the_most_held_at_any_coming_step(reqs, block, means, live_n, finished):
    """`peak` (what `fits_group` admits by) equals a step-by-step simulation of the sequences in flight
    decoding to their expected ends, with and without a new group; it is evaluated only where a sequence
    is about to end, which the simulation checks at every step."""
    live: dict = {}
    led = KVLedger(10 ** 6, block, live=live.get)
    for kind, mean in means.items():
        led.expect(kind, mean)
    for j, (kind, cap, lengths) in enumerate(finished):     # finished sequences: the lengths projected by
        led.add(("done", j), ("done", j), 0, 0, len(lengths), cap, 0, kind=kind)
        led.remove(("done", j), lengths)
    now = 60
    for i, (g, _, extra, n, cap, age, kind) in enumerate(reqs):
        shared = (0, 20, 37, 64)[g]               # a group's requests share its prefix
        if n > 1:
            live[i] = min(n, live_n)
        led.add(i, g, shared, shared + extra, n, cap, now - age, kind=kind)
        if age == 0:                              # submitted this step: its row joins the step's rows
            assert led.peak(now) == _simulated_peak(led, now)
    assert led.peak(now) == _simulated_peak(led, now)
    led._cols = None                              # the rows built afresh: the same
    assert led.peak(now) == _simulated_peak(led, now)
    ctxs = [(50, 3, 40), (50, 1, 1)]
    r0 = _Request(None, 0, 0, 0, now, "probe")
    new = []
    for length, n, cap in ctxs:
        r0.cap = cap
        new.append((length, n, cap, 0, led._end(r0, now), 48 // block))
    assert led.peak(now, 48, ctxs, kind="probe") == _simulated_peak(led, now, new) + 48 // block


def test_a_sequence_past_the_short_answers_is_expected_at_the_long_ones():
    """Answers that stop at 4 tokens and answers that run to the limit (60): a new one is expected at their
    mean; one that has decoded 10 tokens is past the first mode and expected at 60; one past every
    finished length, at its max_tokens; another kind or max_tokens learns nothing from them."""
    led = KVLedger(10 ** 6, 16)
    led.add("a", "a", 0, 0, 4, 60, 0, kind="probe")
    led.remove("a", [4, 4, 60, 60])
    r = _Request(None, 0, 1, 60, 100, "probe")
    assert led._end(r, 100) == 32.0 and led._end(r, 110) == 60.0 and led._end(r, 99) == 32.0
    r.cap = 90
    assert led._end(r, 100) == 90.0                    # no finished sequence of max_tokens 90
    led.expect("probe", 20)
    assert led._end(r, 100) == 20.0 and led._end(r, 150) == 50.0 + GROWTH_TOKENS


def test_a_request_joining_the_steps_rows_counts_its_live_samples():
    live: dict = {1: 0}
    led = KVLedger(10 ** 6, 4, live=live.get)
    led.add(0, 0, 0, 0, 1, 30, 60, kind="probe")
    first = led.peak(60)
    led.add(1, 0, 0, 0, 3, 30, 60, kind="probe")          # its samples already all ended
    assert led.peak(60) == first == _simulated_peak(led, 60)
    live[1] = 2
    led.remove(1)
    led.add(1, 0, 0, 0, 3, 30, 60, kind="probe")
    assert led.peak(60) == _simulated_peak(led, 60) > first


def test_staggered_sequences_admit_more_than_their_final_lengths_would():
    """Probe groups admitted a step apart end a step apart: the projection admits a group the sum of final
    lengths (`held` + `need`) would refuse, and refuses one that would really outgrow the cache."""
    led = KVLedger(40 * 16, 16)
    led.expect("probe", 64)
    for i in range(8):                            # ages 0, 8, ..., 56 of 64: the oldest end first
        led.add(i, i, 0, 0, 1, 200, 60 - 8 * i, kind="probe")
    ctxs = [(0, 1, 200)]
    assert led.held(60) + led.need(0, ctxs, kind="probe") > led.capacity - 30   # 9 x 5 blocks at their ends
    assert led.peak(60, 0, ctxs, kind="probe") < led.held(60) + led.need(0, ctxs, kind="probe")
    assert led.fits_group(60, 0, ctxs, kind="probe")
    for i in range(8, 40):                        # admit while it fits: never past the cache by simulation
        if not led.fits_group(60, 0, ctxs, kind="probe"):
            break
        led.add(i, i, 0, 0, 1, 200, 60, kind="probe")
    assert _simulated_peak(led, 60) <= led.capacity
    assert not led.fits_group(60, 0, ctxs, kind="probe")
