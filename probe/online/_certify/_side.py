"""Certify a field method run by the side-request controller against OTBench's offline stops.

For a probe set (its token tables and provenance), `certify_field`:

1. reads the set's field signals (``signal.answer``, ``answer_conf``,
   ``hesitation``, ``answer_tokens``) or, when the probe did not record
   them, records them here (`record_signals`): the controller's record
   pass on the *stored* thinking -- at every stored position `L(0..n)` the
   side request the controller makes online (the probe's prompt, sample 0's
   seed and caps), the signals as the probe computes them
   (`otbench.probe.grading.probe_signals`, the set's hesitation words),
   answer ids numbered as the probe numbers them (`number_answers`: 0 =
   graded correct). The certificate says which (``offline_signals``);
2. asks the caller's `offline(ms)` for OTBench's point at θ on them (the
   analysis runs in the caller: the probe never imports it): rows of the
   split, per row the stop `k`, the signal tokens and paid decisions of
   OTBench's net rule;
3. replays those rows online with the stored seeds under the controller
   (thinking decoded, or fed as stored: ``thinking="stored"``), grades the
   answers and compares, per trajectory, the online stop with the offline
   one, and online accuracy and gross and net relative cost with
   OTBench's point.

Where they cannot agree, by construction: a decoded continuation is a
fresh request per step, so under sampling it is another draw than the
stored trajectory (``faithful`` counts those that match); OTBench's net
rule declares the probe prompt's prefill (a constant per method) while
online it is measured (the suffix not shared with the prefix), so the
net cost gap includes that difference (reported: ``declared_vs_measured``).
"""

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._side._controller import FIELD_NAMES, RECORD, FieldRule, SideJob, SideResult, run_side
from .._request import OnlineControlError
from ._replay import OnlineResult, compare
from ._stored import Trajectory, batch_invariance, engine_config_of, set_trajectories
from ._interval import REPLICATES, SEED, design_of

RECORDER = "otbench.online-record/1"
OWN_COMPARED = ("dynasor_window", "dynasor_uncertain", "dynasor_tokens", "deer_conf", "deer_tokens")
"""The field methods' own-probe signals an online run is compared on with the recorded ones."""


def replay_context(directory, ms: Any) -> dict[str, Any]:
    """What a replay of the probe set needs from its provenance: family, boundary rule, sampling,
    `b`, limits and the questions by (group, id); refuses a set that is not a probe run."""
    from otbench.probe.config import Sampling, load_family
    from otbench.probe.data import load_questions
    from otbench.probe.grading import HESITATION_WORDS

    from ._stored import check_replayable

    check_replayable(directory, ms)
    prov = ms.provenance
    if not isinstance(prov.get("data"), Mapping):
        raise OnlineControlError(f"{directory}: the set's provenance records no question data "
                                 "(`data`), which a replay grades against")
    fam = load_family(prov["family"]["name"])
    probe = prov.get("probe", {})
    return {"family": fam, "rule": prov.get("boundary_rule", "vocab"), "sampling": Sampling(**prov["sampling"]),
            "b": int(probe.get("b", 256)),
            "words": tuple(probe.get("hesitation_words") or HESITATION_WORDS),
            "thinking_limit": int(probe.get("thinking_limit", fam.limits.thinking)),
            "answer_limit": int(probe.get("answer_limit", fam.limits.answer)),
            "questions": {(q.group, q.id): q for q in load_questions(prov["data"])}}


def side_jobs(directory, ms: Any, rows: Sequence[int], questions: Mapping, *, stored: bool
              ) -> tuple[list[Trajectory], list[SideJob], list[Any]]:
    """The stored trajectories `rows` as controller jobs (seeds, positions, probe seeds, task)."""
    from otbench.analysis.measurement import load_table
    from otbench.analysis.methods import OWN_SIDE_SIGNALS
    from otbench.probe.config import derive_seed

    trajs = set_trajectories(directory, ms, rows)
    tab = load_table(directory, "tokens").select(["group", "question", "trajectory", "model", "dataset",
                                                  "finished"]).to_pydict()
    index = {(g, q, int(r)): i for i, (g, q, r) in enumerate(zip(tab["group"], tab["question"], tab["trajectory"]))}
    jobs, qs = [], []
    for row, t in zip(rows, trajs):
        g = ms.groups[int(ms.cell_group[int(ms.cell[row])])]
        i = index[(g, t.question, t.trajectory)]
        q = questions.get((g, t.question))
        if q is None:
            raise OnlineControlError(f"{directory}: question {g}/{t.question} is not in the set's data sources")
        seeds = {p: tuple(derive_seed(tab["model"][i], tab["dataset"][i], t.question, t.trajectory, p, k)
                          for k in range(len(t.L))) for p in ("probe", *OWN_SIDE_SIGNALS)}
        jobs.append(SideJob(prompt=t.prompt, seed_think=t.seed_think, seed_answer=t.seed_answer,
                            probe_seeds=seeds.pop("probe"), lengths=t.L,
                            thinking=t.thinking if stored else None, finished=bool(tab["finished"][i]),
                            task=q.task, n_options=n_options_of(q), field_seeds=seeds))
        qs.append(q)
    return trajs, jobs, qs


def n_options_of(q: Any) -> int:
    """The options a choice question's answer is extracted among, as the probe's grading lane reads them."""
    if q.task == "choice" and hasattr(q, "grade_request"):
        return int(getattr(q.grade_request(""), "n_options", 4))
    return 4


def _grade(grader: str, qs: Sequence[Any], texts: Sequence[str]) -> tuple[str, list[bool]]:
    from otbench.probe.grading import GradeItem, open_grader

    name, grade, close = open_grader(grader)
    try:
        out = grade([GradeItem(q.task, q.reference, text, q) for q, text in zip(qs, texts)]) if texts else []
    finally:
        close()
    return name, [bool(c) for c, _ in out]


def record_signals(directory, ms: Any, *, engine: Any, grader: str = "auto", in_flight: int = 64) -> Any:
    """`ms` with the field signals recorded by the controller's record pass (module docstring)."""
    from otbench.probe.grading import number_answers
    from otbench.probe.tokens import build_vocabulary, compile_format

    ctx = replay_context(directory, ms)
    rows = list(range(ms.num_trajectories))
    _, jobs, qs = side_jobs(directory, ms, rows, ctx["questions"], stored=True)
    tok = engine.tokenizer()
    fmt = compile_format(ctx["family"], tok, build_vocabulary(tok, engine.vocab_size()), boundary_rule=ctx["rule"])
    res = run_side(engine.stream(ctx["sampling"]), fmt, tok, FieldRule(RECORD, 0.0), jobs, b=ctx["b"],
                   thinking_limit=ctx["thinking_limit"], answer_limit=ctx["answer_limit"], in_flight=in_flight,
                   words=ctx["words"])
    flat = [(i, k, r.texts[k]) for i, r in enumerate(res) for k in sorted(r.texts)]
    name, ok = _grade(grader, [qs[i] for i, _, _ in flat], [x for _, _, x in flat])
    correct = {(i, k): c for (i, k, _), c in zip(flat, ok)}
    T, K = ms.L.shape
    sig = {nm: np.zeros((T, K)) for nm in FIELD_NAMES}
    for i, r in enumerate(res):
        n = int(ms.n[i])
        # numbered as the probe numbers its recorded ids: 0 = graded correct (`number_answers`)
        ids = number_answers([r.keys[k] for k in range(n + 1)], [bool(correct[(i, k)]) for k in range(n + 1)])
        for k in range(K):
            j = min(k, n)                     # padding repeats position n
            sig["answer"][i, k] = float(ids[j])
            for nm in ("answer_conf", "hesitation", "answer_tokens"):
                sig[nm][i, k] = float(r.signals[nm][j])
    from otbench.analysis.measurement import SIGNAL_DEFINITIONS

    prov = dict(ms.provenance)
    prov["signals"] = {**dict(prov.get("signals", {})), **SIGNAL_DEFINITIONS}
    prov["field_signals"] = {"generator": RECORDER, "grader": name, "engine": engine.info(),
                             "note": "recorded by the online controller's record pass on the stored "
                                     "thinking (one side request per position), not by the probe"}
    return dataclasses.replace(ms, signals={**dict(ms.signals), **sig}, provenance=prov)


def signals_vs_recorded(ms: Any, rows: Sequence[int], trajs: Sequence[Trajectory],
                        res: Sequence[SideResult]) -> dict[str, Any]:
    """The online side requests' signals against the set's recorded ones, at the positions both read.

    Only positions whose online prefix is the stored one (`thinking[:L(k)]` equal) are compared:
    there the probe and the side request decoded the same prompt with the same seed. ``answer``
    is compared as the rules read it: per trajectory, the partition of the compared positions
    into "no answer" and classes of equal answers (online ids are numbered with nothing graded,
    the recorded ones with 0 = graded correct, so their values differ by design; only two
    different keys both graded correct give another partition).
    """
    pos = same_answer = partition = hes = tokens = compared = 0
    conf_diff = 0.0
    own = {nm: [0, 0.0] for nm in OWN_COMPARED if nm in ms.signals}   # name -> [equal, max |diff|]
    own_pos = 0
    for row, t, r in zip(rows, trajs, res):
        same = [k for k in range(min(len(t.L), len(r.points))) if r.points[k] == t.L[k]
                and tuple(r.thinking[:t.L[k]]) == tuple(t.thinking[:t.L[k]])]
        for k in same:                          # the field methods' own probes, where read
            read = [nm for nm in own if k < len(r.signals[nm]) and r.signals[nm][k] is not None]
            own_pos += bool(read)
            for nm in read:
                a, b = float(r.signals[nm][k]), float(ms.signals[nm][row, k])
                own[nm][0] += a == b
                own[nm][1] = max(own[nm][1], abs(a - b))
        ks = [k for k in sorted(r.keys) if k in set(same)]
        if not ks:
            continue
        on = [r.signals["answer"][k] for k in ks]
        off = [float(ms.signals["answer"][row, k]) for k in ks]
        pos += len(ks)
        compared += 1
        part_on = [(a >= 0, tuple(b == a for b in on)) for a in on]
        part_off = [(a >= 0, tuple(b == a for b in off)) for a in off]
        partition += part_on == part_off
        same_answer += sum(x == y for x, y in zip(part_on, part_off))
        for k in ks:
            hes += r.signals["hesitation"][k] == float(ms.signals["hesitation"][row, k])
            tokens += r.signals["answer_tokens"][k] == float(ms.signals["answer_tokens"][row, k])
            c_on, c_off = r.signals["answer_conf"][k], float(ms.signals["answer_conf"][row, k])
            if c_on == c_on:                    # read only where the method asked for it
                conf_diff = max(conf_diff, abs(c_on - c_off))
    out = {"positions": pos, "answer_classes_equal": same_answer, "hesitation_equal": hes,
           "answer_tokens_equal": tokens, "answer_conf_max_abs_diff": conf_diff,
           "trajectories": compared, "trajectories_same_answer_partition": partition}
    read = {nm: v for nm, v in own.items() if any(x is not None for r in res for x in r.signals[nm])}
    if read:
        out["own_probes"] = {"positions": own_pos,
                             **{nm: {"equal": v[0], "max_abs_diff": v[1]} for nm, v in read.items()}}
    return out


def _net_costs(trajs, res: list[SideResult], k_off, sig_off, paid_off, declared: float) -> dict[str, Any]:
    """The certificate's net costs, online against offline (relative to full thinking), the
    signal tokens OTBench declares against those measured online, and the side requests' work."""
    full = float(sum(t.L[-1] for t in trajs)) or 1.0
    L_off = np.array([t.L[k] for t, k in zip(trajs, k_off)], dtype=np.float64)
    net_on = float(sum(r.net_tokens for r in res))
    net_off = float(L_off.sum() + sig_off.sum())
    measured_signal = float(sum(r.paid_prefill + r.paid_decoded for r in res))
    return dict(
        online_net_rel_cost=net_on / full, offline_net_rel_cost=net_off / full,
        net_cost_gap_pp=100 * (net_on - net_off) / full,
        # OTBench declares the probe prompt's prefill per decision; online it is measured (the
        # suffix not shared with the prefix). Decoded side tokens are recorded on both sides.
        declared_vs_measured={"offline_signal_tokens": float(sig_off.sum()),
                              "online_paid_signal_tokens": measured_signal,
                              "offline_paid_probes": int(paid_off.sum()),
                              "online_paid_probes": int(sum(len(r.paid) for r in res)),
                              "offline_decoded": float(sig_off.sum() - declared * paid_off.sum()),
                              "online_decoded": float(sum(r.paid_decoded for r in res)),
                              "declared_prefill_per_probe": declared,
                              "measured_prefill_per_probe": float(sum(r.paid_prefill for r in res))
                              / max(1, sum(len(r.paid) for r in res))},
        side={"probes": int(sum(r.probes for r in res)),
              "probe_prefill": int(sum(r.probe_prefill for r in res)),
              "probe_decoded": int(sum(r.probe_decoded for r in res)),
              "cached_prompt_tokens": int(sum(r.side_cached for r in res)),
              "think_decoded": int(sum(r.think_decoded for r in res)),
              "discarded": int(sum(r.discarded for r in res))},
    )


def certify_field(directory, ms: Any, offline: Callable[[Any], tuple], *, method: Any, theta: float,
                  engine: Any = None, grader: str = "auto", trajectories: int | None = None,
                  thinking: str = "generate", seed: int = SEED, in_flight: int = 64,
                  replicates: int = REPLICATES, server: Any = None) -> dict[str, Any]:
    """Run `method` at `theta` online on the set's offline split and certify it (module docstring).

    `offline(ms)`: OTBench's point as a dict: ``rows`` of the split, their
    stops ``k``, its net rule's ``signal_tokens`` and ``paid`` decisions per
    row, and the declared ``prefill`` per decision. `engine`: an open
    engine (default: the set's recorded one, started here and closed after;
    `server`: a served engine's address from the user, `engine_config_of`).
    """
    from otbench.analysis.measurement import FIELD_SIGNALS
    from otbench.analysis.methods import METHODS, OWN_SIDE_SIGNALS
    from otbench.probe.engines import open_engine
    from otbench.probe.tokens import build_vocabulary, compile_format

    if thinking not in ("generate", "stored"):
        raise OnlineControlError(f"thinking must be 'generate' or 'stored', got {thinking!r}")
    rule = FieldRule(method, float(theta))
    own = engine is None
    config = engine_config_of(ms.provenance, [], server=server) if own else None  # refuse first
    own_signals = [s for p in rule.probe_kinds if p != "stp" for s in OWN_SIDE_SIGNALS[p]]
    if any(s not in ms.signals for s in own_signals):
        # The record pass decodes otbench's STP probe only; a field method's own probe is the
        # probe stage's to record, with the seeds a certificate replays.
        probes = [p for p in rule.probe_kinds if p != "stp"]
        twin = (f", or certify {rule.name}-stp (its rule on otbench's STP answer probe)"
                if f"{rule.name}-stp" in METHODS else "")
        raise OnlineControlError(
            f"{directory}: {rule.name} reads its own probe, which this set does not record "
            f"(signals {', '.join(s for s in own_signals if s not in ms.signals)}); probe with "
            f"probe.field_probes = {probes!r} in the job{twin}")
    ctx = replay_context(directory, ms)
    if own:
        engine = open_engine(config)
    try:
        need = FIELD_SIGNALS if "stp" in rule.probe_kinds else ()
        source = "recorded by the controller's record pass" if ms.provenance.get("field_signals", {}).get(
            "generator") == RECORDER else "set"
        if any(nm not in ms.signals for nm in need):
            ms = record_signals(directory, ms, engine=engine, grader=grader, in_flight=in_flight)
            source = "recorded here by the controller's record pass"
        point = offline(ms)
        cut = slice(None) if trajectories is None else slice(0, int(trajectories))
        rows, k_off, sig_off, paid_off = (np.asarray(point[x])[cut] for x in ("rows", "k", "signal_tokens", "paid"))
        declared = float(point.get("prefill", 0))
        trajs, jobs, qs = side_jobs(directory, ms, rows.tolist(), ctx["questions"], stored=thinking == "stored")
        tok = engine.tokenizer()
        fmt = compile_format(ctx["family"], tok, build_vocabulary(tok, engine.vocab_size()),
                             boundary_rule=ctx["rule"])
        res: list[SideResult] = run_side(engine.stream(ctx["sampling"]), fmt, tok, rule, jobs, b=ctx["b"],
                                         thinking_limit=ctx["thinking_limit"],
                                         answer_limit=ctx["answer_limit"], in_flight=in_flight,
                                         words=ctx["words"])
        texts = tok.batch_decode([list(r.answer_ids) for r in res], skip_special_tokens=True)
        info = engine.info()
        invariance = batch_invariance(ms.provenance, config if config is not None else info.get("config"))
    finally:
        if own:
            engine.close()
    grader_name, correct = _grade(grader, qs, texts)
    online = [OnlineResult(r.stop_length, r.position, r.thinking, r.answer_ids,
                           r.thinking == t.thinking[:len(r.thinking)] and
                           (r.stop_length is not None or r.thinking == t.thinking))
              for r, t in zip(res, trajs)]
    P = np.asarray(ms.probes, dtype=np.float64)[rows]
    acc_off = np.asarray(ms.C, dtype=np.float64)[rows, k_off] / P
    cert = compare(trajs, online, k_off, acc_off, np.array(correct, dtype=bool), probes=P,
                   design=design_of(ms, rows), seed=seed, replicates=replicates, batch_invariance=invariance)
    cert.update(
        method=rule.name, theta=float(theta), grader=grader_name, online=True, controller="side requests",
        thinking=thinking, offline_signals=source, sampling=ctx["sampling"].as_dict(),
        greedy=ctx["sampling"].temperature == 0.0, engine=info if not own else {"kind": "recorded", **info},
        **_net_costs(trajs, res, k_off, sig_off, paid_off, declared),
    )
    if rule.probes:
        cert["signals_vs_recorded"] = signals_vs_recorded(ms, rows.tolist(), trajs, res)
    for rec, r, c in zip(cert["per_trajectory"], res, correct):
        rec.update(online_correct=bool(c), stopped=r.stop_length is not None, net_tokens=int(r.net_tokens),
                   probes=int(r.probes))
    return cert


def signals_line(cert: Mapping[str, Any]) -> str:
    """One line: the side requests' signals against the recorded ones (`signals_vs_recorded`)."""
    d = cert.get("signals_vs_recorded")
    if not d:
        return "signals: none read (no side requests)"
    own = d.get("own_probes")
    if own and not d["positions"]:
        parts = [f"{nm} {v['equal']}/{own['positions']}" + (f" (max |diff| {v['max_abs_diff']:.2g})"
                                                           if nm == "deer_conf" else "")
                 for nm, v in own.items() if nm != "positions"]
        return (f"signals vs recorded at {own['positions']} positions on the stored prefix (the "
                f"method's own probe): equal {', '.join(parts)}")
    n = d["positions"]
    return (f"signals vs recorded at {n} positions on the stored prefix: answer classes equal "
            f"{d['answer_classes_equal']}/{n}, hesitation {d['hesitation_equal']}/{n}, answer_tokens "
            f"{d['answer_tokens_equal']}/{n}, answer_conf max |diff| {d['answer_conf_max_abs_diff']:.2g}; "
            f"same answer partition in {d['trajectories_same_answer_partition']} of {d['trajectories']} "
            f"trajectories")


def net_line(cert: Mapping[str, Any]) -> str:
    """One line of the net cost: online (side requests included) against OTBench's net point."""
    d = cert["declared_vs_measured"]
    return (f"net cost: online {100 * cert['online_net_rel_cost']:.1f}% vs OTBench "
            f"{100 * cert['offline_net_rel_cost']:.1f}% (gap {cert['net_cost_gap_pp']:.1f} pp; probes paid "
            f"online {d['online_paid_probes']}, decisions paid by OTBench {d['offline_paid_probes']}, "
            f"decoded side tokens "
            f"{d['online_decoded']:.0f} vs {d['offline_decoded']:.0f}, prefill measured "
            f"{d['measured_prefill_per_probe']:.1f} vs declared {d['declared_prefill_per_probe']:.0f} per probe; "
            f"{cert['side']['probes']} side requests)")
