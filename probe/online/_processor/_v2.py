"""The logits processor under vLLM's Model Runner V2 (GPUs with Triton): `ExitProcessorV2`.

vLLM 0.32 runs Model Runner V2 on GPUs whenever Triton is there
(`vllm/config/vllm.py`, `VllmConfig.use_v2_model_runner`: hisparse and
watermarking force it, `VLLM_USE_V2_MODEL_RUNNER` decides when set, else
V2 unless Triton is missing or a feature it lacks is on); `_dispatch` makes
one class of this and the V1 runner's (`_v1`).

Under V2 (`interface.py`; `model_runner.py` `add_requests`, `finish_requests`;
`sample/sampler.py` `Sampler.add_request`, `apply_sampling_params`):

* ``add_request(slot, sampling_params)`` runs when a request enters a
  slot (after `RequestState.add_request` wrote its prompt length on the
  host); slots are recycled through a free list and there is no remove
  hook (`_remove_request` frees the slot only), so all of a slot's state is
  replaced here. A preempted request is removed and later added again,
  with its partial output in its prefill (``prefill_len > prompt_len``):
  its control starts afresh on that output, as V1's does.
* ``apply(logits, ctx)`` runs once per step for the whole batch when any
  request in it asked for logits processing (`needs_logits_processing`,
  what `add_request` returns), after the bias, penalty, bad-words and
  grammar stages and before temperature; the thinking-budget forcing runs
  after it and wins. Rows are batch positions (one per request without
  speculative decoding, which the controller refuses); ``ctx.idx_mapping_np``
  maps them to slots on the host. A request's presence and frequency
  penalties (the family's recommended sampling: qwen3-thinking sets
  ``presence_penalty = 1.5``) are already in its row here, so the row is
  read through `undo_penalties` (its rule), with the output token counts
  vLLM penalised taken from ``all_token_ids`` on the device.
* The committed tokens are on the device: ``req_states.all_token_ids[slot,
  :total_len[slot]]`` (`input_batch.py` `_post_update_kernel` appends each
  sampled token and grows ``total_len`` on the device after sampling).

Host <-> device traffic per step (see `ExitProcessorV2.apply` and `_v2_step`):
none when no row of the batch holds a live control (a host bitmap per slot,
read with ``idx_mapping_np``); otherwise one host -> device upload (the
step's plans, token windows and signal ids) and one device -> host copy
issued without blocking (the new tokens of each live row, a window sized on
the host from ``seq_lens_upper_bound_np`` and ``prefill_len``; the device's
``total_len`` of those rows, so a wrong window is caught and mended by a rare
second read; (log p(signal), max log p(other)); the device's forced ids).
The decision and the forced write run on the device; the copy is read at
the next step, whose wait covers the previous step's sampler only, and
replayed there through each row's `RequestControl`. A method without a
device-side form (`Method.device_signal`) and a request resumed with output
the host has not read are decided on the host at once (one blocking read).
"""

import logging

import numpy as np
import torch

from .._request import OnlineControlError, parse_args
from ._control import RequestControl
from ._core import _ExitCore, _Refused, signal_values
from ._v2_step import _SIGNAL, SYNC, Copy, DeviceTables, device_actions, plan, write_forced

log = logging.getLogger("vllm.otbench_online")

try:   # vLLM >= 0.32: Model Runner V2's interface (import-light: no torch, no triton)
    from vllm.v1.worker.gpu.sample.logits_processor import (
        LogitsContext,
        LogitsProcessor,
        LogitsProcRequestState,
    )
except ImportError:  # pragma: no cover -- a vLLM without Model Runner V2: the V1 class alone (`_dispatch`)
    LogitsProcessor = LogitsContext = LogitsProcRequestState = None

# Under V2 the penalties run before custom processors (`sample/sampler.py`, `Sampler.__init__`:
# ``[logit_bias_state, penalties_state, bad_words_state, *custom]``); under V1 after them
# (`v1/sample/sampler.py` `apply_logits_processors`: ``non_argmax_invariant`` processors, then
# `apply_penalties`), so V1 reads the raw row and V2 undoes the additive penalties (`undo_penalties`).
# A repetition penalty rescales (`penalties.py` `_penalties_kernel`: ``logits *= where(logits > 0,
# 1 / r, r)``), which cannot be undone exactly: refused under both runners (the frontend cannot tell which).
_UNDONE = (("presence_penalty", 0.0), ("frequency_penalty", 0.0))


def _validate_v2(sampling_params) -> None:
    _ExitCore.validate_params(sampling_params)
    if parse_args(getattr(sampling_params, "extra_args", None)) is None:
        return
    if getattr(sampling_params, "thinking_token_budget", None) is not None:
        # V2 forces the budget's end after custom processors and wins over their edits
        # (`Sampler.apply_sampling_params`); the controller's own cap is method "cap".
        raise OnlineControlError("online early exit forces the thinking end itself; a request with "
                                 "thinking_token_budget would override it (use otbench_method 'cap')")
    rep = getattr(sampling_params, "repetition_penalty", 1.0)
    if rep is not None and float(rep) != 1.0:
        raise OnlineControlError(f"online early exit reads the model's own logits; repetition_penalty={rep} "
                                 f"rescales them before the controller under vLLM's V2 runner and cannot be "
                                 f"undone exactly (use presence_penalty or frequency_penalty, which it undoes)")


def _penalties(sampling_params) -> tuple[float, float] | None:
    """(presence, frequency) of a request as vLLM stores them (float32), None when both are off."""
    vals = []
    for name, neutral in _UNDONE:
        v = getattr(sampling_params, name, neutral)
        vals.append(float(np.float32(neutral if v is None else v)))
    return None if vals == [0.0, 0.0] else (vals[0], vals[1])


def undo_penalties(rows: torch.Tensor, counts: torch.Tensor, presence: torch.Tensor,
                   frequency: torch.Tensor) -> torch.Tensor:
    """The rows [R, V] float32 as they were before vLLM's presence and frequency penalties.

    vLLM 0.32 (`vllm/v1/worker/gpu/sample/penalties.py`, `_penalties_kernel`, lines 176-179;
    V1's `model_executor/layers/utils.py` `apply_penalties`, lines 78-79, the same arithmetic),
    per row with output token counts ``c`` (tokens generated so far; the prompt is not counted):
    ``x -= f * c`` then ``x -= p * (c > 0)``, in float32. This adds them back in the reverse
    order. Rule: a token absent from the output is untouched by vLLM (it subtracted 0.0) and
    comes back bit for bit; a present token comes back bit for bit whenever vLLM's
    subtractions were exact (``x - f c - p`` representable: for p = 1.5 alone any
    0.75 <= x < 2**23, with a dyadic f any x >= 2 (f c + p) -- where the top logits of a
    language model lie), else within one float32 ulp of max(|x|, |x - f c - p|). The margin
    reads two logits (the normalizer cancels): the signal token's (absent from the output
    while the thinking runs when it is the thinking end, as it ends it) and the best other's;
    the log-probabilities also read the normalizer, which an ulp in a low present logit moves
    by far less than its own ulp (`tests/probe/online/test_online_penalties.py` measures it).
    """
    c = counts.to(torch.float32)
    out = rows + presence.view(-1, 1) * (counts > 0).to(torch.float32)
    return out + frequency.view(-1, 1) * c


class _Slot:
    """One request slot's control under V2: its request, its host copy of the output, its control."""

    __slots__ = ("ctl", "kept", "logged", "out", "pen", "read", "req")

    def __init__(self, req, ctl=None, pen=None):
        self.req = req                   # (spec, tables, rule); None for a refused request
        self.pen = pen                   # (presence, frequency) penalties vLLM applies, or None
        self.out: list[int] = []         # the output tokens read back so far
        self.read: int | None = None     # all_token_ids positions read so far (None: none yet)
        self.ctl = ctl                   # RequestControl (made on the first read) or _Refused
        self.logged = False
        self.kept = True                 # whether the last issued step's sample reached the output

    def may_decide(self) -> bool:
        if isinstance(self.ctl, _Refused):
            return False
        return not self.req[0].is_cap


def _h2d(values: np.ndarray, device: torch.device) -> torch.Tensor:
    t = torch.from_numpy(values)
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


class ExitProcessorV2(_ExitCore, *((LogitsProcessor,) if LogitsProcessor is not None else ())):
    """Online early exit under vLLM's Model Runner V2 (module docstring)."""

    validate_params = classmethod(lambda cls, sampling_params: _validate_v2(sampling_params))

    def __init__(self, vllm_config, req_states):
        self._setup(vllm_config)
        self._rs = req_states
        self._slots: dict[int, _Slot] = {}
        # Host bitmap: slot -> holds a control that still acts (tested per step without the device).
        self._live = np.zeros(int(req_states.max_num_reqs), dtype=bool)
        self._mended = 0
        self._dtabs = DeviceTables()
        self._pending = None               # the last step's copy, replayed at the next step
        self._disagreed = False

    # -- per request ------------------------------------------------------------------
    def add_request(self, req_idx: int, sampling_params) -> bool:
        old = self._slots.pop(req_idx, None)
        if old is not None and old.ctl is not None and not old.logged:
            old.logged = True
            self._finish(old.ctl)          # the slot's last occupant ended or was preempted
        self._live[req_idx] = False
        try:
            req = self._request(sampling_params)
            if req is None:
                return False
            if req[2] is not None and req[2].window is not None:
                # A group confidence reads every step's logits on the host (its running window);
                # this runner decides on the device from rows it copies back at decision points
                # only. Refused here (the request ends at once), as the frontend cannot know the runner.
                raise OnlineControlError(f"method {req[2].name!r} reads every step's token confidence "
                                         f"and runs under vLLM's V1 model runner only (start the "
                                         f"engine with VLLM_USE_V2_MODEL_RUNNER=0)")
            st = _Slot(req, pen=_penalties(sampling_params))
        except Exception as e:  # noqa: BLE001 -- never take the engine down for one request
            log.error("otbench online: request refused: %s", e)
            st = _Slot(None)
            st.ctl = _Refused(st.out, self._eos, str(e))
        self._slots[req_idx] = st
        self._live[req_idx] = True
        return True

    def apply_staged_writes(self) -> None:
        """Nothing staged: the control lives on the host, the tokens are read in `apply`."""

    def _output_counts(self, tok_buf, total, slots, starts, n, width: int, vocab: int) -> torch.Tensor:
        """[K, vocab] int32: each slot's output token counts, as vLLM's penalty state holds them.

        vLLM counts ``all_token_ids[slot, prompt_len:total_len]`` (`penalties.py` `bincount` at
        the request's (re)fill, `input_batch.py` `_post_update_kernel` per sampled token); the
        window here is the host's upper bound `n`, cut on the device at ``total_len``.
        """
        ar = torch.arange(max(1, width), device=slots.device)
        pos = starts.view(-1, 1) + ar
        ok = (ar < n.view(-1, 1)) & (pos < total[slots].to(torch.long).view(-1, 1))
        tok = tok_buf[slots.view(-1, 1), pos.clamp(max=tok_buf.shape[1] - 1)].to(torch.long)
        tok = torch.where(ok & (tok >= 0) & (tok < vocab), tok, vocab)
        cnt = torch.zeros(slots.shape[0], vocab + 1, dtype=torch.int32, device=slots.device)
        cnt.scatter_add_(1, tok, torch.ones_like(tok, dtype=torch.int32))
        return cnt[:, :vocab]

    # -- one step ---------------------------------------------------------------------
    def apply(self, logits: torch.Tensor, ctx) -> torch.Tensor:
        self._drain()                      # the previous step's copy: replay it (`_v2_step`)
        slots_b = np.asarray(ctx.idx_mapping_np)
        live = np.zeros(slots_b.shape[0], dtype=bool)
        ok = slots_b >= 0
        live[ok] = self._live[slots_b[ok]]
        if not live.any():
            return logits                  # no live control in this batch: no device work at all
        if logits.shape[0] != slots_b.shape[0]:
            raise OnlineControlError("online early exit needs one logits row per request "
                                     "(speculative decoding is not supported)")
        rows = np.flatnonzero(live)
        slots = slots_b[rows].astype(np.int64)
        plan_ = self._plan_rows(rows, slots, np.asarray(ctx.seq_lens_upper_bound_np))
        g_slot, g_pos, items, dec_rows, dec_ids, dec_pos, pens, ints, theta = plan_
        pen_k, pen_slot, pen_start, pen_n, pen_p, pen_f = pens
        nt, nr, nd, npn = len(g_pos), len(rows), len(dec_rows), len(pen_k)
        dev = logits.device
        idx = _h2d(np.concatenate([np.asarray(g_slot + g_pos + slots.tolist() + rows.tolist() + dec_rows
                                              + dec_ids + dec_pos + pen_k + pen_slot + pen_start + pen_n,
                                              dtype=np.int64), ints.reshape(-1)]), dev)
        tok_buf, total = self._rs.all_token_ids.gpu, self._rs.total_len.gpu
        o = 2 * nt + 2 * nr
        parts = [tok_buf[idx[:nt], idx[nt:2 * nt]].to(torch.float64),
                 total[idx[2 * nt:2 * nt + nr]].to(torch.float64)]
        sig = torch.full((nr, 2), float("nan"), dtype=torch.float64, device=dev)
        if nd:
            d = idx[o:o + 3 * nd]
            sel = logits.index_select(0, d[:nd])
            if npn:
                q = idx[o + 3 * nd:o + 3 * nd + 4 * npn].view(4, npn)
                pf = _h2d(np.asarray(pen_p + pen_f, dtype=np.float32), dev).view(2, npn)
                cnt = self._output_counts(tok_buf, total, q[1], q[2], q[3], max(pen_n), sel.shape[-1])
                sel[q[0]] = undo_penalties(sel[q[0]], cnt, pf[0], pf[1])
            sv = signal_values(sel, d[nd:2 * nd]).to(torch.float64)
            sig[d[2 * nd:]] = sv
            parts.append(sv.view(-1))
        act = idx[o + 3 * nd + 4 * npn:].view(9, nr)
        fid = device_actions(tok_buf, total, self._dtabs.on(dev), idx[2 * nt:2 * nt + nr], act,
                             _h2d(theta, dev), sig)
        write_forced(logits, idx[2 * nt + nr:2 * nt + 2 * nr], fid)
        parts.append(fid.to(torch.float64))
        rec = [Copy(torch.cat(parts)), items, nt, nr, nd]
        if any(it[6] == SYNC for it in items):   # a plug-in rule or a resumed request: at once
            rows_f, ids_f = self._replay(rec, sync=True)
            self._force(logits, rows_f, ids_f)
        self._pending = rec
        return logits

    def _plan_rows(self, rows: np.ndarray, slots: np.ndarray, seq_ub: np.ndarray):
        """The host's half of a step, per live row (batch row `rows[j]`, slot `slots[j]`): the
        token window to copy back, its action codes (`plan`) and, where it may decide, the row
        whose signal is read and the penalties to undo there. Returns the flat lists `apply`
        sends to the device in one copy."""
        prompt_len, prefill_len = self._rs.prompt_len.np, self._rs.prefill_len.np
        g_slot, g_pos, items, dec_rows, dec_ids, dec_pos = [], [], [], [], [], []
        pen_k, pen_slot, pen_start, pen_n, pen_p, pen_f = [], [], [], [], [], []
        ints = np.zeros((9, len(rows)), dtype=np.int64)
        theta = np.zeros(len(rows), dtype=np.float64)
        for j, (b, s) in enumerate(zip(rows.tolist(), slots.tolist())):
            st = self._slots[s]
            start = st.read if st.read is not None else int(prompt_len[s]) - 1
            # total_len on the device, as the host knows it: the tokens fed so far (decode:
            # num_computed + 1), or the whole prefill while it is still being prefilled.
            end = max(int(seq_ub[b]), int(prefill_len[s]))
            n = max(0, end - start)
            g_slot.extend([s] * n)
            g_pos.extend(range(start, start + n))
            n_out = end - int(prompt_len[s])
            code, ask, block, hforce = plan(st, n_out, _Refused)
            ints[:6, j] = code, ask, block, hforce, n_out, 0
            ints[6, j] = -1
            if st.req is not None:
                spec, tables, rule = st.req
                ints[5, j] = self._dtabs.index(tables)
                ints[6, j] = -1 if spec.is_cap else _SIGNAL.get(rule.device_signal, 0)  # none: SYNC, unread
                # `Tables.forced` after a last token without / with a line feed at its end
                # (empty: `RequestControl._start` forces the EOS id, or 0).
                fill = (tables.eos_id if tables.eos_id is not None else 0,)
                tail = tables.end_ids + tables.answer_prefix_ids
                ints[7, j] = (tables.separator_ids + tail or fill)[0]
                ints[8, j] = (tail or fill)[0]
                theta[j] = float(spec.theta)
            deck = None
            if st.may_decide():
                if st.pen is not None:   # the whole output so far, for the counts vLLM penalised
                    pen_k.append(len(dec_rows))
                    pen_slot.append(s)
                    pen_start.append(int(prompt_len[s]))
                    pen_n.append(max(0, n_out))
                    pen_p.append(st.pen[0])
                    pen_f.append(st.pen[1])
                deck = len(dec_rows)
                dec_rows.append(b)
                dec_ids.append(st.req[1].signal_id)
                dec_pos.append(j)
            items.append((st, b, s, start, n, deck, code))
            st.kept = int(seq_ub[b]) >= int(prefill_len[s])   # this step's sample reaches the output
        pens = (pen_k, pen_slot, pen_start, pen_n, pen_p, pen_f)
        return g_slot, g_pos, items, dec_rows, dec_ids, dec_pos, pens, ints, theta

    def _drain(self) -> None:
        """Replay the last issued step's lagged rows (waits for that step's copy only)."""
        rec, self._pending = self._pending, None
        if rec is not None:
            self._replay(rec, sync=False)

    def _replay(self, rec, sync: bool) -> tuple[list[int], list[int]]:
        """Run each row's `RequestControl` step as the synchronous loop did, on the copied values."""
        copy, items, nt, nr, nd = rec
        vals = copy.values()
        toks, totals = vals[:nt], vals[nt:nt + nr]
        sigs, fids = vals[nt + nr:nt + nr + 2 * nd], vals[nt + nr + 2 * nd:]
        force_rows: list[int] = []
        force_ids: list[int] = []
        at = 0
        for j, (st, b, s, start, n, deck, code) in enumerate(items):
            window, at = toks[at:at + n], at + n
            if (code == SYNC) != sync:
                continue
            current = self._slots.get(s) is st
            total = int(totals[j])
            got = [int(t) for t in window][:max(0, total - start)]
            if start + len(got) < total and current:   # the window missed tokens: read the rest (rare)
                self._mended += 1
                if self._mended == 1:
                    log.warning("otbench online: token window short by %d; reading the rest",
                                total - start - len(got))
                got += [int(t) for t in self._rs.all_token_ids.gpu[s, start + len(got):total].tolist()]
            prompt_last = None
            if st.read is None:
                prompt_last, got = (got[0] if got else None), got[1:]
            st.out.extend(got)
            st.read = max(total, start)
            if st.ctl is None:
                spec, tables, rule = st.req
                st.ctl = RequestControl(spec, tables, rule, None if prompt_last is None else [prompt_last],
                                        st.out)
            sig = None
            if deck is not None:
                end, other = sigs[2 * deck], sigs[2 * deck + 1]
                sig = {"logp_end": end, "logp_other": other, "margin": other - end}
            tok = self._next(st.ctl, lambda s=sig: s)
            if sync:
                if tok is not None:
                    force_rows.append(b)
                    force_ids.append(tok)
            elif (-1 if tok is None else tok) != int(fids[j]) and not self._disagreed:
                self._disagreed = True
                log.error("otbench online: the device forced %d where the control says %s",
                          int(fids[j]), tok)
            if st.ctl.done and not st.logged:
                if current:
                    self._live[s] = False  # nothing left to do: later steps skip this slot
                st.logged = True
                self._finish(st.ctl)
        return force_rows, force_ids

