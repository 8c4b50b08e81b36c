"""Driver memory and overhead at paper shape, on a SYNTHETIC instant engine (issue 13).

Runs the full probe driver (`run_job`: journal, grading lane, streaming
measurement-set writer) with a SYNTHETIC engine that returns seeded random
tokens instantly, so everything measured is the driver's own cost. Units
have the paper's shape: ~33 positions (thinking of 32 x b tokens, a
boundary token every b), P = 16 probes per position, ~1,400 answer tokens
each. Each size runs in a fresh process (peak RSS is per process).

Goals: peak RSS at 8N units <= 1.2 x at N units (memory does not grow with
the run); driver time per probe request (one answer sample) <= 100 us, the
CPU time of the thread running the job, final assembly included; decoding
and grading the answers run beside it in the grading lane, file writes and
Parquet encoding in writer threads (they release the GIL): those are
reported separately, with the whole process's CPU time. The synthetic
engine returns Python ints, as vLLM does, so the driver pays the same
conversion to int32 arrays it pays on a GPU.
Grading: the built-in minimal grader (in the grading lane's thread); the
random answers hold no boxed integer, so each one is decoded and searched.

Last line: `probe_scale: peak RSS A MiB at N units, B MiB at 8N units; driver X us per probe request`.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYNTHETIC_KIND = "synthetic"
IN_FLIGHT = 4
"""Units in flight (the default N): both sizes run at this bound, so their memory can be compared."""
ENGINE_CPU = [0.0]
"""CPU seconds spent inside the synthetic engine (drawing tokens): not the driver's cost."""


class SyntheticEngine:
    """SYNTHETIC engine: seeded random ids, instantly. Benchmarks only; nothing it writes is a measurement."""

    name = SYNTHETIC_KIND

    def __init__(self, config):
        t = time.thread_time()               # building the tokenizer is the engine's start, not the driver's
        try:
            self._start(config)
        finally:
            ENGINE_CPU[0] += time.thread_time() - t

    def _start(self, config):
        import numpy as np

        from otbench.probe.engines._tiny import build_tokenizer

        self._np = np
        self.config = config
        self._tok = build_tokenizer(seed=0)
        self._V = len(self._tok)
        self._end = self._tok.convert_tokens_to_ids("</think>")
        self._nl = self._tok.encode(".\n\n", add_special_tokens=False)[-1]
        self._specials = set(self._tok.all_special_ids) | {self._end}
        self.think_tokens = int(os.environ.get("OTBENCH_SYNTH_THINK", "8192"))
        self.b = int(os.environ.get("OTBENCH_SYNTH_B", "256"))

    def tokenizer(self):
        return self._tok

    def vocab_size(self) -> int:
        return self._V

    def capacity(self) -> int:
        return 8

    def _ordinary(self, rng, n):
        ids = rng.integers(20, self._V, size=n)
        ids[ids == self._nl] = 21
        return ids

    def _complete(self, r):
        from otbench.probe.engines import Completion

        out = []
        for j in range(r.n):
            rng = self._np.random.default_rng(int(r.seed) + j)
            if r.max_tokens > self.think_tokens:               # a think request: thinking, marker, answer
                th = self._ordinary(rng, self.think_tokens)
                th[self.b - 1::self.b] = self._nl              # a step boundary every b tokens
                ans = self._ordinary(rng, min(1400, r.max_tokens - self.think_tokens - 1))
                ids = th.tolist() + [self._end] + ans.tolist()
            else:
                ids = self._ordinary(rng, r.max_tokens).tolist()
            out.append(Completion(tuple(ids), None))
        return out

    def generate(self, requests, sampling):
        t = time.thread_time()
        out = [self._complete(r) for r in requests]
        ENGINE_CPU[0] += time.thread_time() - t
        return out

    def signals(self, contexts, token_id):
        from otbench.probe.engines import Signal
        return [Signal(-5.0 - (len(c) % 7) * 0.1, -0.5, 21) for c in contexts]

    def stream(self, sampling):
        from otbench.probe.engines import BatchStream
        return BatchStream(self, sampling)

    def choice_logprobs(self, contexts, token_ids):
        raise NotImplementedError("the synthetic engine serves the probe loop only")

    def cache_stats(self):
        return None

    def info(self):
        return {"engine": "synthetic (instant seeded random tokens; benchmark only)", "device": "none",
                "config": self.config.as_dict()}

    def close(self) -> None:
        pass


JOB = """
[model]
path = "{model}"
family = "qwen3-thinking"
id = "synthetic-engine"
[engine]
kind = "{kind}"
max_model_len = 16384
[data]
source = "arithmetic"
n = {n}
[probe]
R = 1
P = 16
b = {b}
thinking_limit = {think}
answer_limit = 1400
units_in_flight = {in_flight}
[grader]
kind = "minimal"
"""


def one_size(units: int, work: Path) -> dict:
    """Run `units` units in this process; return peak RSS, wall time and probe requests."""
    from otbench.probe.engines import _interface
    from otbench.probe.stp import load_job, run_job

    _interface.ENGINES[SYNTHETIC_KIND] = f"{__name__}:SyntheticEngine"
    model = work / "synthetic-model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"otbench": "SYNTHETIC engine: no weights, benchmark only"}))
    think = int(os.environ.get("OTBENCH_SYNTH_THINK", "8192"))
    cfg = work / "job.toml"
    cfg.write_text(JOB.format(model=model, kind=SYNTHETIC_KIND, n=units, b=256, think=think + 1,
                              in_flight=IN_FLIGHT))
    job = load_job(cfg)
    t, cpu, proc = time.perf_counter(), time.thread_time(), time.process_time()
    s = run_job(job, work / "set", progress=False, log=lambda m: None, journal=work / "journal")
    wall, cpu = time.perf_counter() - t, time.thread_time() - cpu - ENGINE_CPU[0]
    proc = time.process_time() - proc - ENGINE_CPU[0]
    probes = s.manifest["tables"]["probes"]["rows"]
    return {"units": units, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "wall_s": wall, "driver_cpu_s": cpu, "process_cpu_s": proc,
            "grading_s": s.run["grading_seconds"],
            "engine_cpu_s": ENGINE_CPU[0],
            "probe_requests": probes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=IN_FLIGHT, help="N (the second run has 8N units)")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one is not None:
        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(one_size(a.one, Path(d))))
        return 0
    res = []
    for n in (a.units, 8 * a.units):
        r = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True)
        if r.returncode:
            sys.stderr.write(r.stderr[-3000:])
            return 1
        res.append(json.loads(r.stdout.strip().splitlines()[-1]))
        r0 = res[-1]
        print(f"SYNTHETIC engine, {n} units: peak RSS {r0['rss_mib']:.0f} MiB, wall {r0['wall_s']:.1f} s, "
              f"driver thread CPU {r0['driver_cpu_s']:.1f} s (+ synthetic engine {r0['engine_cpu_s']:.1f} s), grading lane {r0['grading_s']:.1f} s, "
              f"{r0['probe_requests']} probe requests", flush=True)
    big = res[1]
    x_us = 1e6 * big["driver_cpu_s"] / big["probe_requests"]
    print(f"(a probe request is one answer sample. Driver = CPU time of the thread that runs the run: "
          f"admission, segmentation, probe prompts, stream bookkeeping, journal commits, final assembly "
          f"and gathering the token tables. Not in it: decoding + grading the answers, which run in the "
          f"grading lane beside it ({1e6 * big['grading_s'] / big['probe_requests']:.0f} us per answer "
          f"here, one lane), the journal's file writes and the Parquet encoding (writer threads, GIL "
          f"released), and the engine, its start included. Whole process less the engine: "
          f"{1e6 * big['process_cpu_s'] / big['probe_requests']:.0f} us per probe request)")
    print(f"probe_scale: peak RSS {res[0]['rss_mib']:.0f} MiB at {a.units} units, "
          f"{big['rss_mib']:.0f} MiB at {8 * a.units} units; driver {x_us:.0f} us per probe request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
