"""The side-request controller's job and result records: one trajectory in, what happened online out."""

import dataclasses
from collections.abc import Mapping

from otbench.analysis.methods import OWN_SIDE_SIGNALS


@dataclasses.dataclass(frozen=True)
class SideJob:
    """One trajectory to run under the controller.

    Attributes:
      prompt: the question's prompt ids.
      seed_think: the thinking's seed (chunk `c` uses `chunk_seed(seed_think, c)`).
      seed_answer: the forced answer's seed.
      probe_seeds: per position `k`, the seed of its probe (sample 0 of the
        probe stage's request there); None: `chunk_seed(seed_answer, k + 1)`.
      lengths: a stored trajectory's `L(0..n)`: decide at `L(0..n-1)`
        (None: live decision points, module docstring).
      thinking: the stored thinking, fed as given instead of decoded (None: decode).
      finished: with `thinking`: the stored trajectory ended by itself.
      task, n_options: how answers are extracted (`otbench.probe.grading.answer_key`).
      cap: an FB method's thinking-token cap for this trajectory (None: `FieldRule.cap`).
      field_seeds: per field probe (`OWN_SIDE_SIGNALS`' keys), its seed at each position `k` (the
        probe stage's ``derive_seed(..., probe, k)``); None: `chunk_seed` of the answer seed.
    """

    prompt: tuple[int, ...]
    seed_think: int
    seed_answer: int
    probe_seeds: tuple[int, ...] | None = None
    lengths: tuple[int, ...] | None = None
    thinking: tuple[int, ...] | None = None
    finished: bool = True
    task: str = "math"
    n_options: int = 4
    cap: float | None = None
    field_seeds: Mapping[str, tuple[int, ...]] | None = None


def chunk_seed(seed: int, c: int) -> int:
    """The seed of continuation `c` of a request seeded `seed` (`c = 0`: `seed` itself)."""
    if c == 0:
        return int(seed)
    return (int(seed) * 6364136223846793005 + 1442695040888963407 * int(c)) % (1 << 62)


@dataclasses.dataclass
class SideResult:
    """What happened online for one trajectory (token counts are of the reasoning model).

    Attributes:
      stop_length: thinking tokens where the method stopped (None: it did not).
      position: the decision index `k` of the stop (else the number of decision points: `n`).
      thinking: the retained thinking; answer_ids: the answer (answer prefix included).
      natural_end: the model ended its thinking itself.
      points: the decision lengths reached; signals: per position probed, the field
        signals (``answer`` numbered per trajectory by `number_answers` with nothing graded),
        None where not probed; keys: per position probed, its answer key (None: none extracted).
      think_decoded: thinking tokens decoded (discarded ones included); discarded: decoded
        past a live decision point and dropped.
      probes: side requests; probe_prefill: their prompt ids not shared with the prefix
        (the suffix a prefix cache cannot serve); probe_decoded: their decoded ids.
      paid: the positions whose probes the rule paid for (OTBench's net rule).
      paid_prefill / paid_decoded: the part of those the method's decisions needed (decoded as
        the ``answer_tokens`` signal counts it, which OTBench's net rule reads).
      answer_decoded: the answer's ids.
      texts: per position probed, the probe's decoded text (answer prefix included).
      side_cached: prompt ids of the side requests the engine's prefix cache served (when its
        stream reports it: `pop_cached_tokens`).
    """

    stop_length: int | None = None
    position: int = 0
    thinking: tuple[int, ...] = ()
    answer_ids: tuple[int, ...] = ()
    natural_end: bool = False
    points: list[int] = dataclasses.field(default_factory=list)
    signals: dict[str, list] = dataclasses.field(default_factory=dict)
    think_decoded: int = 0
    discarded: int = 0
    probes: int = 0
    probe_prefill: int = 0
    probe_decoded: int = 0
    paid_prefill: int = 0
    paid_decoded: int = 0
    answer_decoded: int = 0
    side_cached: int = 0
    texts: dict[int, str] = dataclasses.field(default_factory=dict)
    keys: dict[int, str | None] = dataclasses.field(default_factory=dict)
    paid: list[int] = dataclasses.field(default_factory=list)

    @property
    def net_tokens(self) -> int:
        """Retained thinking plus the signal's paid tokens (OTBench's net cost rule, measured)."""
        return len(self.thinking) + self.paid_prefill + self.paid_decoded


def field_seed(job: SideJob, probe: str, k: int) -> int:
    """The seed of field probe `probe` at position `k`: the probe stage's (`SideJob.field_seeds`),
    else a stream of the answer seed apart from the STP probe's (`chunk_seed(seed_answer, k + 1)`)."""
    seeds = (job.field_seeds or {}).get(probe)
    if seeds is not None and k < len(seeds):
        return int(seeds[k])
    base = chunk_seed(job.seed_answer, (1 << 40) * (1 + tuple(OWN_SIDE_SIGNALS).index(probe)))
    return chunk_seed(base, k + 1)
