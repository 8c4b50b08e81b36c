"""Certify ThinkBrake online at three θ on a probe run of the embedded model, and time the controller.

    python benchmarks/online_certify.py --set DIR [--trajectories N] [--tokens 64]

DIR is a measurement set written by `otbench probe run` (token tables
included), e.g. of `artifacts/jobs/demo.toml`. ThinkBrake is fit on its
train split (the θ values are the 25/50/75 % quantiles of the train
margins at the boundaries where a stop is asked), the test split is
replayed online with the stored seeds (`otbench online certify` at each
θ, one engine with the controller loaded), and the per-trajectory stop
positions are compared with OTBench's offline walk; each θ's certificate
(verdict, paired intervals) and its sources of disagreement are printed.

The offline walk reads `--offline-signal`: by default `margin_own`, the
margin the probe recorded in the model's own context (after the boundary
token as written: what the processor reads online), when the set has it;
`margin` is the probe's margin after the boundary token is replaced (the
paper's rule), which the online controller cannot see.

Overhead: the same engine generates the same prompts for `--tokens` tokens
(end-of-sequence ignored, so both sides decode exactly the same number of
tokens) once plainly and once under a controller that decides at every
block end but never stops (θ below every margin); the ratio of their
tokens/s is the cost of the per-step control. The last line is the
certificate summed over the three θ (`--smoke`: the median θ alone).
"""

import argparse
import sys
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", required=True, help="a probe measurement set of the embedded model")
    ap.add_argument("--trajectories", type=int, default=None, help="replay only the first N test trajectories")
    ap.add_argument("--tokens", type=int, default=64, help="tokens per request in the overhead run")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions of the overhead run")
    ap.add_argument("--smoke", action="store_true",
                    help="the smoke size the test suite runs: the median θ only, 2 test trajectories, "
                         "8-token overhead run, one repeat")
    ap.add_argument("--offline-signal", choices=("margin_own", "margin"), default=None,
                    help="recorded signal of the offline walk (default: margin_own when recorded)")
    a = ap.parse_args()
    if a.smoke:
        a.trajectories, a.tokens, a.repeat = a.trajectories or 2, 8, 1

    from otbench.analysis import load
    from otbench.analysis.bench import assign_splits, stop_positions
    from otbench.probe.config import Sampling, load_family
    from otbench.probe.engines import GenRequest, open_engine
    from otbench.probe.online import PROCESSOR, certificate_line, certify_set, disagreement_line, request_args
    from otbench.probe.online import engine_config_of

    ms = load(a.set)
    if not (ms.split >= 0).any():
        ms = assign_splits(ms)
    train = ms.split == 0
    n = ms.n.astype(np.int64)
    ask = np.arange(ms.L.shape[1])[None, :] < n[:, None]
    sig = a.offline_signal or ("margin_own" if "margin_own" in ms.signals else "margin")
    margins = np.asarray(ms.signals[sig])[train][ask[train]]
    thetas = [float(x) for x in np.quantile(margins, [0.5] if a.smoke else [0.25, 0.5, 0.75])]
    prov = ms.provenance
    engine = open_engine(engine_config_of(prov, [PROCESSOR]))
    try:
        certs = []
        for theta in thetas:
            rows, k, m = stop_positions(ms, "thinkbrake-onectx", theta, options={"signal": sig})
            if a.trajectories is not None:
                rows, k = rows[:a.trajectories], k[:a.trajectories]
            cert = certify_set(a.set, ms, rows, k, method=m, theta=theta, engine=engine, offline_signal=sig)
            certs.append(cert)
            sh = cert.get("signal_shift") or {}
            rr = cert.get("own_context_reread")
            if rr is not None:
                print(f"theta {theta:+.3f}: recorded margin_own vs a fresh own-context read: "
                      f"{rr['equal']}/{rr['boundaries']} bitwise equal, max |diff| {rr['max_abs']}", flush=True)
            print(f"theta {theta:+.3f} (offline walk on {sig}): equal {cert['equal']}/{cert['trajectories']} (faithful replays "
                  f"{cert['faithful']}; equal to the offline walk on the online-context signal "
                  f"{cert.get('equal_online_context')}), acc online {100 * cert['online_acc']:.1f}% vs offline "
                  f"{100 * cert['offline_acc']:.1f}%, rel cost online {100 * cert['online_rel_cost']:.1f}% vs "
                  f"offline {100 * cert['offline_rel_cost']:.1f}%, signal shift mean {sh.get('mean')} "
                  f"max |.| {sh.get('max_abs')} over {sh.get('boundaries')} boundaries", flush=True)
            print("  " + certificate_line(cert), flush=True)
            print("  " + disagreement_line(cert), flush=True)

        # -- overhead: plain vs controlled-but-never-stopping, same engine, same token counts --------
        fam = load_family(prov["family"]["name"])
        from otbench.analysis.measurement import load_table

        prompts = [list(p) for p in load_table(a.set, "tokens").column("prompt").to_pylist()[:8]]
        greedy = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=0.0)
        args = request_args("thinkbrake-onectx", -1e30, fam.name, boundary=prov.get("boundary_rule", "vocab"))
        plain = [GenRequest(p, 1, 0, a.tokens, (), ignore_eos=True) for p in prompts]
        ctl = [r._replace(extra_args=args) for r in plain]
        engine.generate(plain[:1], greedy)                           # warm-up
        t_plain, t_ctl = [], []
        for _ in range(a.repeat):
            for reqs, acc in ((plain, t_plain), (ctl, t_ctl)):
                t0 = time.perf_counter()
                out = engine.generate(reqs, greedy)
                acc.append(time.perf_counter() - t0)
                assert all(len(c[0].token_ids) == a.tokens for c in out)
        tok = a.tokens * len(prompts)
        tps_plain, tps_ctl = tok / min(t_plain), tok / min(t_ctl)
        overhead = 100 * (tps_plain - tps_ctl) / tps_plain
        print(f"overhead: plain {tps_plain:.1f} tokens/s, controlled {tps_ctl:.1f} tokens/s "
              f"(best of {a.repeat}, {len(prompts)} requests x {a.tokens} tokens)", flush=True)
    finally:
        engine.close()
    verdicts = [c["verdict"] for c in certs]
    # over the θ values: rejected if any is, certified only if all are, else not certified
    total = {"equal": sum(c["equal"] for c in certs), "trajectories": sum(c["trajectories"] for c in certs),
             "faithful": sum(c["faithful"] for c in certs),
             "acc_gap_pp": float(np.mean([c["acc_gap_pp"] for c in certs])),
             "cost_gap_pp": float(np.mean([c["cost_gap_pp"] for c in certs])),
             "verdict": "rejected" if "rejected" in verdicts else
             "certified" if all(v == "certified" for v in verdicts) else "not certified",
             "reasons": sorted({r.split(":")[0] for c in certs for r in c["reasons"]})}
    print(certificate_line(total, overhead))


if __name__ == "__main__":
    sys.exit(main())
