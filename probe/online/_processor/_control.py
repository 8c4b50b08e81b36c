"""One request's online control as a state machine over its growing output (plain Python).

The logits processor keeps one `RequestControl` per controlled request and
calls `step()` before it samples the request's next token. The control
reads the live output list (vLLM appends to it in place), so it sees every
token the model wrote, and answers what this step needs: nothing, a
decision (the processor then reads the signals from this row's logits and
calls `decide`), or a forced token.

Decision points are the token-exact boundaries of the probe (docs/rules.md):
length 0 (before any thinking) and every length right after a block end
(`boundary_flags`: a boundary-vocabulary id, or under "vocab+span" a token
starting with a line feed after one ending with a line feed) -- or, when
the request names `lengths`, exactly those. The last position (the model
ending its thinking itself) is never asked, as in the offline walk.

A decision at length `L` is re-made at every call while the output still
has `L` tokens and is committed when it grows: a step whose sample is
discarded (a prompt prefilled in chunks samples and drops a token per
chunk) never leaves a decision behind. When the rule says stop, the
control forces the family's thinking end one token per step: the
separator when the last token does not end with a line feed (as the probe
prompt adds it), the marker (``</think>``; harmony's switch to the final
channel) and the answer-channel prefix, then lets the model answer.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from otbench.analysis.methods import CONFIDENCE_SIGNAL

from .._request import ControlSpec


@dataclasses.dataclass(frozen=True)
class Tables:
    """Per (tokenizer, family, boundary rule): what the control needs, as plain arrays and ids.

    Attributes:
      mask: bool[vocab] boundary vocabulary; ends_newline / starts_newline:
        bool[vocab] (the span rule; None under "vocab").
      signal_id: the ThinkBrake token; think_stop_ids: ids that end the
        thinking naturally; separator_ids, end_ids, answer_prefix_ids: the
        forced thinking end (`ProbeFormat`).
      eos_id: the model's end-of-sequence id (forced when a request cannot
        be controlled, so it ends at once instead of running uncontrolled).
    """

    mask: np.ndarray
    ends_newline: np.ndarray
    starts_newline: np.ndarray | None
    signal_id: int
    think_stop_ids: frozenset[int]
    separator_ids: tuple[int, ...]
    end_ids: tuple[int, ...]
    answer_prefix_ids: tuple[int, ...]
    eos_id: int | None = None

    @classmethod
    def from_format(cls, fmt: Any, eos_id: int | None = None) -> "Tables":
        """From a compiled `otbench.probe.tokens.ProbeFormat`."""
        v = fmt.vocab
        return cls(mask=np.asarray(v.mask, dtype=bool), ends_newline=np.asarray(v.ends_newline, dtype=bool),
                   starts_newline=np.asarray(v.starts_newline, dtype=bool) if fmt.span is not None else None,
                   signal_id=int(fmt.signal_id), think_stop_ids=frozenset(int(i) for i in fmt.think_stop_ids),
                   separator_ids=tuple(fmt.separator_ids), end_ids=tuple(fmt.end_ids),
                   answer_prefix_ids=tuple(fmt.answer_prefix_ids), eos_id=eos_id)

    def ends_block(self, ids: Sequence[int], i: int) -> bool:
        """Whether a block ends right after `ids[i]` (`boundary_flags` of one row)."""
        t = int(ids[i])
        if 0 <= t < self.mask.size and self.mask[t]:
            return True
        if self.starts_newline is not None and i >= 1:
            p = int(ids[i - 1])
            return bool(0 <= p < self.ends_newline.size and 0 <= t < self.starts_newline.size
                        and self.ends_newline[p] and self.starts_newline[t])
        return False

    def forced(self, last_id: int | None) -> tuple[int, ...]:
        """The thinking end forced after `last_id` (the last token so far, or of the prompt)."""
        ends_nl = last_id is not None and 0 <= last_id < self.ends_newline.size \
            and bool(self.ends_newline[last_id])
        sep = self.separator_ids if self.separator_ids and not ends_nl else ()
        return sep + self.end_ids + self.answer_prefix_ids


class RequestControl:
    """The online control of one request (see module docstring).

    Attributes:
      decisions: committed (length, signals, stop) triples, in order.
      stop_length: the thinking length where the control forced the end,
        None while it has not (or the model ended its thinking itself).
      natural_end: the thinking length where the model wrote its own end.
      broken: a one-line reason when the control had to give up (the
        output diverged from a forced token, e.g. after a preemption).
    """

    def __init__(self, spec: ControlSpec, tables: Tables, rule: Any, prompt: Sequence[int] | None,
                 output: list[int]):
        self.spec, self.tables, self.rule = spec, tables, rule
        self.output = output
        self._last_prompt = int(prompt[-1]) if prompt else None
        self._seen = 0
        self._block_end = False            # a block ended right after the last seen token
        self._pending: tuple[int, dict[str, float], bool] | None = None
        self._forcing: tuple[int, ...] = ()
        self._forced = 0                   # forced ids already in the output
        self._lengths = None if spec.lengths is None else frozenset(spec.lengths)
        self.history: dict[str, list[float]] = {}
        self.decided_lengths: list[int] = []
        self.decisions: list[tuple[int, dict[str, float], bool]] = []
        self.stop_length: int | None = None
        self.natural_end: int | None = None
        self.broken: str | None = None
        self.done = False
        # A method reading the group confidence (`ExitRule.window`): each step's token confidence,
        # by the output index of the token that step samples (a dropped sample's value is
        # overwritten by the step that samples the same index again), folded into the running
        # group confidence as the output grows -- the processor's deque and running sum
        # (`otbench.probe.grading.GroupConfidence`)
        self._group = None
        self._conf: dict[int, float] = {}
        window = getattr(rule, "window", None)
        if window is not None:
            from otbench.probe.grading import GroupConfidence

            self._group = GroupConfidence(window)

    # -- reading the output -----------------------------------------------------------
    def _length(self) -> int:
        out = self.output
        n = len(out)
        # Asynchronous scheduling appends placeholders (-1) until the sampled id arrives.
        while n > self._seen and out[n - 1] < 0:
            n -= 1
        return n

    def _commit(self) -> None:
        L, sig, stop = self._pending
        self._pending = None
        self.decisions.append((L, sig, stop))
        if stop:
            self.stop_length = L

    def _consume(self, n: int) -> None:
        out, t = self.output, self.tables
        for i in range(self._seen, n):
            if self.done:
                # Nothing after the end counts: a stop id in the answer is not a second
                # natural end (the V2 processor stops reading a finished control's tokens).
                break
            if self._pending is not None and i == self._pending[0]:
                self._commit()
            tok = int(out[i])
            if self._forcing:
                if self._forced < len(self._forcing):
                    if tok != self._forcing[self._forced]:
                        self.broken = (f"output diverged from the forced thinking end at token {i} "
                                       f"({tok} instead of {self._forcing[self._forced]})")
                        self.done = True
                    self._forced += 1
                if self._forced >= len(self._forcing):
                    self.done = True
                continue
            if tok in t.think_stop_ids:
                self.natural_end = i
                self.done = True
                continue
            if self._group is not None:
                conf = self._conf.pop(i, None)
                if conf is None:
                    # written without a step of ours (a resumed request's prefill): the group
                    # confidence of what follows would be wrong, so the control gives up
                    self.broken = f"no token confidence was read for output token {i}"
                    self.done = True
                    continue
                self._group.push(conf)
            self._block_end = t.ends_block(out, i)
        self._seen = n

    def wants_confidence(self) -> int | None:
        """The output index whose token this step samples, when the processor must read its
        confidence (a control reading the group confidence, still thinking), else None."""
        if self._group is None or self.done or self._forcing:
            return None
        # the whole list: under asynchronous scheduling a placeholder (-1) holds the index of the
        # token still being sampled, so this step samples the one after it
        return len(self.output)

    def observe(self, index: int, confidence: float) -> None:
        """This step's token confidence (`wants_confidence`), for the token at output `index`."""
        self._conf[int(index)] = float(confidence)

    def confidence_signals(self) -> dict[str, float]:
        """The group-confidence signal at the current length: `min_conf` of the tokens consumed so far."""
        return {CONFIDENCE_SIGNAL: self._group.min_conf()}

    # -- one sampling step ------------------------------------------------------------
    def step(self) -> tuple[str, int]:
        """("none", L), ("decide", L) or ("force", token id) for the step sampling token `L`."""
        n = self._length()
        if n > self._seen:
            self._consume(n)
            self.commit_history()
        elif self._pending is not None and self._pending[0] == n:
            # The output did not grow since the decision: that step's sample was
            # dropped (a prompt prefilled in chunks); decide again on this step.
            self.retract()
        if self.done:
            return ("none", n)
        if self._forcing:
            return ("force", self._forcing[self._forced])
        if self.spec.is_cap:
            if n >= self.spec.theta:
                return ("force", self._start(n, {}))
            return ("none", n)
        if self._lengths is not None:
            ask = n in self._lengths
        else:
            ask = n == 0 or self._block_end
        return ("decide", n) if ask else ("none", n)

    def _start(self, n: int, signals: dict[str, float]) -> int:
        last = int(self.output[n - 1]) if n else self._last_prompt
        force = self.tables.forced(last)
        if not force:                      # a family without any thinking end: nothing to force
            self.done = True
            self.broken = "the family has no thinking end to force"
            return int(self.tables.eos_id if self.tables.eos_id is not None else 0)
        self._pending = (n, signals, True)
        # Not yet committed: if this step's sample is dropped, the next call re-decides.
        self._forcing, self._forced = force, 0
        return force[0]

    def decide(self, length: int, signals: dict[str, float]) -> int | None:
        """Apply the rule at `length` with this step's `signals`; the id to force, or None."""
        hist = {k: self.history.get(k, []) + [float(v)] for k, v in signals.items()}
        lengths = self.decided_lengths + [length]
        stop = bool(self.rule.stop(hist, lengths, self.spec.theta))
        if stop:
            return self._start(length, signals)
        self._pending = (length, dict(signals), False)
        return None

    def retract(self) -> None:
        """Undo the uncommitted decision (its step's sample was dropped before reaching the output)."""
        if self._pending is not None and self._forced == 0:
            if self._pending[2]:
                self._forcing = ()
            self._pending = None

    def commit_history(self) -> None:
        """Fold the committed decisions' signals into the rule's history (called after `_consume`)."""
        while len(self.decided_lengths) < len(self.decisions):
            L, sig, _ = self.decisions[len(self.decided_lengths)]
            self.decided_lengths.append(L)
            for k, v in sig.items():
                self.history.setdefault(k, []).append(float(v))

    def summary(self) -> dict[str, Any]:
        return {"method": self.spec.method, "theta": self.spec.theta, "decisions": len(self.decisions),
                "stop_length": self.stop_length, "natural_end": self.natural_end, "broken": self.broken}
