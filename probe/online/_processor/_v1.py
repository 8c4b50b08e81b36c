"""The logits processor under vLLM's V1 model runner (CPUs, and GPUs without Triton): `ExitProcessorV1`.

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

Imports torch and vLLM at import time: loaded only in vLLM's engine process (`_dispatch`).
"""

import logging

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ._control import RequestControl
from ._core import _ExitCore, _Refused, confidence_values

# Under vLLM's own logger, so a server prints these lines with its log (level VLLM_LOGGING_LEVEL).
log = logging.getLogger("vllm.otbench_online")


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

