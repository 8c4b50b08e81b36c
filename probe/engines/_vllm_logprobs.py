"""vLLM's log-probability outputs, read the same way by the engine's batch calls (`_vllm`) and
its stream (`_vllm_stream`)."""


def _top_means(got, n: int, k: int) -> tuple[float, ...]:
    """Per decoded position, the mean of its `k` most probable tokens' log-probabilities.

    With ``logprobs = k`` vLLM 0.32 stores per position the sampled token first, then the top
    `k` in rank order (`gather_logprobs`), so in the flat form (`FlatLogprobs`) they are entries
    ``start + 1 .. end - 1``; in the dict form a sampled token inside the top `k` is one key (the
    dict merges the two), so the mean is of the `k` largest values either way.
    """
    if got is None or len(got) < n:
        raise RuntimeError(f"vLLM returned {0 if got is None else len(got)} positions of log-probabilities "
                           f"for {n} decoded tokens (asked with logprobs={k})")
    starts = getattr(got, "start_indices", None)
    out = []
    if starts is not None:
        vals, ends = got.logprobs, got.end_indices
        for i in range(n):
            top = vals[starts[i] + 1:ends[i]]
            if len(top) != k:
                raise RuntimeError(f"vLLM returned {len(top)} top log-probabilities at a position, not {k} "
                                   "(in a step that also read specific ids, logprob_token_ids, vLLM 0.32 "
                                   "returns those for every request of the step)")
            out.append(sum(top) / k)
    else:
        for i in range(n):
            top = sorted((float(v.logprob) for v in got[i].values()), reverse=True)[:k]
            if len(top) != k:
                raise RuntimeError(f"vLLM returned {len(top)} top log-probabilities at a position, not {k}")
            out.append(sum(top) / k)
    return tuple(out)
