"""Probe-phase engine busy fraction and throughput vs plain `generate` of the same prompts (issues 5, 13).

Goals (issue 13): busy >= 0.95, throughput ratio >= 0.9; prefix-cache hit rate >= 90 %.

1. sample trajectories (exactly `--think` tokens each, so the workload is fixed);
2. probe phase as the probe loop runs it: every position's `P` answer probes
   of exactly `--answer` tokens and, next to each, its ThinkBrake signal
   request, submitted to the engine's `Stream` while answers are graded in
   the grading lane as they come back; busy = time with requests in flight /
   wall time of the phase (first submission to last grade);
3. baseline, same engine: one plain `generate` call of the same probe
   requests (no signals, no grading), prefix cache reset before each of 2
   and 3 so both start cold;
4. ratio = probe-answer tokens/s of 2 / tokens/s of 3.

Default model: the embedded SmolLM2-135M (vLLM on CPU). `--model tiny` uses
the tiny random Qwen3 model (fast, for a smoke run).
"""

import argparse
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="vllm", choices=["vllm", "transformers"])
    ap.add_argument("--model", default="embedded", choices=["embedded", "tiny"])
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--R", type=int, default=2)
    ap.add_argument("--P", type=int, default=4)
    ap.add_argument("--b", type=int, default=64)
    ap.add_argument("--think", type=int, default=512)
    ap.add_argument("--answer", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=32)   # vLLM CPU attention: multiples of 32
    args = ap.parse_args(argv)

    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from otbench.analysis.measurement._segment import segment_flat
    from otbench.probe.config._family import load_family, load_instructions, load_model
    from otbench.probe.data import sum_questions
    from otbench.probe.engines import EngineConfig, GenRequest, SignalRequest, open_engine
    from otbench.probe.grading import GradeItem, resolve_grader
    from otbench.probe.stp._direct import encode_prompts
    from otbench.probe.tokens._probe_prompts import compile_format
    from otbench.probe.tokens._vocab import build_vocabulary

    if args.model == "embedded":
        from otbench.probe.config._embedded import DEFAULT_MODEL, embedded_model_dir
        path, entry = str(embedded_model_dir()), load_model(DEFAULT_MODEL)
        family, rule, dtype = load_family(entry.family), entry.boundary, "bfloat16"
    else:
        import tempfile

        from otbench.probe.engines._tiny import build_tiny_model
        path = str(build_tiny_model(tempfile.mkdtemp(prefix="otbench-tiny-"), 0))
        family, rule, dtype = load_family("qwen3-thinking"), "vocab", "float32"
    cfg = EngineConfig(kind=args.engine, model=path, dtype=dtype,
                       max_model_len=args.think + args.answer + 512,
                       block_size=args.block_size if args.engine == "vllm" else None)
    t = time.perf_counter()
    engine = open_engine(cfg)
    print(f"engine {args.engine} on {args.model}: started in {time.perf_counter() - t:.1f} s", flush=True)
    try:
        tok = engine.tokenizer()
        fmt = compile_format(family, tok, build_vocabulary(tok, engine.vocab_size()), boundary_rule=rule)
        qs = sum_questions(args.questions, seed=7)
        prompts = encode_prompts(fmt, tok, qs, load_instructions())
        s = family.sampling

        # 1. trajectories
        reqs = [GenRequest(prompts[q], 1, 10_000 + 10 * q + r, args.think, (), ignore_eos=True)
                for q in range(len(qs)) for r in range(args.R)]
        t = time.perf_counter()
        traj = [o[0].token_ids for o in engine.generate(reqs, s)]
        t_think = time.perf_counter() - t
        n_think = sum(map(len, traj))

        # 2. probes at every position, streamed with their signals and graded as they finish
        off = np.zeros(len(traj) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in traj], out=off[1:])
        L, Lo = segment_flat(np.concatenate([np.asarray(x) for x in traj]), off, fmt.vocab.mask,
                             args.b, span=fmt.span)
        probe_reqs, ctx, owner = [], [], []
        for i, r in enumerate(reqs):
            for k, Lk in enumerate(L[Lo[i]:Lo[i + 1]].tolist()):
                probe_reqs.append(GenRequest(fmt.probe_prompt(r.prompt, traj[i], Lk), args.P,
                                             20_000 + 100 * i + k, args.answer, (), ignore_eos=True))
                ctx.append(fmt.signal_context(r.prompt, traj[i], Lk))
                owner.append(i // args.R)
        _reset_cache(engine)
        grade = resolve_grader("minimal")[1]
        lane = ThreadPoolExecutor(max_workers=1)
        stream = engine.stream(s)
        c0 = engine.cache_stats()
        t0 = time.perf_counter()
        for j, (pr, cx) in enumerate(zip(probe_reqs, ctx)):
            stream.submit(("p", j), pr)
            stream.submit(("s", j), SignalRequest(cx, fmt.signal_id))
        in_poll, n_probe, futures = 0.0, 0, []
        while stream.in_flight():
            t = time.perf_counter()
            done = stream.poll()
            in_poll += time.perf_counter() - t
            for (kind, j), res in done:
                if kind == "p":
                    n_probe += sum(len(c.token_ids) for c in res)
                    q = qs[owner[j]]
                    futures.append(lane.submit(grade, [GradeItem(q.task, q.reference, tok.decode(
                        list(c.token_ids), skip_special_tokens=True), q) for c in res]))
        t_busy = time.perf_counter() - t0           # requests were in flight until here
        for f in futures:
            f.result()
        t_probe = time.perf_counter() - t0
        lane.shutdown()
        c1 = engine.cache_stats()

        # 3. baseline: the same probe requests in one plain generate call
        _reset_cache(engine)
        t = time.perf_counter()
        pouts = engine.generate(probe_reqs, s)
        t_plain = time.perf_counter() - t
        n_plain = sum(len(c.token_ids) for o in pouts for c in o)
    finally:
        engine.close()

    positions = len(probe_reqs)
    mean_prompt = np.mean([len(r.prompt) for r in probe_reqs])
    print(f"trajectories: {len(traj)} x {args.think} tokens = {n_think} in {t_think:.2f} s "
          f"({n_think / t_think:.0f} tok/s)")
    print(f"probe phase (streamed, + {len(ctx)} signal requests, graded as they finish): {positions} "
          f"positions x P={args.P} x {args.answer} tokens = {n_probe} tokens (mean prompt {mean_prompt:.0f} "
          f"tokens) in {t_probe:.2f} s -> {n_probe / t_probe:.1f} tok/s")
    print(f"plain generate of the same {positions} requests: {n_plain} tokens in {t_plain:.2f} s -> "
          f"{n_plain / t_plain:.1f} tok/s")
    if c0 is not None and c1 is not None:
        q, h = c1["queries"] - c0["queries"], c1["hits"] - c0["hits"]
        print(f"prefix cache during the probe phase: {h}/{q} prompt tokens served = "
              f"{100 * h / max(q, 1):.1f} % (goal >= 90 %)")
    else:
        print("prefix cache: not exposed by this engine")
    print(f"driver waiting on the engine (inside poll): {in_poll / t_probe:.3f} of the phase; grading tail "
          f"after the last answer: {t_probe - t_busy:.2f} s")
    ratio = (n_probe / t_probe) / (n_plain / t_plain)
    print(f"probe_throughput: busy {t_busy / t_probe:.3f}, ratio {ratio:.3f} vs plain generate")
    return 0


def _reset_cache(engine) -> None:
    llm = getattr(engine, "_llm", None)
    if llm is not None and hasattr(llm, "reset_prefix_cache"):
        llm.reset_prefix_cache()


if __name__ == "__main__":  # vLLM starts worker processes: keep the guard
    sys.exit(main())
