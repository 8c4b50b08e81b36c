"""Certify the field methods run by the side-request controller, and time its chunked generation.

    python benchmarks/online_side_certify.py --set DIR [--trajectories N] [--thinking generate|stored]

DIR is a measurement set written by `otbench probe run` (token tables
included) of the embedded model. One engine (the set's recorded one):
its field signals are taken from the set, or recorded once by the
controller's record pass on the stored thinking (said in the output);
then each method is certified at one θ (`otbench online certify
--method M`): Dynasor-CoT with a window of 2, answer consistency with 1,
DEER at the median of the recorded train confidences, budget forcing at the
median train thinking length -- Dynasor-CoT and DEER on their own probes
where the set records them (``probe.field_probes``), and on otbench's STP
probe (``dynasor-cot-stp``, ``deer-stp``). Per method: stops equal to OTBench's offline
walk, accuracy and gross cost gaps, and the net cost (side requests
included) against OTBench's net point.

Overhead: the controller decodes thinking as one request per step
(prefix-cached continuations) so it can decide between steps. The same
test trajectories are decoded as one plain request each, then under the
controller with budget forcing at an unreachable cap (every step a
continuation, no side request, one-token answers); the ratio of thinking
tokens per second is that cost. The last line sums the certificates.
"""

import argparse
import sys
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", required=True, help="a probe measurement set of the embedded model")
    ap.add_argument("--trajectories", type=int, default=None, help="only the first N test trajectories")
    ap.add_argument("--thinking", choices=["generate", "stored"], default="generate")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions of the overhead run")
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: 2 test trajectories, one repeat")
    a = ap.parse_args()
    if a.smoke:
        a.trajectories, a.repeat = a.trajectories or 2, 1

    from otbench.analysis import load
    from otbench.analysis.bench import assign_splits, offline_point
    from otbench.probe.config import load_family
    from otbench.probe.engines import GenRequest, open_engine
    from otbench.probe.online import (
        FieldRule,
        certificate_line,
        disagreement_line,
        certify_field,
        engine_config_of,
        net_line,
        record_signals,
        replay_context,
        run_side,
        side_jobs,
        signals_line,
    )
    from otbench.probe.tokens import build_vocabulary, compile_format

    ms = load(a.set)
    if not (ms.split >= 0).any():
        ms = assign_splits(ms)
    engine = open_engine(engine_config_of(ms.provenance, []))
    certs = []
    try:
        if "answer_conf" not in ms.signals:
            t0 = time.perf_counter()
            ms = record_signals(a.set, ms, engine=engine)
            print(f"field signals: recorded by the controller's record pass on the stored thinking "
                  f"({ms.num_trajectories} trajectories, {time.perf_counter() - t0:.0f} s)", flush=True)
        else:
            print("field signals: from the set", flush=True)
        train = ms.split == 0
        n = ms.n.astype(np.int64)
        ask = (np.arange(ms.L.shape[1])[None, :] >= 1) & (np.arange(ms.L.shape[1])[None, :] < n[:, None])
        conf = np.asarray(ms.signals["answer_conf"])[train][ask[train]]
        cap = float(np.median(ms.L[np.arange(ms.num_trajectories), n][train]))
        plan = [("dynasor-cot-stp", 2.0), ("answer-consistency", 1.0),
                ("deer-stp", float(np.median(conf)) if conf.size else 0.5), ("budget-forcing", cap)]
        # Dynasor-CoT and DEER on their own probes, where the probe stage recorded them
        if "dynasor_window" in ms.signals:
            plan.insert(0, ("dynasor-cot", 2.0))
        if "deer_conf" in ms.signals:
            own = np.asarray(ms.signals["deer_conf"])[train][ask[train]]
            plan.insert(1, ("deer", float(np.median(own)) if own.size else 0.5))
        for method, theta in plan:
            cert = certify_field(a.set, ms, lambda m, mm=method, th=theta: offline_point(m, mm, th),
                                 method=method, theta=theta, engine=engine, trajectories=a.trajectories,
                                 thinking=a.thinking)
            certs.append(cert)
            print(f"{method} theta {theta:g}: " + certificate_line(cert).split(": ", 1)[1]
                  + f"; faithful {cert['faithful']}/{cert['trajectories']}", flush=True)
            print("  " + net_line(cert), flush=True)
            print("  " + signals_line(cert), flush=True)
            print("  " + disagreement_line(cert), flush=True)

        # -- overhead: one request per trajectory vs one per step ---------------------------
        ctx = replay_context(a.set, ms)
        rows = np.flatnonzero(ms.split == 2)[:a.trajectories]
        _, jobs, _ = side_jobs(a.set, ms, rows.tolist(), ctx["questions"], stored=False)
        tok = engine.tokenizer()
        fmt = compile_format(load_family(ms.provenance["family"]["name"]), tok,
                             build_vocabulary(tok, engine.vocab_size()), boundary_rule=ctx["rule"])
        plain = [GenRequest(j.prompt, 1, j.seed_think, ctx["thinking_limit"], fmt.think_stop_ids) for j in jobs]
        t_plain, t_side, tok_plain, tok_side = [], [], 0, 0
        for _ in range(a.repeat):
            # plain: the same engine stream, one request per trajectory
            t0 = time.perf_counter()
            stream = engine.stream(ctx["sampling"])
            for i, r in enumerate(plain):
                stream.submit(i, r)
            out = []
            while stream.in_flight():
                out.extend(stream.poll())
            t_plain.append(time.perf_counter() - t0)
            tok_plain = sum(len(c[0].token_ids) for _, c in out)
            t0 = time.perf_counter()
            res = run_side(engine.stream(ctx["sampling"]), fmt, tok, FieldRule("budget-forcing", 1e12), jobs,
                           b=ctx["b"], thinking_limit=ctx["thinking_limit"], answer_limit=1)
            t_side.append(time.perf_counter() - t0)
            tok_side = sum(len(r.thinking) for r in res)
        tps_plain, tps_side = tok_plain / min(t_plain), tok_side / min(t_side)
        overhead = 100 * (tps_plain - tps_side) / tps_plain
        steps = sum(len(j.lengths) for j in jobs)
        print(f"overhead: plain {tps_plain:.1f} thinking tokens/s, one request per step {tps_side:.1f} "
              f"(best of {a.repeat}; {len(jobs)} trajectories, {steps} requests; one-token answers "
              f"included on the controller's side)", flush=True)
    finally:
        engine.close()
    E, T = sum(c["equal"] for c in certs), sum(c["trajectories"] for c in certs)
    dec = all(c["declared_vs_measured"]["online_decoded"] == c["declared_vs_measured"]["offline_decoded"]
              for c in certs)
    gap = float(np.mean([c["net_cost_gap_pp"] for c in certs]))
    print(f"online_side_certify: stop position equal in {E} of {T} trajectories ({len(certs)} methods), "
          f"net cost gap {gap:.1f} pp (side tokens decoded equal: {'yes' if dec else 'no'}), "
          f"overhead {overhead:.1f}% tokens/s vs plain generate")


if __name__ == "__main__":
    sys.exit(main())
