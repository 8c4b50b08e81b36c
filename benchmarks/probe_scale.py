"""Driver memory and overhead at paper shape and the default in-flight bounds, on a SYNTHETIC engine core.

What runs is the real probe path of a GPU run: `run_job` (journal, grading
lane, streaming measurement-set writer), the probe loop with its default
in-flight bounds, and the vLLM adapter itself (`VLLMEngine` request
building, `VLLMStream` submission and polling, output parsing), with vLLM's
own `SamplingParams`, `TokensPrompt`, `RequestOutput`, `CompletionOutput`
and `Logprob` types. Only what needs a GPU is replaced: vLLM's
`LLMEngine` (front end + engine core) by `StandInCore`, which returns
SYNTHETIC seeded random tokens at once. It reports `max_num_seqs = 1024`
(an H200-sized engine), so the loop runs at the bounds such an engine gets
by default (`probe/stp/_bounds.py`: 256 units, 128 of them sampling while
the engine is full, 2,048 probe-phase sequences; it counts its unfinished
sequences as vLLM's `get_num_unfinished_requests` does, which the loop's
bound reads). It reports the KV cache of Qwen3-4B on one H200 (the
planner's device model: `KV_TOKENS`) in 16-token blocks, so the driver
admits by its KV ledger (`probe/stp/_kv.py`) as on that GPU. Every
stand-in answer runs to the 1,400-token limit, so the ledger projects each
answer sample to hold ~1,400 tokens until it ends (`KVLedger.peak`; before
any has finished, its `max_tokens`): the cache (777 k tokens) binds at
about 560 answer samples in flight, before the 2,048-sequence bound does,
as it would on that GPU with answers that long. The answer ids in flight
are then bounded by the cache's tokens, whichever bound binds.

A position's first probe answer comes back with its tokens' log-probabilities (its answer
confidence asks `logprobs=0`; the other P - 1 answers go as a second
request without them) in the flat form the adapter asks for
(`FlatLogprobs`), as fresh lists like those vLLM's front end holds. Per scheduler step it finishes the first 1,024
sequences of its FCFS queue, and it holds what vLLM's engine core holds
per queued sequence (a request of n samples fanned out into n children,
each holding as many bytes per prompt id as `v1/request.Request` does,
~53), so peak RSS includes the engine core's host memory for the work in
flight (in vLLM that is another process; here it is counted with the
driver's, as bytes the driver's garbage collector does not walk).

Units have the paper's shape: 26 positions (thinking of 12,000 tokens, a
step boundary every b = 480), P = 16 probes per position, 1,400-token
answers: 17 engine sequences per position, ~6,200-token probe prefixes
on average. Sizes: N and 8N units, each in a fresh process (peak RSS is
per process). N = 32 by default: both sizes run at the KV cache's bound
and, the engine being instant so that grading is the slowest stage, at
the bound on units in their probe phase (32, `holding_bound`); 8N = 256
units also fill the bound on units in flight. 8N is ~106 k probe requests
(~150 M answer ids), about a minute on two shared cores, most of it the
grading lane.

X = CPU time of the thread that runs the job, less the stand-in core's own
CPU time, per probe request (one answer sample) of the 8N run. Decoding and
grading (grading lane), file writes and Parquet encoding (writer threads)
run beside it and are reported separately.

Last line: `probe_scale: peak RSS A MiB at N units, B MiB at 8N units; driver X us per probe request; in flight Q requests`
(Q: the most probe-phase engine sequences in flight at once, 8N run: the KV cache's bound).
"""

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

SYNTHETIC_KIND = "synthetic-vllm-core"
MAX_NUM_SEQS = 1024
"""The stand-in's scheduler batch: vLLM's default `max_num_seqs` on an H200-class GPU."""
THINK_TOKENS, B, ANSWER = 12_000, 480, 1400
CORE_BYTES_PER_ID = 53
"""Engine-core host bytes per prompt id of a sequence (the figure of `otbench.probe.stp._bounds`)."""
KV_TOKENS = 777_000
"""KV-cache tokens of Qwen3-4B on one H200 at vLLM's defaults, as `otbench plan` models it
(`probe/plan/_throughput.py`: 0.9 x 141 GB less 7.5 GiB of weights and 4 GiB, at 144 KiB a token)."""
CORE_CPU = [0.0]
"""Thread CPU seconds spent inside the stand-in core (drawing tokens, copying prompts): not driver cost."""
PEAK = [0]
"""Most probe-phase sequences in flight (read from the loop's driver at the end)."""


class _Timed:
    def __enter__(self):
        self.t = time.thread_time()

    def __exit__(self, *exc):
        CORE_CPU[0] += time.thread_time() - self.t


class StandInCore:
    """SYNTHETIC stand-in for vLLM's `LLMEngine`: `add_request` / `step`, tokens at once (benchmark only)."""

    def __init__(self, tok, end_ids, nl_id, signal_default):
        import numpy as np
        from vllm.logprobs import FlatLogprobs, Logprob
        from vllm.outputs import CompletionOutput, RequestOutput

        self._np, self._Logprob, self._Completion, self._Output = np, Logprob, CompletionOutput, RequestOutput
        self._Flat = FlatLogprobs
        self._V = len(tok)
        self._end, self._nl = list(end_ids), nl_id
        self.waiting: collections.deque = collections.deque()
        self.unfinished = 0
        self.vllm_config = _NS(scheduler_config=_NS(max_num_seqs=MAX_NUM_SEQS),
                               cache_config=_NS(kv_cache_size_tokens=KV_TOKENS, block_size=16))
        self.model_config = _NS(hf_config=_NS(eos_token_id=tok.eos_token_id))
        rng = np.random.default_rng(0)
        pool = rng.integers(20, self._V, size=1 << 20)
        pool[pool == nl_id] = 21
        self._pool = array("i", pool.astype(np.int32).tobytes())
        self._lp_pool = array("d", (-rng.random(1 << 16) * 4).tobytes())
        self._off = 0

    def _fresh(self, n: int) -> list:
        """n SYNTHETIC ids as fresh Python ints (what vLLM's msgpack decoding hands the front end)."""
        if self._off + n > len(self._pool):
            self._off = (self._off * 7919 + 13) % 1024
        out = self._pool[self._off:self._off + n].tolist()
        self._off += n
        return out

    def _logprobs(self, ids: list, params):
        """What vLLM's front end hands back for `logprobs=0` (the sampled token's log-probability per
        position; SYNTHETIC values), in the form the request asked for: `FlatLogprobs` (four fresh lists,
        `flat_logprobs=True`) or one dict and `Logprob` per position."""
        if params.logprobs is None:
            return None
        n = len(ids)
        k = (self._off * 31) % (len(self._lp_pool) - n) if n < len(self._lp_pool) else 0
        vals = self._lp_pool[k:k + n].tolist()
        if getattr(params, "flat_logprobs", False):
            return self._Flat(start_indices=list(range(n)), end_indices=list(range(1, n + 1)), token_ids=list(ids),
                              logprobs=vals, ranks=[1] * n, decoded_tokens=[None] * n)
        return [{t: self._Logprob(v, 1)} for t, v in zip(ids, vals)]

    def add_request(self, request_id, prompt, params):
        with _Timed():
            ids = prompt["prompt_token_ids"]
            # vLLM fans n > 1 out into n child requests; each reaches the engine core (its own
            # process) on its own and becomes a `Request` holding its prompt ids as fresh ints and a
            # copy of them (`_all_token_ids`), plus block hashes: ~53 B per id (`_bounds`). Held here
            # as that many written bytes, so the RSS counts them while this process's garbage
            # collector does not walk them (it would not in vLLM: they live in the core process).
            packed = array("i", ids).tobytes()
            children = [packed * (CORE_BYTES_PER_ID // 4 + 1) for _ in range(params.n)]
            self.waiting.append((request_id, ids, params, children))
            self.unfinished += params.n

    def get_num_unfinished_requests(self):
        """Sequences not finished (vLLM counts each child of an n-sample request; all finish at once here)."""
        return self.unfinished

    def step(self):
        with _Timed():
            out, budget = [], MAX_NUM_SEQS
            while self.waiting and (budget >= self.waiting[0][2].n or budget == MAX_NUM_SEQS):
                rid, ids, params, children = self.waiting.popleft()
                budget -= params.n
                self.unfinished -= params.n
                out.append(self._finish(rid, ids, params))
            return out

    def _finish(self, rid, ids, params):
        C = self._Completion
        if params.logprob_token_ids and params.max_tokens == 1:           # a signal request
            sig = int(params.logprob_token_ids[0])
            other = 21 if sig != 21 else 22
            lp = {sig: self._Logprob(-5.0 - (len(ids) % 7) * 0.1), other: self._Logprob(-0.5)}
            outs = [C(0, "", [other], None, [lp], finish_reason="length")]
        elif params.max_tokens > ANSWER:                                  # a think request
            th = self._fresh(THINK_TOKENS)
            th[B - 1::B] = [self._nl] * len(th[B - 1::B])                  # a step boundary every B
            outs = [C(0, "", th + self._end + self._fresh(min(ANSWER, params.max_tokens - THINK_TOKENS - 1)),
                      None, None, finish_reason="length")]
        else:
            outs = []
            for j in range(params.n):
                ids_j = self._fresh(params.max_tokens)
                outs.append(C(j, "", ids_j, None, self._logprobs(ids_j, params), finish_reason="length"))
        return self._Output(rid, None, ids, None, outs, True)

    def shutdown(self):
        self.waiting.clear()


class _NS:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _engine_class():
    from otbench.probe.engines._vllm import VLLMEngine

    class StandInVLLMEngine(VLLMEngine):
        """The real vLLM adapter over `StandInCore` (SYNTHETIC tokens; nothing it writes is a measurement)."""

        name = SYNTHETIC_KIND

        def __init__(self, config):
            from otbench.probe.engines._tiny import build_tokenizer
            from vllm import SamplingParams
            from vllm.inputs import TokensPrompt

            with _Timed():                     # the engine's start, not driver work
                tok = build_tokenizer(seed=0)
            self._SamplingParams, self._TokensPrompt = SamplingParams, TokensPrompt
            self.config, self._device, self._version, self._tok = config, "cuda", "stand-in", tok
            # as `VLLMEngine.__init__` decides it: the flat log-probability form where vLLM has it
            self._flat = "flat_logprobs" in (getattr(SamplingParams, "__struct_fields__", None) or ())
            self._vocab = len(tok)
            end = tok.encode("</think>", add_special_tokens=False)
            nl = tok.encode(".\n\n", add_special_tokens=False)[-1]
            self._llm = _NS(llm_engine=StandInCore(tok, end, nl, None), get_metrics=lambda: [])

        def info(self):
            return {"engine": "SYNTHETIC stand-in engine core under the vLLM adapter (benchmark only)",
                    "device": "none", "config": self.config.as_dict()}

    return StandInVLLMEngine


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
answer_limit = {answer}
[grader]
kind = "minimal"
"""


def one_size(units: int, work: Path) -> dict:
    """Run `units` units in this process at the default bounds; peak RSS, times, requests."""
    from otbench.descriptors import ENGINE_SPECS, EngineSpec
    from otbench.probe.stp import _loop, load_job, run_job

    global StandInVLLMEngine
    StandInVLLMEngine = _engine_class()
    ENGINE_SPECS.register(EngineSpec(SYNTHETIC_KIND, f"{__name__}:StandInVLLMEngine",
                                     note="SYNTHETIC engine core, benchmark only"))
    init = _loop._Driver.__init__

    def spy(self, *a, **kw):                    # read the loop's own peak of sequences in flight
        init(self, *a, **kw)
        drivers.append(self)
    drivers: list = []
    _loop._Driver.__init__ = spy
    model = work / "synthetic-model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"otbench": "SYNTHETIC engine: no weights, benchmark only"}))
    cfg = work / "job.toml"
    cfg.write_text(JOB.format(model=model, kind=SYNTHETIC_KIND, n=units, b=B, think=THINK_TOKENS + 1,
                              answer=ANSWER))
    job = load_job(cfg)
    import vllm.outputs  # noqa: F401  -- the library's import is the engine's start, not driver work
    from vllm import SamplingParams  # noqa: F401
    lines = []
    t, cpu, proc = time.perf_counter(), time.thread_time(), time.process_time()
    s = run_job(job, work / "set", progress=False, log=lines.append, journal=work / "journal")
    wall, cpu = time.perf_counter() - t, time.thread_time() - cpu - CORE_CPU[0]
    proc = time.process_time() - proc - CORE_CPU[0]
    probes = s.manifest["tables"]["probes"]["rows"]
    return {"units": units, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "wall_s": wall, "driver_cpu_s": cpu, "process_cpu_s": proc,
            "grading_s": s.run["grading_seconds"], "core_cpu_s": CORE_CPU[0],
            "probe_requests": probes, "peak_sequences": max(d.peak_sequences for d in drivers),
            "bounds": next((m for m in lines if m.startswith("in flight")), "")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=32, help="N (the second run has 8N units)")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: N = 1 (1 and 8 units)")
    a = ap.parse_args(argv)
    if a.smoke:
        a.units = 1
    if a.one is not None:
        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(one_size(a.one, Path(d))))
        return 0
    res = []
    for n in (a.units, 8 * a.units):
        r = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True,
                           env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
        if r.returncode:
            sys.stderr.write(r.stderr[-3000:])
            return 1
        res.append(json.loads(r.stdout.strip().splitlines()[-1]))
        r0 = res[-1]
        if n == a.units:
            print(f"bounds ({MAX_NUM_SEQS}-sequence engine, paper-shaped units): {r0['bounds']}")
        print(f"SYNTHETIC engine core, {n} units: peak RSS {r0['rss_mib']:.0f} MiB, wall {r0['wall_s']:.1f} s, "
              f"driver thread CPU {r0['driver_cpu_s']:.1f} s (+ stand-in core {r0['core_cpu_s']:.1f} s), "
              f"grading lane {r0['grading_s']:.1f} s, {r0['probe_requests']} probe requests, "
              f"peak {r0['peak_sequences']} probe-phase sequences in flight", flush=True)
    big = res[1]
    x_us = 1e6 * big["driver_cpu_s"] / big["probe_requests"]
    print(f"(a probe request is one answer sample. Driver = CPU time of the thread that runs the job, the "
          f"vLLM adapter included, less the stand-in core. Beside it: decoding + grading in the grading lane "
          f"({1e6 * big['grading_s'] / big['probe_requests']:.0f} us per answer), journal writes and Parquet "
          f"encoding in writer threads. Whole process less the stand-in core: "
          f"{1e6 * big['process_cpu_s'] / big['probe_requests']:.0f} us per probe request)")
    print(f"probe_scale: peak RSS {res[0]['rss_mib']:.0f} MiB at {a.units} units, "
          f"{big['rss_mib']:.0f} MiB at {8 * a.units} units; driver {x_us:.0f} us per probe request; "
          f"in flight {big['peak_sequences']} requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
