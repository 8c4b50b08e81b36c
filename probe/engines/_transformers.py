"""The transformers/torch engine: the portable fallback behind the same interface (docs/rules.md).

A plain sampling loop over `AutoModelForCausalLM` with a KV cache: the `n`
samples of a request run as one batch that shares the prompt, and each
sample draws from its own `torch.Generator` seeded `seed + j` (the vLLM
convention), so results do not depend on how requests are batched. The
filters match vLLM's order: presence penalty on generated tokens,
temperature, top-k, top-p; temperature 0 is greedy. No prefix cache across
requests (`cache_stats` is None).
"""

import os
from collections.abc import Sequence
from typing import Any

from otbench.probe.config import Sampling

from ._interface import Completion, EngineBase, EngineConfig, GenRequest, Signal
from otbench.errors import ArgumentError

_DTYPES = {"bfloat16", "float16", "float32"}


class HFEngine(EngineBase):
    """`Engine` on Hugging Face transformers (CPU or a single GPU)."""

    name = "transformers"

    def __init__(self, config: EngineConfig):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if config.dtype not in _DTYPES:
            raise ArgumentError(f"`dtype` must be one of {', '.join(sorted(_DTYPES))}, got {config.dtype!r}.")
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        self.config = config
        self._device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self._tok = AutoTokenizer.from_pretrained(config.model, local_files_only=True)
        self._model = AutoModelForCausalLM.from_pretrained(
            config.model, dtype=getattr(torch, config.dtype), local_files_only=True,
        ).to(self._device).eval()
        self._versions = {"transformers": transformers.__version__, "torch": torch.__version__}
        eos = self._model.generation_config.eos_token_id
        self._eos = set([eos] if isinstance(eos, int) else list(eos or []))

    def tokenizer(self):
        return self._tok

    def vocab_size(self) -> int:
        return int(self._model.get_output_embeddings().weight.shape[0])

    # -- sampling ----------------------------------------------------------------
    def _filter(self, logits, seen, sampling: Sampling):
        """Row-wise logits -> probabilities after penalty, temperature, top-k, top-p (float32)."""
        torch = self._torch
        logits = logits.float()
        if sampling.presence_penalty:
            logits = logits - sampling.presence_penalty * seen
        logits = logits / sampling.temperature
        V = logits.shape[-1]
        if 0 < sampling.top_k < V:
            kth = torch.topk(logits, sampling.top_k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if sampling.top_p < 1.0:
            sp, si = torch.sort(probs, dim=-1, descending=True)
            cum = torch.cumsum(sp, dim=-1)
            # Keep the smallest prefix whose mass reaches top_p (the first token always).
            drop = (cum - sp) >= sampling.top_p
            sp = sp.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, si, sp)
            probs = probs / probs.sum(dim=-1, keepdim=True)
        return probs

    def _run(self, prompt: Sequence[int], r: GenRequest, sampling: Sampling) -> list[Completion]:
        torch = self._torch
        n = r.n
        stops = set() if r.ignore_eos else set(int(s) for s in r.stop_ids) | self._eos
        gens = [torch.Generator(device="cpu").manual_seed(int(r.seed) + j) for j in range(n)]
        ids = torch.tensor([list(prompt)] * n, dtype=torch.long, device=self._device)
        out: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        tops: list[list[float]] = [[] for _ in range(n)]
        stop_id: list[int | None] = [None] * n
        done = [False] * n
        V = self.vocab_size()
        seen = torch.zeros((n, V), dtype=torch.float32, device=self._device)
        past = None
        step_input = ids
        with torch.inference_mode():
            for _ in range(int(r.max_tokens)):
                res = self._model(input_ids=step_input, past_key_values=past, use_cache=True)
                past = res.past_key_values
                logits = res.logits[:, -1, :].float()
                if sampling.temperature == 0.0:
                    # Greedy still sees the presence penalty (as in vLLM).
                    nxt = torch.argmax(logits - sampling.presence_penalty * seen, dim=-1).tolist()
                else:
                    probs = self._filter(logits, seen, sampling).cpu()
                    nxt = [int(torch.multinomial(probs[j], 1, generator=gens[j]).item())
                           for j in range(n)]
                if r.logprobs:
                    # The raw next-token log-softmax (before penalty, temperature and the
                    # filters), as vLLM's "raw_logprobs" mode returns it with the sample.
                    chosen = torch.tensor([int(t) for t in nxt], dtype=torch.long, device=logits.device)
                    row = torch.log_softmax(logits, dim=-1).gather(-1, chosen[:, None])[:, 0].tolist()
                if r.top_logprobs > 0:
                    # The mean of the raw log-softmax's `top_logprobs` largest values (DeepConf's
                    # token confidence, negated: `otbench.probe.grading._deepconf`).
                    k = min(int(r.top_logprobs), logits.shape[-1])
                    top = torch.topk(torch.log_softmax(logits, dim=-1), k, dim=-1).values
                    top_row = (top.sum(dim=-1) / k).tolist()
                for j in range(n):
                    if done[j]:
                        continue
                    t = int(nxt[j])
                    if t in stops:
                        done[j] = True
                        stop_id[j] = t
                    else:
                        out[j].append(t)
                        seen[j, t] = 1.0
                        if r.logprobs:
                            lps[j].append(float(row[j]))
                        if r.top_logprobs > 0:
                            tops[j].append(float(top_row[j]))
                if all(done):
                    break
                step_input = torch.tensor([[int(t)] for t in nxt], dtype=torch.long, device=self._device)
        prompt_top, returned = self._prompt_top(prompt, int(r.prompt_top_logprobs)) \
            if r.prompt_top_logprobs > 0 else (None, None)
        return [Completion(tuple(o), s, tuple(lp) if r.logprobs else None,
                           tuple(tp) if r.top_logprobs > 0 else None, prompt_top, returned)
                for o, s, lp, tp in zip(out, stop_id, lps, tops)]

    def _prompt_top(self, prompt: Sequence[int], k: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per prompt token after the first: the mean of the `k` largest raw log-probabilities of
        the distribution predicting it (one forward pass over the prompt, as vLLM's prompt
        log-probabilities), and the mean of every value vLLM returns there (the token's own first,
        then the `k` largest without it: `Completion.prompt_returned_mean`)."""
        import numpy as np

        torch = self._torch
        if len(prompt) < 2:
            return (), ()
        with torch.inference_mode():
            logits = self._model(input_ids=torch.tensor([list(prompt)], dtype=torch.long,
                                                        device=self._device)).logits[0, :-1].float()
            lp = torch.log_softmax(logits, dim=-1)
            kk = min(k, lp.shape[-1])
            top = torch.topk(lp, kk, dim=-1)
            means = tuple((top.values.sum(dim=-1) / kk).tolist())
            own = lp.gather(-1, torch.tensor(list(prompt)[1:], dtype=torch.long,
                                             device=lp.device)[:, None])[:, 0].tolist()
            vals, ids = top.values.tolist(), top.indices.tolist()
        returned = []
        for t, o, v, i in zip(list(prompt)[1:], own, vals, ids):
            row = [o] + [x for x, j in zip(v, i) if j != int(t)]
            returned.append(float(np.mean(np.asarray(row, dtype=np.float64))))
        return means, tuple(returned)

    def generate(self, requests: Sequence[GenRequest], sampling: Sampling) -> list[list[Completion]]:
        if any(r.extra_args is not None for r in requests):
            # Engine-side extensions (vLLM logits processors) have no transformers counterpart.
            raise ArgumentError("the transformers engine cannot honour a request's `extra_args` "
                                "(engine-side extensions need engine = \"vllm\")")
        if any(r.thinking_token_budget is not None for r in requests):
            raise ArgumentError("the transformers engine has no thinking-token budget "
                                "(the engine's own cap needs engine = \"vllm\")")
        return [self._run(r.prompt, r, r.sampling or sampling) for r in requests]

    def signals(self, contexts: Sequence[Sequence[int]], token_id: int) -> list[Signal]:
        torch = self._torch
        res = []
        with torch.inference_mode():
            for c in contexts:
                x = torch.tensor([list(c)], dtype=torch.long, device=self._device)
                lp = torch.log_softmax(self._model(input_ids=x).logits[0, -1].float(), dim=-1)
                end = float(lp[token_id])
                lp[token_id] = float("-inf")
                other = int(torch.argmax(lp))
                res.append(Signal(end, float(lp[other]), other))
        return res

    def choice_logprobs(self, contexts: Sequence[Sequence[int]],
                        token_ids: Sequence[int]) -> list[list[float]]:
        """Next-token log-probabilities of `token_ids` after each context (docs/rules.md readout).

        One plain forward pass per context, projecting only the last
        position onto the vocabulary (`logits_to_keep=1`: half the work of a
        full projection for a 49k-token vocabulary on a CPU); the log-softmax
        over the full vocabulary is taken in float64 from the model's logits,
        so probabilities far below float32's resolution keep their value.
        """
        torch = self._torch
        ids = torch.tensor([int(t) for t in token_ids], dtype=torch.long)
        res = []
        with torch.inference_mode():
            for c in contexts:
                x = torch.tensor([list(c)], dtype=torch.long, device=self._device)
                logits = self._model(input_ids=x, logits_to_keep=1).logits[0, -1].double().cpu()
                lp = torch.log_softmax(logits, dim=-1)
                res.append([float(v) for v in lp[ids]])
        return res

    def position_logits(self, input_ids, attention_mask, keep):
        """Logits `[batch, len(keep), vocab]` at sequence positions `keep` of a padded batch.

        The forward pass of the batched candidate-logit readout
        (`otbench.probe.horizon` pads, batches and reads the rows).
        """
        with self._torch.inference_mode():
            return self._model(input_ids=input_ids.to(self._device),
                               attention_mask=attention_mask.to(self._device),
                               logits_to_keep=keep.to(self._device)).logits

    def stream(self, sampling: Sampling):
        from ._interface import BatchStream
        return BatchStream(self, sampling)

    def cache_stats(self) -> dict[str, int] | None:
        return None

    def info(self) -> dict[str, Any]:
        return {"engine": "transformers", **self._versions, "device": str(self._device),
                "config": self.config.as_dict()}

    def close(self) -> None:
        self._model = None
