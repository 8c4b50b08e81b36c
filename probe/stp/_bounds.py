"""How much of a job is in flight in one engine, and the host memory that costs (docs/rules.md).

Three bounds, each sized to the engine's scheduler (`max_num_seqs`, the
engine's `capacity()`, or fewer: what its KV cache holds, below) unless the
job sets it:

* units in flight (`probe.units_in_flight`, default a quarter of the
  capacity, and at least the capacity up to 64: `default_units`): units between admission and result; each holds its
  trajectory's ids and, in its probe phase, its answers until graded;
* trajectories being sampled: half of those units at most while the
  engine is full, so trajectories run ahead of the probes that need them
  while the engine's batch is mostly probes (a unit's probe work, (n+1)·P
  answers, is ~50x its think request's at paper shape); while the engine
  runs fewer sequences than its capacity (the start of a run, probes run
  dry) any unit in flight may be sampling, so the engine never idles for
  want of trajectories (`UnitStream.wants`);
* units in their probe phase (holding answers until graded): an eighth of
  the units in flight (`holding_bound`); past it a unit's probes wait
  until one is graded, so a lagging grading lane pauses the probes;
* probe-phase engine sequences in flight (`probe.requests_in_flight`,
  default twice the capacity): probes, signals and forced answers; a
  request of n samples counts n, since vLLM fans it out into n requests.
  The scheduler runs `capacity` of them and the rest wait, so vLLM's
  waiting queue holds at most about one more batch. Counted as the engine
  counts them where the stream says (vLLM: a finished sample frees its
  place at once, its request's other samples still decoding), and the
  unfinished requests' samples, finished or not, at most twice the bound
  (a finished sample's answer and its request's prompt stay until the
  request ends).

Over all three, unless the job sets `probe.requests_in_flight`: the engine sequences of every phase
go to the engine only while they fit in its KV cache as vLLM's block manager holds them (`_kv`: a
position's shared prefix once in whole blocks, each sequence its own rest and what it can have
decoded; vLLM reports its cache once started, `VLLMEngine.kv_cache_tokens` and `kv_block_size`).

Host memory model (per engine; read in vLLM 0.32's `v1/request.py`,
`v1/engine/llm_engine.py` and `v1/engine/output_processor.py`): each
sequence in the engine core is a `Request` holding `prompt_token_ids`
(a list of Python ints decoded from the front end's message: 8 B per
pointer + 32 B per int object in CPython's allocator), a copy of that list
in `_all_token_ids` (8 B per id) and one block hash per block (~5 B per
id at 16-token blocks): `CORE_BYTES_PER_ID`. The front end keeps the
list it was given per request (shared by the n children) and this driver
the prompt tuple until the request is done: `FRONT_BYTES_PER_ID`. A
generated id costs the core two list slots and an int, and the driver's
unit ~9 B once packed and decoded (4 B int32 + ~4-5 B of text). A probe's
answer also carries its tokens' log-probabilities, kept by the front end
until the request ends (`LOGPROB_BYTES_PER_ID`, the flat form), and each
engine pins host memory (`PINNED_BYTES`). With the
defaults on an H200-sized engine (capacity 1,024) and paper-shaped units
(6,000-token prompts, thinking_limit 8,192, b = 320: 27 positions at
most, P = 16, 1,400-token answers) the bound is ~4.3 GiB per engine
(`host_memory`; 1.0 GiB of it log-probabilities), ~34 GiB for eight: a small
part of an 8xH200 node's host memory (typically 1-2 TiB). The bound
counts every unit in its probe phase as holding all its answers and
every prompt at the longest length, so it overstates.
"""

import dataclasses

CORE_BYTES_PER_ID = 53
"""Engine-core bytes per prompt id of one queued or running sequence (lists, int object, block hash)."""
FRONT_BYTES_PER_ID = 16
"""Front-end + driver bytes per prompt id of one request (vLLM's list and this driver's tuple)."""
GENERATED_BYTES_PER_ID = 48
"""Engine-core bytes per generated id of a sequence in flight (two list slots and an int object)."""
HELD_BYTES_PER_ID = 40
"""Driver bytes per held trajectory id (a tuple slot and its int object)."""
ANSWER_BYTES_PER_ID = 9
"""Driver bytes per held answer id until graded (int32 array + decoded text)."""
LOGPROB_BYTES_PER_ID = 192
"""Front-end bytes per generated id of a request that asks for its tokens' log-probabilities (the
probes): vLLM keeps them until the request ends. In the flat form the engine asks for
(`SamplingParams.flat_logprobs`, vLLM 0.32 `vllm/logprobs.py` `FlatLogprobs`) a position is an id,
a float, a rank, a text slot and two indices: 191 B measured with tracemalloc on 200,000 positions
(the form of one dict and one `Logprob` object per token measured 414 B)."""
TOP_LOGPROB_BYTES_PER_ID = 1904
"""Front-end bytes per generated id of a think request that asks for the top-20 log-probabilities
(``probe.field_probes = ["deepconf"]``): 21 entries per position in the flat form (the sampled token
and the top 20), 1,903 B measured with tracemalloc on 20,000 positions."""
PINNED_BYTES = 256 << 20
"""Page-locked host memory of one engine outside the model above: the 256 MiB pinned buffer counted
in the reading of vLLM 0.32 on GPU (the slot size of its shared-memory tensor arena,
`distributed/device_communicators/shm_tensor_arena.py` `_ARENA_SLOT_BYTES`, is the same figure);
pinned memory cannot be swapped, so it is counted whole."""
FALLBACK_CAPACITY = 256
"""Capacity assumed for an engine that reports none (vLLM's CPU default of `max_num_seqs`)."""


UNITS_FLOOR = 64
"""Units in flight by default at least (up to the engine's capacity): ~0.3 GiB of paper-shaped units."""


def default_units(capacity: int) -> int:
    """Units in flight by default: a quarter of the engine's sequences, and at least as many as it runs
    (up to `UNITS_FLOOR`), at least 2.

    A unit sampling its trajectory is one sequence: with fewer units than the engine runs, the engine
    idles whenever they are all sampling (benchmarks/plan_calibration.py, `max_num_seqs` 16: 4 units
    kept 11.9 sequences running on average), and the unit bound is only there for host memory."""
    return max(2, min(int(capacity), UNITS_FLOOR), int(capacity) // 4)


def default_requests(capacity: int) -> int:
    """Probe-phase sequences in flight by default: the running batch and one more waiting."""
    return max(1, 2 * int(capacity))


def thinking_bound(units: int) -> int:
    """Units whose trajectory is being sampled at once: half the units in flight, at least 1."""
    return max(1, (int(units) + 1) // 2)


def holding_bound(units: int) -> int:
    """Units in their probe phase at once (from their first position submitted to their result):
    an eighth of the units in flight, at least 4. Each holds its answers until graded, (n+1)·P of
    them; the probe-phase sequence bound keeps ~5 paper-shaped units running on an H200-sized
    engine, so this leaves room for a grading lane that lags, and pauses the probes when it lags
    further (else finished units would pile up to the unit bound, ~6 MB each at paper shape)."""
    return max(4, int(units) // 8)


@dataclasses.dataclass(frozen=True)
class HostMemory:
    """The host-memory bound of one engine's in-flight work, in bytes, by component."""

    probe_prompts: int
    probe_generated: int
    think_requests: int
    units: int
    probe_logprobs: int = 0
    pinned: int = 0

    @property
    def total(self) -> int:
        return (self.probe_prompts + self.probe_generated + self.think_requests + self.units
                + self.probe_logprobs + self.pinned)

    def line(self) -> str:
        g = 1 << 30
        return (f"host memory bound ~{self.total / g:.1f} GiB per engine (probe prompts "
                f"{self.probe_prompts / g:.1f}, their answers {self.probe_generated / g:.1f}, their "
                f"log-probabilities {self.probe_logprobs / g:.1f}, trajectories "
                f"being sampled {self.think_requests / g:.1f}, units held {self.units / g:.1f}, pinned "
                f"{self.pinned / g:.2f})")


def host_memory(*, units: int, requests: int, prompt_tokens: int, thinking_limit: int, answer_limit: int,
                P: int, b: int, top_logprobs: bool = False) -> HostMemory:
    """The host memory the bounds allow at most (`units`, `requests` as above; `prompt_tokens`: the longest
    question prompt). Positions per unit are at most `thinking_limit // b + 2` (segments are >= b tokens
    apart, and position 0); a probe prompt is at most prompt + thinking + a few marker ids.
    `top_logprobs`: the job records DeepConf's signal; its top-20 prompt log-probabilities are held
    per confidence request, counted here at the think requests' size and count (an upper bound:
    a unit has one confidence request, sent after its trajectory)."""
    longest = prompt_tokens + thinking_limit + 16
    positions = thinking_limit // max(1, b) + 2
    think_len = thinking_limit + answer_limit + 16
    thinking = units                   # every unit in flight may be sampling (`UnitStream.wants`)
    return HostMemory(
        # the core holds the sequences still decoding (<= requests); the front end and this
        # driver the unfinished requests' prompts and finished answers (<= 2 x requests)
        probe_prompts=requests * longest * (CORE_BYTES_PER_ID + 2 * FRONT_BYTES_PER_ID),
        probe_generated=2 * requests * answer_limit * GENERATED_BYTES_PER_ID,
        # the front end's log-probabilities of the probes' answers, until their request ends
        probe_logprobs=2 * requests * answer_limit * LOGPROB_BYTES_PER_ID,
        pinned=PINNED_BYTES,
        think_requests=thinking * (prompt_tokens * (CORE_BYTES_PER_ID + FRONT_BYTES_PER_ID)
                                   + think_len * (GENERATED_BYTES_PER_ID
                                                  + (TOP_LOGPROB_BYTES_PER_ID if top_logprobs else 0))),
        units=units * think_len * HELD_BYTES_PER_ID
        + holding_bound(units) * positions * P * answer_limit * ANSWER_BYTES_PER_ID,
    )
