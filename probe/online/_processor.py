"""The vLLM V1 logits processor that runs an OTBench exit rule while a request generates.

Loaded through vLLM's public extension points only: ``LLM(...,
logits_processors=[ExitProcessor])`` in process, or a server started with
``--logits-processors otbench.probe.online:ExitProcessor``. It lives in
vLLM's engine process; this module imports torch and vLLM at import time
and is imported only there (``otbench.probe.online`` loads it lazily).

Per step, vLLM calls `update_state` with the batch changes (requests
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
from ._spec import OnlineControlError, check_engine, load_rule, parse_args

# Under vLLM's own logger, so a server prints these lines with its log (level VLLM_LOGGING_LEVEL).
log = logging.getLogger("vllm.otbench_online")


@functools.lru_cache(maxsize=8)
def _family(name: str):
    from otbench.probe.config import ArtifactError, load_family

    try:
        return load_family(name)
    except (ArtifactError, OSError) as e:
        raise OnlineControlError(f"otbench_family {name!r}: {e}") from None


class ExitProcessor(LogitsProcessor):
    """Online early exit for requests that name an OTBench rule (`otbench.probe.online._spec`)."""

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

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
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
        self._req: dict[int, RequestControl] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    # -- tables, built once per (family, boundary rule) on first use -----------------
    def _vocabulary(self):
        if self._vocab is None:
            from transformers import AutoTokenizer

            from otbench.probe.tokens import build_vocabulary

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

    # -- batch bookkeeping ------------------------------------------------------------
    def _finish(self, ctl: RequestControl) -> None:
        s = ctl.summary()
        if ctl.broken:
            log.warning("otbench online: %s", ctl.broken)
        log.info("otbench online: %s theta=%s decisions=%d stopped_at=%s natural_end=%s",
                 s["method"], s["theta"], s["decisions"], s["stop_length"], s["natural_end"])

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
                spec = parse_args(getattr(params, "extra_args", None))
                if spec is None:
                    continue
                tables = self._tables_for(spec.family, spec.boundary)
                rule = None if spec.is_cap else load_rule(spec)
            except Exception as e:  # noqa: BLE001 -- never take the engine down for one request
                log.error("otbench online: request refused: %s", e)
                self._req[index] = _Refused(output, self._eos, str(e))
                continue
            self._req[index] = RequestControl(spec, tables, rule, prompt, output)
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
        for index, ctl in self._req.items():
            if index >= logits.shape[0]:
                continue
            kind, value = ctl.step()
            if kind == "decide":
                tok = ctl.decide(value, self._signals(logits[index], ctl.tables.signal_id))
                if tok is not None:
                    rows.append(index)
                    ids.append(tok)
            elif kind == "force":
                rows.append(index)
                ids.append(value)
        if rows:
            r = torch.tensor(rows, dtype=torch.long, device=logits.device)
            t = torch.tensor(ids, dtype=torch.long, device=logits.device)
            logits[r] = float("-inf")
            logits[r, t] = 0.0
        return logits

    @staticmethod
    def _signals(row: torch.Tensor, signal_id: int) -> dict[str, float]:
        # As vLLM's raw log-probabilities (`Sampler.compute_logprobs`): log-softmax in float32.
        lp = row.log_softmax(dim=-1, dtype=torch.float32)
        end = float(lp[signal_id])
        masked = lp.clone()
        masked[signal_id] = float("-inf")
        other = float(masked.max())
        return {"logp_end": end, "logp_other": other, "margin": other - end}


class _Refused:
    """A request whose control could not be set up: ended at once (its EOS), never run uncontrolled."""

    tables = None

    def __init__(self, output, eos_id: int | None, reason: str):
        self.output, self._eos, self.broken = output, eos_id, reason

    def step(self):
        if self.output or self._eos is None:
            return ("none", 0)
        return ("force", self._eos)

    def summary(self):
        return {"method": None, "theta": None, "decisions": 0, "stop_length": None,
                "natural_end": None}
