"""The probe loop: trajectories, segmentation, answer probes and signals for work units (SPEC §3, §6.3).

A *work unit* is one (question, trajectory) pair. Its result (`UnitResult`)
depends only on the job, the question and the engine's outputs for the
unit's own requests, whose seeds come from what they are
(`_seeds.derive_seed`), never from run order. Units are processed in
batches (all of a batch's requests go to the engine together so it can
batch them and its prefix cache can serve shared prefixes), and results can
be assembled in any order: this is the seam for crash-safe resume (commit
each `UnitResult.to_record()` as it completes, skip completed units on
restart) and for data-parallel workers (each runs `probe_units` on its
share). Bit-identical floats across different batchings are not promised by
the engines (batched kernels may round differently); seeds and token-level
sampling streams are.

Per unit:
1. sample the trajectory (stop at the family's thinking-end token, or at
   end-of-turn for the generic family; limit `thinking_limit`);
2. segment its thinking ids in token space (`_segment`), giving `L`;
3. in one engine call: the original answer (native thinking families; and
   any trajectory cut at the limit, as a forced answer) and `P` answer
   probes at every position `k = 0..n`; in another: the ThinkBrake signal at
   every position (log-probability of the thinking-end token and of the
   most likely other token);
4. grade every answer through the grading seam (`_grader`).
"""

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from otbench.analysis.measurement import segment_flat
from otbench.probe.config import derive_seed
from otbench.probe.engines import Engine, GenRequest
from otbench.probe.grading import GradeBatch, GradeItem
from otbench.probe.tokens import ProbeFormat

SIGNALS = ("logp_end", "logp_other", "margin")
"""Signal columns written by the probe: `margin = logp_other - logp_end` is the
ThinkBrake quantity (stop at the first boundary where it is <= θ; SPEC §6.2)."""


@dataclasses.dataclass(frozen=True)
class UnitResult:
    """Everything measured for one (question, trajectory) work unit.

    Attributes:
      group, dataset, question: the question's group, source dataset and id.
      trajectory: trajectory index `r` (0..R-1).
      prompt, thinking: token ids (thinking without the stop token).
      finished: thinking ended by itself on the family's thinking-stop token
        (False: cut at the thinking limit, or ended on another token such as
        end-of-turn inside the thinking; `stop_id` tells which).
      stop_id: the token that ended the thinking (None at the limit).
      answer: ids of the original answer (after the family's answer prefix;
        for a finished generic-chat trajectory the reply itself is the answer
        and this is empty).
      y, y_status: the original answer's grade.
      L: int[n+1] retained thinking tokens per position.
      C: int[n+1] correct probes per position.
      probe_tokens: [n+1][P] answer ids of each probe.
      probe_status: [n+1][P] grade status of each probe.
      logp_end, logp_other, other_id: [n+1] signal at each position.
      seeds: {"think": int, "answer": int | None, "probe": [n+1 ints]}.
    """

    group: str
    dataset: str
    question: str
    trajectory: int
    prompt: tuple[int, ...]
    thinking: tuple[int, ...]
    finished: bool
    stop_id: int | None
    answer: tuple[int, ...]
    y: int
    y_status: str
    L: tuple[int, ...]
    C: tuple[int, ...]
    probe_tokens: tuple[tuple[tuple[int, ...], ...], ...]
    probe_status: tuple[tuple[str, ...], ...]
    logp_end: tuple[float, ...]
    logp_other: tuple[float, ...]
    other_id: tuple[int, ...]
    seeds: dict

    @property
    def n(self) -> int:
        return len(self.L) - 1

    def to_record(self) -> dict[str, Any]:
        """A JSON-serializable dict (lists for tuples); `from_record` inverts it exactly."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "UnitResult":
        def tup(x):
            return tuple(tup(v) for v in x) if isinstance(x, list) else x
        kw = {f.name: rec[f.name] for f in dataclasses.fields(cls)}
        for k, v in kw.items():
            if isinstance(v, list):
                kw[k] = tup(v)
        return cls(**kw)


@dataclasses.dataclass
class PhaseStats:
    """Tokens and seconds per phase of a run (for progress and the benchmark)."""

    requests: int = 0
    prompt_tokens: int = 0
    generated: int = 0
    seconds: float = 0.0

    def add(self, requests: int, prompt_tokens: int, generated: int, seconds: float) -> None:
        self.requests += requests
        self.prompt_tokens += prompt_tokens
        self.generated += generated
        self.seconds += seconds

    @property
    def tokens_per_s(self) -> float:
        return self.generated / self.seconds if self.seconds > 0 else 0.0


@dataclasses.dataclass
class RunStats:
    think: PhaseStats = dataclasses.field(default_factory=PhaseStats)
    probe: PhaseStats = dataclasses.field(default_factory=PhaseStats)
    signal: PhaseStats = dataclasses.field(default_factory=PhaseStats)
    grading_seconds: float = 0.0
    cache_queries: int = 0
    cache_hits: int = 0

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in ("think", "probe", "signal"):
            d[k]["tokens_per_s"] = getattr(self, k).tokens_per_s
        d["cache_hit_rate"] = self.cache_hits / self.cache_queries if self.cache_queries else None
        return d


def _timed_generate(engine: Engine, reqs: Sequence[GenRequest], sampling, stats: PhaseStats):
    t = time.perf_counter()
    outs = engine.generate(reqs, sampling)
    dt = time.perf_counter() - t
    gen = sum(len(c.token_ids) + (c.stop_id is not None) for cs in outs for c in cs)
    stats.add(len(reqs), sum(len(r.prompt) for r in reqs), gen, dt)
    return outs


def probe_units(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
                prompts: Sequence[Sequence[int]], units: Sequence[tuple[int, int]],
                P: int, b: int, thinking_limit: int, answer_limit: int, sampling,
                grade_batch: GradeBatch, tokenizer, stats: RunStats | None = None) -> list[UnitResult]:
    """Measure a batch of work units `(question index, trajectory)` (see module docstring).

    Args:
      questions: `_datasets.Question`s; `prompts[i]` are question `i`'s prompt ids.
      units: (question index, trajectory index) pairs.
      tokenizer: decodes answers for grading (only answers are ever decoded).
    """
    stats = stats if stats is not None else RunStats()
    fam = fmt.family
    cache0 = engine.cache_stats()

    # 1. trajectories
    think_seed = [derive_seed(model, questions[q].dataset, questions[q].id, r, "think") for q, r in units]
    reqs = [GenRequest(prompts[q], 1, s, thinking_limit, fmt.think_stop_ids)
            for (q, _), s in zip(units, think_seed)]
    thinking = [o[0] for o in _timed_generate(engine, reqs, sampling, stats.think)]

    # 2. segmentation (token space, all units at once)
    lens = np.fromiter((len(c.token_ids) for c in thinking), dtype=np.int64, count=len(units))
    off = np.zeros(len(units) + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    flat = np.fromiter((t for c in thinking for t in c.token_ids), dtype=np.int64, count=int(off[-1]))
    L_flat, L_off = segment_flat(flat, off, fmt.vocab.mask, b, span=fmt.span)
    Ls = [tuple(int(x) for x in L_flat[L_off[i]:L_off[i + 1]]) for i in range(len(units))]

    # 3. answers and probes (one call), signals (another)
    gen_reqs: list[GenRequest] = []
    where: list[tuple[int, int]] = []          # (unit, position or -1 for the original answer)
    sig_ctx: list[list[int]] = []
    answer_seed: list[int | None] = []
    probe_seed: list[list[int]] = []
    for i, ((q, r), comp) in enumerate(zip(units, thinking)):
        qs = questions[q]
        th = comp.token_ids
        finished = comp.stop_id is not None and comp.stop_id in fmt.think_stop_ids
        if fam.native_thinking or not finished:
            s = derive_seed(model, qs.dataset, qs.id, r, "answer")
            gen_reqs.append(GenRequest(fmt.answer_context(prompts[q], th, finished), 1, s,
                                       answer_limit, fmt.answer_stop_ids))
            where.append((i, -1))
            answer_seed.append(s)
        else:
            answer_seed.append(None)
        seeds = []
        for k, Lk in enumerate(Ls[i]):
            s = derive_seed(model, qs.dataset, qs.id, r, "probe", k)
            seeds.append(s)
            gen_reqs.append(GenRequest(fmt.probe_prompt(prompts[q], th, Lk), P, s, answer_limit,
                                       fmt.answer_stop_ids))
            where.append((i, k))
            sig_ctx.append(fmt.signal_context(prompts[q], th, Lk))
        probe_seed.append(seeds)
    outs = _timed_generate(engine, gen_reqs, sampling, stats.probe)
    t = time.perf_counter()
    sigs = engine.signals(sig_ctx, fmt.signal_id)
    stats.signal.add(len(sig_ctx), sum(map(len, sig_ctx)), len(sig_ctx), time.perf_counter() - t)

    # 4. grading: every answer, plus the reply itself for finished generic trajectories
    items: list[GradeItem] = []
    prefix = list(fmt.answer_prefix_ids)
    for (i, _), comps in zip(where, outs):
        q = questions[units[i][0]]
        for c in comps:
            text = tokenizer.decode(prefix + list(c.token_ids), skip_special_tokens=True)
            items.append(GradeItem(q.task, q.reference, text, q))
    reply_items = []
    for i, ((q, _), comp) in enumerate(zip(units, thinking)):
        if answer_seed[i] is None:
            qs = questions[q]
            reply_items.append(i)
            items.append(GradeItem(qs.task, qs.reference,
                                   tokenizer.decode(list(comp.token_ids), skip_special_tokens=True), qs))
    t = time.perf_counter()
    grades = grade_batch(items)
    stats.grading_seconds += time.perf_counter() - t

    # assemble
    n_units = len(units)
    y = [0] * n_units
    y_status = [""] * n_units
    answer: list[tuple[int, ...]] = [()] * n_units
    C = [[0] * len(Ls[i]) for i in range(n_units)]
    ptok: list[list[tuple]] = [[()] * len(Ls[i]) for i in range(n_units)]
    pstat: list[list[tuple]] = [[()] * len(Ls[i]) for i in range(n_units)]
    g = 0
    for (i, k), comps in zip(where, outs):
        gs = grades[g:g + len(comps)]
        g += len(comps)
        if k < 0:
            answer[i] = comps[0].token_ids
            y[i], y_status[i] = int(gs[0][0]), gs[0][1]
        else:
            C[i][k] = sum(int(c) for c, _ in gs)
            ptok[i][k] = tuple(c.token_ids for c in comps)
            pstat[i][k] = tuple(s for _, s in gs)
    for i in reply_items:
        y[i], y_status[i] = int(grades[g][0]), grades[g][1]
        g += 1

    results = []
    s_at = 0
    for i, ((q, r), comp) in enumerate(zip(units, thinking)):
        qs = questions[q]
        m = len(Ls[i])
        sg = sigs[s_at:s_at + m]
        s_at += m
        finished = comp.stop_id is not None and comp.stop_id in fmt.think_stop_ids
        results.append(UnitResult(
            group=qs.group, dataset=qs.dataset, question=qs.id, trajectory=r,
            prompt=tuple(int(t) for t in prompts[q]), thinking=comp.token_ids,
            finished=finished, stop_id=comp.stop_id, answer=answer[i], y=y[i], y_status=y_status[i],
            L=Ls[i], C=tuple(C[i]), probe_tokens=tuple(ptok[i]), probe_status=tuple(pstat[i]),
            logp_end=tuple(s.logp_end for s in sg), logp_other=tuple(s.logp_other for s in sg),
            other_id=tuple(s.other_id for s in sg),
            seeds={"think": think_seed[i], "answer": answer_seed[i], "probe": probe_seed[i]},
        ))
    cache1 = engine.cache_stats()
    if cache0 is not None and cache1 is not None:
        stats.cache_queries += cache1["queries"] - cache0["queries"]
        stats.cache_hits += cache1["hits"] - cache0["hits"]
    return results


def encode_prompts(fmt: ProbeFormat, tokenizer, questions: Sequence, instructions: dict[str, str]) -> list[list[int]]:
    """Prompt ids per question: the family's chat text, tokenized once (no special-token insertion)."""
    out = []
    for q in questions:
        text = fmt.family.render_prompt(instructions[q.task], q.body() if hasattr(q, "body") else q.text)
        out.append([int(t) for t in tokenizer.encode(text, add_special_tokens=False)])
    return out


def run_units(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
              prompts: Sequence[Sequence[int]], R: int, P: int, b: int, thinking_limit: int,
              answer_limit: int, sampling, grade_batch: GradeBatch, tokenizer,
              units_per_batch: int = 16, stats: RunStats | None = None,
              on_batch: Callable[[list[UnitResult], RunStats], None] | None = None,
              skip: Callable[[tuple[int, int]], bool] | None = None) -> list[UnitResult]:
    """All `len(questions) * R` work units in batches of `units_per_batch`.

    `skip(unit)` leaves out units already done (the resume seam), and
    `on_batch(results, stats)` is called after each batch (progress, commits).
    """
    stats = stats if stats is not None else RunStats()
    units = [(q, r) for q in range(len(questions)) for r in range(R)]
    if skip is not None:
        units = [u for u in units if not skip(u)]
    out: list[UnitResult] = []
    for start in range(0, len(units), units_per_batch):
        batch = units[start:start + units_per_batch]
        res = probe_units(engine, fmt, model=model, questions=questions, prompts=prompts,
                          units=batch, P=P, b=b, thinking_limit=thinking_limit,
                          answer_limit=answer_limit, sampling=sampling,
                          grade_batch=grade_batch, tokenizer=tokenizer, stats=stats)
        out.extend(res)
        if on_batch is not None:
            on_batch(res, stats)
    return out
