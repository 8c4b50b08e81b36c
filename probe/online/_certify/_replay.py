"""Replay stored trajectories with the online controller and compare with OTBench's offline positions.

`replay` sends every chosen trajectory's stored prompt again, with its
stored trajectory seed and the set's sampling parameters, through any
`Engine`'s `Stream` (in process, or a served engine: only `GenRequest` and
its `extra_args`), asking the controller to decide at that trajectory's
stored step ends `L(0..n-1)` -- the boundaries OTBench's offline walk
decides at. `compare` then lines up, per trajectory, the online stop with
the offline one.

Where the two cannot agree, by construction (each is measured, not
assumed away):

* the signal's context: offline it is read after the retained prefix with
  its last boundary token replaced by its content (and the separator), the
  context the probe's answer prompt uses (docs/rules.md); online the
  processor sees the logits after what the model wrote, the boundary token
  itself. `boundary_signals` reads both with the engine's signal request:
  the certificate reports their difference at every boundary and, as the
  controller's own exactness check, the offline walk on the online-context
  signal (`equal_online_context`);
* the trajectory itself: a replay with the same seed reproduces the stored
  tokens only if the engine samples identically in another batch (vLLM
  promises seeds, not bit-identical floats across batchings); `faithful`
  says, per trajectory, whether the online tokens before its stop equal
  the stored ones;
* the answer: online it is one sample after the forced thinking end,
  offline the position's probe accuracy `C(k)/P` (P samples).

`compare` puts the point at θ on the macro chain, online and offline, under
OTBench's two-stage paired bootstrap draw (`_interval`), gives the
verdict -- ``certified``, ``rejected`` or ``not certified`` on too little
evidence, each with its reasons -- and assigns every disagreeing trajectory
its source (`_verdict`).
"""

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from otbench.probe.engines import Completion, Engine, GenRequest

from .._processor._control import Tables
from .._processor._rule import set_rule_args
from .._request import CAP, PROCESSOR, request_args
from ._interval import PERCENTILES, REPLICATES, SEED, Design, design_of, paired_point
from ._interval import design as certify_design
from ._verdict import disagreements, first_divergence, verdict
from ._stored import (Trajectory, batch_invariance, check_replayable, engine_config_of, grade_rows, replay_config,
                      set_family, set_trajectories)


@dataclasses.dataclass(frozen=True)
class OnlineResult:
    """What happened online for one trajectory.

    Attributes:
      stop_length: thinking tokens when the controller forced the end, None
        when the model ended its thinking itself (or hit the limit).
      position: the step `k` of the stored trajectory with `L(k) ==
        stop_length` (n when it did not stop).
      thinking: the online thinking ids; answer_text: the decoded answer
        (with the answer-channel prefix) to grade.
      faithful: the online thinking equals the stored thinking up to the
        stop (or in full when it did not stop).
    """

    stop_length: int | None
    position: int
    thinking: tuple[int, ...]
    answer_ids: tuple[int, ...]
    faithful: bool


def _stop_in(out: Sequence[int], lengths: Sequence[int], tables: Tables, prompt_last: int) -> int | None:
    for L in lengths:
        force = tables.forced(int(out[L - 1]) if L else prompt_last)
        if L + len(force) <= len(out) and tuple(out[L:L + len(force)]) == force:
            return int(L)
    return None


def replay(engine: Engine, sampling: Any, fmt: Any, trajectories: Sequence[Trajectory], *, method: str,
           theta: float, family: str, boundary: str, thinking_limit: int, answer_limit: int,
           params: Mapping[str, Any] | None = None, in_flight: int = 64) -> list[OnlineResult]:
    """Replay `trajectories` online (see module docstring); results in input order.

    `method`, `params`: what each request names (`request_args`; `rule_args` of a `Method`)."""
    tables = Tables.from_format(fmt)
    native = fmt.family.native_thinking
    stream = engine.stream(sampling)
    reqs: list[GenRequest] = []
    end = tuple(int(x) for x in fmt.end_ids) if native else ()
    # The thinking-end marker, forced (after the separator, at a boundary L <= thinking_limit) or
    # the model's own (which counts only when it starts within thinking_limit, as the probe's
    # `split_trajectory` cuts the stored one), starts before `reach` or is not read: past it the
    # engine may stop the request (`GenRequest.cut`, as the probe's think request) instead of
    # decoding the answer budget. Results are the same whether the engine honours the cut or not.
    reach = thinking_limit + len(tables.separator_ids) + 1
    cut = (reach, end) if end else None
    for t in trajectories:
        n = len(t.L) - 1
        lengths = list(t.L[:n])
        force_max = len(tables.forced(None))
        args = request_args(method, theta, family, params=params, boundary=boundary,
                            lengths=lengths if method != CAP else None)
        stops = fmt.answer_stop_ids if native else fmt.think_stop_ids
        reqs.append(GenRequest(t.prompt, 1, int(t.seed_think), thinking_limit + force_max + answer_limit,
                               stops, extra_args=args, cut=cut))
    outs = _run(stream, reqs, in_flight)
    results: list[OnlineResult | None] = [None] * len(trajectories)
    follow: dict[int, GenRequest] = {}
    for i, (t, c) in enumerate(zip(trajectories, outs)):
        out = c.token_ids
        n = len(t.L) - 1
        prompt_last = int(t.prompt[-1]) if t.prompt else -1
        L = _stop_in(out, t.L[:n], tables, prompt_last) if method != CAP else \
            _stop_in(out, range(min(len(out), thinking_limit) + 1), tables, prompt_last)
        if L is not None:
            force = tables.forced(int(out[L - 1]) if L else prompt_last)
            thinking = tuple(out[:L])
            answer = tuple(fmt.answer_prefix_ids) + tuple(out[L + len(force):])
            k = t.L.index(L) if L in t.L else n
            results[i] = OnlineResult(L, k, thinking, answer, thinking == t.thinking[:L])
            continue
        # The model ended its thinking itself: its own answer, as the probe takes it.
        if native:
            # its own marker counts only when it starts within thinking_limit (`split_trajectory`)
            at = next((j for j in range(min(len(out) - len(end) + 1, thinking_limit))
                       if tuple(out[j:j + len(end)]) == end), -1)
            thinking = tuple(out[:at]) if at >= 0 else tuple(out[:thinking_limit])
            answer = tuple(out[at + len(end):]) if at >= 0 else ()
            results[i] = OnlineResult(None, n, thinking, answer, thinking == t.thinking)
        else:
            thinking = tuple(out[:thinking_limit])
            finished = c.stop_id is not None and c.stop_id in fmt.think_stop_ids and len(out) < thinking_limit
            if finished:    # the generic family's finished reply is its own answer (as the probe grades it)
                results[i] = OnlineResult(None, n, thinking, thinking, thinking == t.thinking)
                continue
            follow[i] = GenRequest(fmt.answer_context(t.prompt, thinking, finished), 1, int(t.seed_answer),
                                   answer_limit, fmt.answer_stop_ids)
            results[i] = OnlineResult(None, n, thinking, (), thinking == t.thinking)
    if follow:
        keys = list(follow)
        for i, c in zip(keys, _run(engine.stream(sampling), [follow[i] for i in keys], in_flight)):
            results[i] = dataclasses.replace(results[i], answer_ids=tuple(fmt.answer_prefix_ids) + c.token_ids)
    return results  # type: ignore[return-value]


def _run(stream, reqs: Sequence[GenRequest], in_flight: int) -> list[Completion]:
    out: list[Completion | None] = [None] * len(reqs)
    nxt = 0
    while nxt < len(reqs) or stream.in_flight():
        while nxt < len(reqs) and stream.in_flight() < in_flight:
            stream.submit(nxt, reqs[nxt])
            nxt += 1
        for tag, comps in stream.poll():
            out[tag] = comps[0]
    return out  # type: ignore[return-value]


def boundary_signals(engine: Engine, fmt: Any, trajectories: Sequence[Trajectory]
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per trajectory, float64[n] margins at `k = 0..n-1`: (online context, probe context).

    Both are read by the engine's own signal request: after `prompt +
    thinking[:L(k)]` (the context the online processor decides in: what the
    model wrote) and after `fmt.signal_context` (what the probe recorded:
    the last boundary token replaced by its content, then the separator).
    """
    on, off, sizes = [], [], []
    for t in trajectories:
        n = len(t.L) - 1
        sizes.append(n)
        for j in range(n):
            on.append(list(t.prompt) + list(t.thinking[:t.L[j]]))
            off.append(fmt.signal_context(t.prompt, t.thinking, t.L[j]))
    a = engine.signals(on, fmt.signal_id) if on else []
    b = engine.signals(off, fmt.signal_id) if off else []
    ma = np.array([x.logp_other - x.logp_end for x in a])
    mb = np.array([x.logp_other - x.logp_end for x in b])
    cuts = np.cumsum([0] + sizes)
    return ([ma[cuts[i]:cuts[i + 1]] for i in range(len(sizes))],
            [mb[cuts[i]:cuts[i + 1]] for i in range(len(sizes))])


def _context_check(engine: Engine, fmt: Any, trajs: Sequence[Trajectory], ms: Any, rows: Sequence[int],
                   theta: float, offline_signal: str | None) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """(margin shifts online - probe context, the offline walk's stops on the online-context margin,
    the recorded ``margin_own`` against a fresh read in that context or None)."""
    m_on, m_off = boundary_signals(engine, fmt, trajs)
    shifts = np.concatenate([a - b for a, b in zip(m_on, m_off)]) if m_on else np.zeros(0)
    ko = np.array([first_at_or_below(m, theta) for m in m_on], dtype=np.int64)
    reread = None
    if offline_signal == "margin_own" and "margin_own" in ms.signals:
        rec_own = np.asarray(ms.signals["margin_own"])
        diffs = [np.abs(rec_own[int(r), :len(m)] - m) for r, m in zip(rows, m_on)]
        d = np.concatenate(diffs) if diffs else np.zeros(0)
        reread = {"boundaries": int(d.size), "max_abs": float(d.max()) if d.size else None,
                  "equal": int((d == 0).sum())}
    return shifts, ko, reread


def first_at_or_below(margins: np.ndarray, theta: float) -> int:
    """ThinkBrake's position on one trajectory: the first `k < n` with margin `<= θ`, else `n`."""
    hit = np.flatnonzero(np.asarray(margins) <= theta)
    return int(hit[0]) if hit.size else int(np.asarray(margins).size)


def compare(trajectories: Sequence[Trajectory], online: Sequence[OnlineResult], offline_k: np.ndarray,
            offline_acc: np.ndarray, online_correct: np.ndarray, *, probes: np.ndarray | None = None,
            design: Design | None = None, shift: np.ndarray | None = None,
            online_signal_k: np.ndarray | None = None, seed: int = SEED,
            replicates: int = REPLICATES, batch_invariance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The certificate: per-trajectory agreement, the point's accuracy and relative cost online vs
    offline on the macro chain with OTBench's two-stage paired intervals, the verdict and every
    source of disagreement (`_interval`, `_verdict`).

    `offline_acc`: per trajectory `C(k)/P` at the offline stop; `probes`: its `P` (the point pools
    correct probes, `Σ C / Σ P`; default 1 each); `design`: the cells and questions of the
    trajectories (`design_of(ms, rows)`; default one cell, questions by id).
    """
    n = len(online)
    k_off = np.asarray(offline_k, dtype=np.int64)
    k_on = np.array([r.position for r in online], dtype=np.int64)
    L_full = np.array([t.L[-1] for t in trajectories], dtype=np.float64)
    L_off = np.array([t.L[k] for t, k in zip(trajectories, k_off)], dtype=np.float64)
    L_on = np.array([len(r.thinking) for r in online], dtype=np.float64)
    faithful = np.array([r.faithful for r in online], dtype=bool)
    acc_off = np.asarray(offline_acc, dtype=np.float64)
    y_on = np.asarray(online_correct, dtype=np.float64)
    P = np.ones(n) if probes is None else np.asarray(probes, dtype=np.float64)
    if design is None:
        ids = sorted({t.question for t in trajectories})
        design = certify_design(np.zeros(n, np.int64), [0], [0],
                                [ids.index(t.question) for t in trajectories])
    interval = {"draw": "OTBench's two-stage paired bootstrap (questions within each group, then each "
                        "occurrence's trajectories), restated in NumPy", "seed": int(seed),
                "replicates": int(replicates), "percentiles": list(PERCENTILES),
                "test": "paired difference online - offline, stage-1 replicates of the same draw"}
    if n:
        interval.update(paired_point(design, {"accuracy": (P * acc_off, P * y_on, P),
                                              "relative_cost": (L_off, L_on, L_full)},
                                     seed=seed, replicates=replicates))
    else:
        nan = {"offline": float("nan"), "online": float("nan"), "difference": float("nan"),
               "offline_interval": [None, None], "online_interval": [None, None],
               "difference_interval": [None, None], "two_stage_difference_interval": [None, None],
               "inside": False}
        interval.update(accuracy=dict(nan), relative_cost=dict(nan))
    acc, cost = interval["accuracy"], interval["relative_cost"]
    out = {
        "trajectories": n, "equal": int((k_on == k_off).sum()),
        "faithful": int(faithful.sum()), "equal_when_faithful": int(((k_on == k_off) & faithful).sum()),
        "online_acc": acc["online"], "offline_acc": acc["offline"], "acc_gap_pp": 100 * acc["difference"],
        "offline_acc_interval": acc["offline_interval"],
        "online_rel_cost": cost["online"], "offline_rel_cost": cost["offline"],
        "cost_gap_pp": 100 * cost["difference"], "interval": interval,
        "per_trajectory": [{"question": t.question, "trajectory": t.trajectory, "offline_k": int(a),
                            "online_k": int(b), "offline_L": int(c), "online_L": int(d), "full_L": int(t.L[-1]),
                            "faithful": bool(f), "offline_early": bool(a < len(t.L) - 1),
                            "online_early": r.stop_length is not None,
                            "first_divergence": None if f else first_divergence(r.thinking, t.thinking)}
                           for t, r, a, b, c, d, f in zip(trajectories, online, k_off, k_on, L_off, L_on, faithful)],
    }
    if online_signal_k is not None:
        # The controller's own exactness: its stops against the offline walk on
        # the signal read in the online context (the same rule, the same θ).
        ko = np.asarray(online_signal_k, dtype=np.int64)
        out["equal_online_context"] = int((k_on == ko).sum())
        for rec, v in zip(out["per_trajectory"], ko):
            rec["online_context_k"] = int(v)
    if shift is not None:
        s = np.asarray(shift, dtype=np.float64)
        out["signal_shift"] = {"boundaries": int(s.size),
                               "mean": float(s.mean()) if s.size else None,
                               "max_abs": float(np.abs(s).max()) if s.size else None}
    if batch_invariance is not None:
        out["batch_invariance"] = dict(batch_invariance)
    out["questions_per_cell"] = [int(x) for x in design.questions_per_cell()] if n else []
    out.update(verdict(out, np.asarray(out["questions_per_cell"] or [0])))
    out["disagreements"] = disagreements(out, P, y_on, acc_off)
    return out


def certificate_line(cert: Mapping[str, Any], overhead_pct: float | None = None) -> str:
    """The one-line summary (the benchmark's last line): agreement, gaps with their paired
    intervals, and the verdict with its reasons."""
    def gap(key: str) -> str:
        d = cert.get("interval", {}).get(key, {})
        lo, hi = d.get("difference_interval", [None, None])
        return f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None else ""

    line = (f"online_certify: stop position equal in {cert['equal']} of {cert['trajectories']} trajectories "
            f"({cert['faithful']} faithful replays), accuracy gap {cert['acc_gap_pp']:.1f} pp{gap('accuracy')}, "
            f"cost gap {cert['cost_gap_pp']:.1f} pp{gap('relative_cost')}")
    if overhead_pct is not None:
        line += f", overhead {overhead_pct:.1f}% tokens/s vs plain generate"
    reasons = cert.get("reasons") or []
    return line + f"; {cert['verdict']}" + (f": {'; '.join(reasons)}" if reasons else "")


# -- a stored set, end to end -------------------------------------------------------

def certify_set(directory, ms: Any, rows: Sequence[int], offline_k: Sequence[int], *, method: Any,
                theta: float, engine: Engine | None = None, grader: str = "auto",
                shift: bool = True, seed: int = SEED, offline_signal: str | None = None,
                replicates: int = REPLICATES, server: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Replay `rows` of the stored set in `directory` online and certify them against `offline_k`.

    `method`: the fitted `Method` the offline walk ran; the processor gets its online parameters
    for the set's model at `theta` (`set_rule_args`). `engine`: an open engine with the
    controller loaded (default: the set's recorded one, started here and closed after).
    `offline_signal`: the recorded column `offline_k` was walked on. A method whose device form
    thresholds the margin is also checked on both contexts' margins (`shift`, `_context_check`).
    `server`: a served engine's address and key variable, from the user (`engine_config_of`).
    """
    from otbench.probe.config import Sampling
    from otbench.probe.engines import open_engine
    from otbench.probe.tokens import build_vocabulary, compile_format

    check_replayable(directory, ms)
    prov = ms.provenance
    fam = set_family(prov)
    probe = prov.get("probe", {})
    rule = prov.get("boundary_rule", "vocab")
    sampling = Sampling(**prov["sampling"])
    ask = set_rule_args(method, ms, theta)
    online_signal = method.device_signal() or ", ".join(method.signals)
    offline_signal = offline_signal or ", ".join(method.signals)
    own = engine is None
    config = engine_config_of(prov, [PROCESSOR], server=server) if own else None  # refuse first
    trajs = set_trajectories(directory, ms, rows)
    if own:
        engine = open_engine(config)
    try:
        tok = engine.tokenizer()
        fmt = compile_format(fam, tok, build_vocabulary(tok, engine.vocab_size()), boundary_rule=rule)
        online = replay(engine, sampling, fmt, trajs, **ask, theta=theta, family=fam.name, boundary=rule,
                        thinking_limit=int(probe.get("thinking_limit", fam.limits.thinking)),
                        answer_limit=int(probe.get("answer_limit", fam.limits.answer)))
        shifts = ko = reread = None
        if shift and method.device_signal() == "margin":
            shifts, ko, reread = _context_check(engine, fmt, trajs, ms, rows, theta, offline_signal)
        texts = tok.batch_decode([list(r.answer_ids) for r in online], skip_special_tokens=True)
        invariance = batch_invariance(prov, replay_config(engine, config))
    finally:
        if own:
            engine.close()
    name, correct = grade_rows(ms, rows, texts, grader)
    k_off = np.asarray(offline_k, dtype=np.int64)
    P = np.asarray(ms.probes, dtype=np.float64)[np.asarray(rows)]
    acc_off = np.asarray(ms.C, dtype=np.float64)[np.asarray(rows), k_off] / P
    cert = compare(trajs, online, k_off, acc_off, correct, probes=P, design=design_of(ms, rows),
                   shift=shifts, online_signal_k=ko, seed=seed, replicates=replicates,
                   batch_invariance=invariance)
    if ask["params"]:
        cert["controller"] = {"method": ask["method"], **ask["params"]}
    cert.update(method=method.name, theta=float(theta), grader=name, online=True, online_signal=online_signal,
                offline_signal=offline_signal,
                sampling=sampling.as_dict(), engine=engine.info() if not own else {"kind": "recorded"})
    if reread is not None:
        cert["own_context_reread"] = reread
    for rec, r, c in zip(cert["per_trajectory"], online, correct):
        rec["online_correct"] = bool(c)
        rec["stopped"] = r.stop_length is not None
    return cert
