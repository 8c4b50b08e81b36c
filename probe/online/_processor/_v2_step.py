"""The V2 processor's step without a blocking device -> host copy: the decision on the device, the
host's state machine one step behind (torch; imported by `_v2` only).

Why: a ``.tolist()`` inside the sampler waits for the step's forward pass and then runs a Python
loop while the GPU idles, every step a controlled request is in the batch. Instead, per step and
live row, the host sends a *plan* made from what it knows -- its `RequestControl` replayed through
the previous step, whether that step's sample was kept (``seq_lens_upper_bound_np`` against
``prefill_len``, both host arrays; Model Runner V2 samples and drops a token per prefill chunk,
`Sampler.__call__` `get_num_sampled_and_rejected`) and the output length now -- and the device
resolves the one thing the host does not know yet, the token sampled last step
(``all_token_ids[slot, total_len - 1]``, written by `input_batch.py` `_post_update_kernel` before
this step's sampler runs on the same stream):

* ``FREE``: the control runs free. The device decides exactly when the synchronous machine
  would: no natural end in the last token (`Tables.think_stop_ids`), and the host's ask
  (``otbench_lengths`` membership, or the cap reached) or, at block ends, length 0 or
  `Tables.ends_block` of the last two tokens. A method with a device-side form
  (`Method.device_signal`: its stop is ``signal <= θ``) compares the recorded-style signal with θ
  in float64 (``other - end <= theta`` for the margin), the comparison its own ``stop`` makes on
  the host; a stop forces the first id of `Tables.forced` of the last token.
* ``FORCE``: the host knows the id (the forced thinking end runs on, or a refused request's EOS).
* ``NONE``: nothing. ``SYNC``: a method without a device-side form, or a request resumed with
  output the host has not read: this row's step is replayed at once after the copy (blocking).

The copy (tokens, totals, signals, the device's action) is issued without blocking into pinned
memory with an event; the next step's `apply` waits for that event -- the previous step's sampler,
which ran before this step's forward pass on the stream, so the GPU keeps the forward pass queued
-- and replays each row's step there through the same `RequestControl` calls as before. The replay
and the device agree by construction (checked: a disagreement is logged). A forced id that a later
stage overrode (an output diverging from the forced end, which V1 and V2 report as ``broken``) is
seen one step late, so at most one more forced id follows it.
"""

import logging

import numpy as np
import torch

log = logging.getLogger("vllm.otbench_online")

NONE, FREE, FORCE, SYNC = 0, 1, 2, 3
_SIGNAL = {"logp_end": 0, "logp_other": 1, "margin": 2}


def plan(st, n: int, refused_type) -> tuple[int, int, int, int]:
    """(plan, host_ask, block_mode, forced id) of slot `st` for the step sampling output token `n`."""
    ctl = st.ctl
    if isinstance(ctl, refused_type):
        eos = ctl._eos
        return (FORCE, 0, 0, int(eos)) if eos is not None and n == 0 else (NONE, 0, 0, -1)
    spec, _, rule = st.req
    if ctl is None and n > 0 or (not spec.is_cap and rule.device_signal is None):
        return (SYNC, 0, 0, -1)
    if ctl is not None:
        if ctl.done:
            return (NONE, 0, 0, -1)
        if ctl._forcing:
            k, forced = ctl._forced, ctl._forcing
            if st.kept:                    # last step wrote forced[k]
                return (FORCE, 0, 0, forced[k + 1]) if k + 1 < len(forced) else (NONE, 0, 0, -1)
            if not (ctl._pending is not None and ctl._pending[2] and k == 0):
                return (FORCE, 0, 0, forced[k])
            # A stop decided on a dropped sample: the machine retracts it and decides again.
    if spec.is_cap:
        return (FREE, int(n >= spec.theta), 0, -1)
    if spec.lengths is not None:
        return (FREE, int(n in set(spec.lengths)), 0, -1)
    return (FREE, 0, 1, -1)


class DeviceTables:
    """Every (family, boundary) `Tables` in use, stacked on the device: [T, V] lookups per row."""

    def __init__(self):
        self._index: dict[int, int] = {}
        self._tables: list = []
        self._dev = None

    def index(self, tables) -> int:
        key = id(tables)
        if key not in self._index:
            self._index[key] = len(self._tables)
            self._tables.append(tables)
            self._dev = None
        return self._index[key]

    def on(self, device: torch.device) -> dict[str, torch.Tensor]:
        if self._dev is None or self._dev["mask"].device != device:
            size = max([t.mask.size for t in self._tables] + [1])

            def stack(get):
                out = np.zeros((max(1, len(self._tables)), size), dtype=bool)
                for i, t in enumerate(self._tables):
                    a = get(t)
                    if a is not None:
                        out[i, :a.size] = a
                return torch.from_numpy(out).to(device)

            def stops(t):
                a = np.zeros(t.mask.size, dtype=bool)
                ids = [i for i in t.think_stop_ids if 0 <= i < a.size]
                a[ids] = True
                return a

            self._dev = {"mask": stack(lambda t: t.mask), "ends": stack(lambda t: t.ends_newline),
                         "starts": stack(lambda t: t.starts_newline), "stop": stack(stops),
                         "span": torch.tensor([t.starts_newline is not None for t in self._tables]
                                              or [False], device=device)}
        return self._dev


def device_actions(tok_buf: torch.Tensor, total: torch.Tensor, tabs: dict[str, torch.Tensor],
                   slots: torch.Tensor, ints: torch.Tensor, theta: torch.Tensor,
                   sig: torch.Tensor) -> torch.Tensor:
    """[R] int64 id to force per live row (-1: none), from the plans (`ints`: [8, R]) on the device.

    ``ints`` rows: plan, host_ask, block_mode, host forced id, output length n, table index,
    signal kind (-1: a cap), and the two first forced ids (after a last token without / with a
    line feed at its end). `sig`: [R, 2] float64 (log p(signal), max log p(other)), NaN where the
    row reads none.
    """
    code, ask_h, block, hforce, n, tb, kind = (ints[i] for i in range(7))
    f_plain, f_nl = ints[7], ints[8]
    size = tabs["mask"].shape[1]
    tot = total[slots].to(torch.long)
    last = tok_buf[slots, (tot - 1).clamp(min=0)].to(torch.long)
    prev = tok_buf[slots, (tot - 2).clamp(min=0)].to(torch.long)
    in_last, in_prev = (last >= 0) & (last < size), (prev >= 0) & (prev < size)
    lc, pc = last.clamp(0, size - 1), prev.clamp(0, size - 1)
    natural = (n >= 1) & in_last & tabs["stop"][tb, lc]
    ends = in_last & tabs["mask"][tb, lc]
    ends = ends | (tabs["span"][tb] & (n >= 2) & in_last & in_prev & tabs["ends"][tb, pc]
                   & tabs["starts"][tb, lc])
    ask = (code == FREE) & ~natural & ((ask_h == 1) | ((block == 1) & ((n == 0) | ends)))
    value = torch.where(kind == 0, sig[:, 0], torch.where(kind == 1, sig[:, 1], sig[:, 1] - sig[:, 0]))
    stop = ask & ((kind < 0) | (value <= theta))
    first = torch.where(in_last & tabs["ends"][tb, lc], f_nl, f_plain)
    return torch.where(code == FORCE, hforce, torch.where(stop, first, torch.full_like(first, -1)))


def write_forced(logits: torch.Tensor, rows: torch.Tensor, fid: torch.Tensor) -> None:
    """Leave only ``fid[k]`` finite in row ``rows[k]`` where ``fid[k] >= 0`` (no host sync)."""
    sub = logits.index_select(0, rows)
    on = (fid >= 0).view(-1, 1)
    at = fid.clamp(min=0).view(-1, 1)
    keep = sub.gather(1, at)
    new = torch.where(on, torch.full_like(sub, float("-inf")), sub)
    new.scatter_(1, at, torch.where(on, torch.zeros_like(keep), keep))
    logits.index_copy_(0, rows, new)


class Copy:
    """A device -> host copy issued without blocking, read when `values()` is called."""

    def __init__(self, vals: torch.Tensor):
        if vals.device.type == "cuda":
            self._host = torch.empty(vals.shape, dtype=vals.dtype, pin_memory=True)
            self._host.copy_(vals, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host, self._event = vals, None
        self._list = None

    def values(self) -> list[float]:
        if self._list is None:
            if self._event is not None:
                self._event.synchronize()  # the previous step's sampler: already run, or about to
            self._list = self._host.tolist()
        return self._list
