"""The vLLM logits processors that run an OTBench exit method while a request generates.

Loaded through vLLM's public extension points only: ``LLM(...,
logits_processors=[ExitProcessor])`` in process, or a server started with
``--logits-processors otbench.probe.online:ExitProcessor``. It lives in
vLLM's engine process; this module imports torch and vLLM at import time
and is imported only there (``otbench.probe.online`` loads it lazily).

`_ExitCore` holds what both of vLLM's model runners share (the request's
arguments, the tables, the one step of a `RequestControl`, the signals and
the forced write); `ExitProcessorV1` is the V1-runner class below, the
Model Runner V2 class and the public `ExitProcessor` that serves both are
in `_processor_v2`.

Under the V1 runner, per step, vLLM calls `update_state` with the batch changes (requests
removed, then added, then moved between rows) and then `apply` with the
batch's logits (float32, one row per request, after the allowed-ids and
bad-words masks and vLLM's built-in min-tokens and logit-bias processors,
before penalties and temperature). At a decision point the processor reads
the request's signals from its row the way the probe records them --
log-softmax over the full vocabulary, the signal token's log-probability
and that of the most likely other token -- and forces the thinking end by
leaving only the forced id finite in the row, which every sampler then
picks (greedy or not; penalties and temperature keep it the only finite
logit). Requests without ``otbench_method`` are not touched.
"""

import functools
import logging

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ._control import RequestControl, Tables
from ._exit_rule import load_rule
from ._spec import OnlineControlError, check_engine, parse_args

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


class ExitProcessorV1(_ExitCore, LogitsProcessor):
    """Online early exit under vLLM's V1 model runner (`vllm/v1/sample/logits_processor/interface.py`)."""

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        self._setup(vllm_config)
        self._req: dict[int, RequestControl] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    # -- batch bookkeeping ------------------------------------------------------------
    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if not batch_update:
            return
        for index in batch_update.removed:
            ctl = self._req.pop(index, None)
            if ctl is not None:
                self._finish(ctl)
        for index, params, prompt, output in batch_update.added:
            old = self._req.pop(index, None)
            if old is not None and old.output is not output:
                self._finish(old)
            try:
                req = self._request(params)
                if req is None:
                    continue
            except Exception as e:  # noqa: BLE001 -- never take the engine down for one request
                log.error("otbench online: request refused: %s", e)
                self._req[index] = _Refused(output, self._eos, str(e))
                continue
            self._req[index] = RequestControl(req[0], req[1], req[2], prompt, output)
        for a, b, direction in batch_update.moved:
            ra, rb = self._req.pop(a, None), self._req.pop(b, None)
            if ra is not None:
                self._req[b] = ra
            if direction == MoveDirectionality.SWAP and rb is not None:
                self._req[a] = rb
            elif rb is not None:
                self._finish(rb)

    # -- one step ---------------------------------------------------------------------
    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._req:
            return logits
        rows: list[int] = []
        ids: list[int] = []
        self._observe(logits)
        for index, ctl in self._req.items():
            if index >= logits.shape[0]:
                continue
            tok = self._next(ctl, lambda i=index, c=ctl: self._signals(logits[i], c.tables.signal_id))
            if tok is not None:
                rows.append(index)
                ids.append(tok)
        self._force(logits, rows, ids)
        return logits


    def _observe(self, logits: torch.Tensor) -> None:
        """Each control reading the group confidence, still thinking, gets its row's token confidence
        (one batched read)."""
        want = [(index, ctl, at) for index, ctl in self._req.items() if index < logits.shape[0]
                for at in [getattr(ctl, "wants_confidence", lambda: None)()] if at is not None]
        if not want:
            return
        rows = torch.tensor([w[0] for w in want], dtype=torch.long).to(logits.device)
        for (_, ctl, at), conf in zip(want, confidence_values(logits[rows]).tolist()):
            ctl.observe(at, conf)


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
