"""What the logits processors of vLLM's two model runners share: one request's setup and step.

The processors run an OTBench exit method while a request generates; they are loaded through
vLLM's public extension points only (`_dispatch`). They live in vLLM's engine process: this
module imports torch at import time and is imported only there (``otbench.probe.online`` loads
the processors lazily).

`_ExitCore` holds what both runners share (the request's arguments, the tables, the one step of a
`RequestControl`, the signals and the forced write); `signal_values` and `confidence_values` read
a step's logits rows; `_Refused` stands for a request whose control could not be set up. The
runners' own classes are `ExitProcessorV1` (`_v1`) and `ExitProcessorV2` (`_v2`).
"""

import functools
import logging

import torch

from .._request import OnlineControlError, check_engine, parse_args
from ._control import Tables
from ._rule import load_rule

# Under vLLM's own logger, so a server prints these lines with its log (level VLLM_LOGGING_LEVEL).
log = logging.getLogger("vllm.otbench_online")


@functools.lru_cache(maxsize=8)
def _family(name: str):
    from otbench.probe.config import ArtifactError, load_family

    try:
        return load_family(name)
    except (ArtifactError, OSError) as e:
        raise OnlineControlError(f"otbench_family {name!r}: {e}") from None


class _ExitCore:
    """What the V1 and V2 processors share: per-request setup, one control step, signals, forcing."""

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        spec = parse_args(getattr(sampling_params, "extra_args", None))
        if spec is None:
            return
        _family(spec.family)
        if not spec.is_cap:
            load_rule(spec)
        # vLLM's built-in processors run before custom ones: these would change
        # the logits the signal is read from (min_tokens masks the stop ids,
        # which are the signal token of families without a thinking mode).
        for name in ("logit_bias", "min_tokens", "allowed_token_ids", "bad_words"):
            if getattr(sampling_params, name, None):
                raise OnlineControlError(f"online early exit reads the model's own logits; "
                                         f"a request with {name} would change them")

    def _setup(self, vllm_config) -> None:
        check_engine({"speculative_config": getattr(vllm_config, "speculative_config", None)})
        mc = vllm_config.model_config
        self._tok_args = (mc.tokenizer, getattr(mc, "tokenizer_revision", None),
                          bool(getattr(mc, "trust_remote_code", False)))
        self._vocab_size = int(mc.get_vocab_size())
        eos = getattr(getattr(mc, "hf_config", None), "eos_token_id", None)
        self._eos = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
        self._eos = int(self._eos) if isinstance(self._eos, int) else None
        self._vocab = None
        self._tables: dict[tuple[str, str], Tables] = {}

    # -- tables, built once per (family, boundary rule) on first use -----------------
    def _vocabulary(self):
        if self._vocab is None:
            from otbench.probe.tokens import build_vocabulary
            from transformers import AutoTokenizer

            path, rev, trust = self._tok_args
            self._hf_tok = AutoTokenizer.from_pretrained(path, revision=rev, trust_remote_code=trust)
            self._vocab = build_vocabulary(self._hf_tok, vocab_size=self._vocab_size)
        return self._vocab

    def _tables_for(self, family: str, boundary: str) -> Tables:
        key = (family, boundary)
        if key not in self._tables:
            from otbench.probe.tokens import compile_format

            vocab = self._vocabulary()
            fmt = compile_format(_family(family), self._hf_tok, vocab, boundary_rule=boundary)
            self._tables[key] = Tables.from_format(fmt, eos_id=self._hf_tok.eos_token_id)
        return self._tables[key]

    def _request(self, params):
        """(spec, tables, rule) of a request, None when it asks for no control, or a `_Refused` reason."""
        spec = parse_args(getattr(params, "extra_args", None))
        if spec is None:
            return None
        tables = self._tables_for(spec.family, spec.boundary)
        return spec, tables, (None if spec.is_cap else load_rule(spec))

    def _finish(self, ctl: "RequestControl | _Refused") -> None:
        s = ctl.summary()
        if ctl.broken:
            log.warning("otbench online: %s", ctl.broken)
        log.info("otbench online: %s theta=%s decisions=%d stopped_at=%s natural_end=%s",
                 s["method"], s["theta"], s["decisions"], s["stop_length"], s["natural_end"])

    @staticmethod
    def _next(ctl: "RequestControl | _Refused", signals) -> int | None:
        """One sampling step of `ctl`: the id to force on its row, or None; `signals()` reads the row."""
        kind, value = ctl.step()
        if kind == "decide":
            if getattr(ctl, "_group", None) is not None:       # group confidence: the control's own window
                return ctl.decide(value, ctl.confidence_signals())
            return ctl.decide(value, signals())
        if kind == "force":
            return value
        return None

    @staticmethod
    def _force(logits: torch.Tensor, rows: list[int], ids: list[int]) -> None:
        """Leave only `ids[k]` finite in row `rows[k]` (every sampler then picks it)."""
        if rows:
            r = torch.tensor(rows, dtype=torch.long).to(logits.device, non_blocking=True)
            t = torch.tensor(ids, dtype=torch.long).to(logits.device, non_blocking=True)
            logits[r] = float("-inf")
            logits[r, t] = 0.0

    @staticmethod
    def _signals(row: torch.Tensor, signal_id: int) -> dict[str, float]:
        end, other = signal_values(row[None], torch.tensor([signal_id], device=row.device))[0].tolist()
        return {"logp_end": end, "logp_other": other, "margin": other - end}


def confidence_values(rows: torch.Tensor, k: int = 20) -> torch.Tensor:
    """float32[R] DeepConf's token confidence of logits rows [R, V]: minus the mean of the `k`
    largest log-probabilities (facebookresearch/deepconf ``processors.py`` lines 29-34, whose
    softmax-then-log equals the log-softmax here), read from the raw row as `signal_values`."""
    lp = rows.log_softmax(dim=-1, dtype=torch.float32)
    return -(lp.topk(min(k, lp.shape[-1]), dim=-1).values.sum(dim=-1) / k)


def signal_values(rows: torch.Tensor, signal_ids: torch.Tensor) -> torch.Tensor:
    """[R, 2] float32 (log p(signal), max log p(other)) of logits rows [R, V] (on their device).

    As vLLM's raw log-probabilities (`Sampler.compute_logprobs`): log-softmax
    in float32. The best other token is the top-2 of the row minus the
    signal: the largest value when it is not the signal's, else the second
    (equal values with ties either way) -- the max over the row with the
    signal masked, without copying the row.
    """
    lp = rows.log_softmax(dim=-1, dtype=torch.float32)
    sid = signal_ids.to(torch.long).view(-1, 1)
    end = lp.gather(1, sid).view(-1)
    top = lp.topk(min(2, lp.shape[-1]), dim=-1)
    if top.values.shape[-1] < 2:
        other = torch.full_like(end, float("-inf"))
    else:
        other = torch.where(top.indices[:, 0] == sid.view(-1), top.values[:, 1], top.values[:, 0])
    return torch.stack([end, other], dim=1)


class _Refused:
    """A request whose control could not be set up: ended at once (its EOS), never run uncontrolled."""

    tables = None

    def __init__(self, output, eos_id: int | None, reason: str):
        self.output, self._eos, self.broken = output, eos_id, reason

    @property
    def done(self) -> bool:
        return bool(self.output) or self._eos is None

    def step(self):
        if self.done:
            return ("none", 0)
        return ("force", self._eos)

    def summary(self):
        return {"method": None, "theta": None, "decisions": 0, "stop_length": None,
                "natural_end": None}
