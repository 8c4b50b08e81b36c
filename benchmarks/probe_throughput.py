"""Answer-probe throughput vs plain generation of as many tokens, same engine and model (issue 5).

Goal: probe tokens/s >= 0.8 x plain generation tokens/s, prefix-cache hit rate >= 90 %.

1. sample trajectories (exactly `--think` tokens each, so the workload is fixed);
2. segment them (b = `--b`) and send every position's `P` answer probes of
   exactly `--answer` tokens, as the probe does (one call, cache on);
3. baseline, same run: the same number of requests with the same `n` and
   `max_tokens`, from the bare question prompts (no retained prefix);
4. report both rates, their ratio, the prefix-cache hit rate of step 2, and
   the ThinkBrake signal requests separately (one token each).

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

    import numpy as np
    from otbench.analysis.measurement._segment import segment_flat
    from otbench.probe.config._family import load_family, load_instructions, load_model
    from otbench.probe.data._questions import sum_questions
    from otbench.probe.engines._interface import EngineConfig, GenRequest, open_engine
    from otbench.probe.stp._loop import encode_prompts
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

        # 2. probes at every position
        off = np.zeros(len(traj) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in traj], out=off[1:])
        L, Lo = segment_flat(np.concatenate([np.asarray(x) for x in traj]), off, fmt.vocab.mask,
                             args.b, span=fmt.span)
        probe_reqs, ctx = [], []
        for i, r in enumerate(reqs):
            for k, Lk in enumerate(L[Lo[i]:Lo[i + 1]].tolist()):
                probe_reqs.append(GenRequest(fmt.probe_prompt(r.prompt, traj[i], Lk), args.P,
                                             20_000 + 100 * i + k, args.answer, (), ignore_eos=True))
                ctx.append(fmt.signal_context(r.prompt, traj[i], Lk))
        c0 = engine.cache_stats()
        t = time.perf_counter()
        outs = engine.generate(probe_reqs, s)
        t_probe = time.perf_counter() - t
        c1 = engine.cache_stats()
        n_probe = sum(len(c.token_ids) for o in outs for c in o)

        # 3. baseline: the same requests without the retained prefix
        plain = [GenRequest(reqs[j % len(reqs)].prompt,
                            args.P, 30_000 + j, args.answer, (), ignore_eos=True)
                 for j in range(len(probe_reqs))]
        t = time.perf_counter()
        pouts = engine.generate(plain, s)
        t_plain = time.perf_counter() - t
        n_plain = sum(len(c.token_ids) for o in pouts for c in o)

        # 4. signals
        t = time.perf_counter()
        engine.signals(ctx, fmt.signal_id)
        t_sig = time.perf_counter() - t
    finally:
        engine.close()

    positions = len(probe_reqs)
    mean_prompt = np.mean([len(r.prompt) for r in probe_reqs])
    print(f"trajectories: {len(traj)} x {args.think} tokens = {n_think} in {t_think:.2f} s "
          f"({n_think / t_think:.0f} tok/s)")
    print(f"probe:  {positions} positions x P={args.P} x {args.answer} tokens = {n_probe} tokens "
          f"(mean prompt {mean_prompt:.0f} tokens) in {t_probe:.2f} s -> {n_probe / t_probe:.1f} tok/s")
    print(f"plain:  {len(plain)} requests x P={args.P} x {args.answer} tokens = {n_plain} tokens "
          f"from the bare prompts in {t_plain:.2f} s -> {n_plain / t_plain:.1f} tok/s")
    ratio = (n_probe / t_probe) / (n_plain / t_plain)
    print(f"ratio probe/plain: {ratio:.2f} (goal >= 0.8)")
    if c0 is not None and c1 is not None:
        q, h = c1["queries"] - c0["queries"], c1["hits"] - c0["hits"]
        print(f"prefix cache during the probes: {h}/{q} prompt tokens served = {100 * h / max(q, 1):.1f} % "
              f"(goal >= 90 %)")
    else:
        print("prefix cache: not exposed by this engine")
    print(f"signals: {len(ctx)} one-token requests in {t_sig:.2f} s ({len(ctx) / t_sig:.1f} positions/s)")
    return 0


if __name__ == "__main__":  # vLLM starts worker processes: keep the guard
    sys.exit(main())
