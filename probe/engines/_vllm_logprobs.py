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


def _returned_means(got, first: int, n: int, k: int) -> tuple[float, ...]:
    """Per position ``first .. first + n - 1`` of prompt log-probabilities asked with
    ``prompt_logprobs = k``: the mean of every value vLLM returns there, the token's own and the
    top `k`, the own one counted once (`Completion.prompt_returned_mean`).

    The dict form merges a token inside the top `k` into one key (its own first, then the rest in
    rank order); the flat form (`FlatLogprobs`) stores the own entry first with its rank, then the
    top `k`, so the own entry is among them exactly when its rank is at most `k`.
    """
    import numpy as np

    if got is None or len(got) < first + n:
        raise RuntimeError(f"vLLM returned {0 if got is None else len(got)} positions of prompt "
                           f"log-probabilities, not {first + n}")
    starts = getattr(got, "start_indices", None)
    out = []
    for i in range(first, first + n):
        if starts is not None:
            s, e = got.start_indices[i], got.end_indices[i]
            own, rank = got.token_ids[s], got.ranks[s]
            vals = [got.logprobs[s]] + [v for t, v in zip(got.token_ids[s + 1:e], got.logprobs[s + 1:e])
                                        if t != own]
            if e - s - 1 != k or (rank is not None and rank <= k) != (len(vals) == k):
                raise RuntimeError(f"vLLM returned {e - s - 1} top log-probabilities at a prompt "
                                   f"position, not {k}, or a rank that disagrees with them")
        else:
            vals = [float(v.logprob) for v in got[i].values()]
            if len(vals) not in (k, k + 1):
                raise RuntimeError(f"vLLM returned {len(vals)} log-probabilities at a prompt position "
                                   f"asked with prompt_logprobs={k}")
        out.append(float(np.mean(np.asarray(vals, dtype=np.float64))))
    return tuple(out)
