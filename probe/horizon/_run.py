"""Run a horizon job: arms' trajectories, fixed-horizon stops, candidate-logit readouts, checks (docs/rules.md).

Steps (everything from token ids; only answers are ever decoded, to grade them):

1. prompts per arm (the arm's instruction appended to the task instruction;
   GPT-OSS effort by the "Reasoning: ..." line) and per item;
2. trajectories: `replicates` per (arm, item), generated with the family's
   sampling and the seed `derive_seed(model, dataset, question, r, "think")`,
   the same seed in every arm, so arms pair within item and replicate
   (scripted arms take `_horizon_sources.scripted_thinking`);
3. natural answers: a finished run's own answer (sampled after its own
   thinking-end marker, seed phase "answer"); a run cut at the limit gets the
   forced answer of its full reasoning; the reply itself for the generic
   family; graded by its option letter;
4. readout inputs (`_horizon_stops`): "stop" at every horizon, checkpoint and
   control horizon, in each context; "terminal" (the complete block); the
   "matched" readouts of each [[matched]] block; the prefix controls;
5. one candidate-logit readout per distinct input (`_readout.readout_logprobs`:
   padded batches on the transformers engine, else `engine.choice_logprobs`;
   over every spelling id; `_horizon_readout`) and, with `continuation`, one
   greedy generated answer of up to `answer_limit` tokens;
6. `OUT/` through `otbench.analysis.measurement._horizon_run.write_run`, and
   `OUT/run.json` with this execution's timings (kept out of the manifest).
"""

import dataclasses
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from otbench.probe.config import Sampling, derive_seed, load_instructions
from otbench.probe.engines import Engine, GenRequest, open_engine
from otbench.probe.grading import LETTERS, extract_choice
from otbench.probe.stp import RunSummary, resolve_engine_config
from otbench.probe.tokens import ProbeFormat, build_vocabulary, compile_format

from otbench.files import provenance

from ._job import HorizonJob
from ._readout import OptionSpellings, find_spellings, logp_from_ids, readout_logprobs, score_logp
from ._sources import load_choice_questions, scripted_thinking
from ._stops import (
    assign_donors,
    close,
    control_seed,
    plain_ids,
    random_prefix,
    shuffled_prefix,
    stop_input,
)
from otbench.errors import ArgumentError

GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=0.0)
HorizonSummary = RunSummary
"""What `run_horizon` did: where the run is, its manifest, and this execution's stats."""


@dataclasses.dataclass
class _Traj:
    arm: str
    q: int
    r: int
    seed: int
    prompt: list[int]
    thinking: tuple[int, ...]
    finished: bool
    stop_id: int | None
    scripted: bool
    answer: tuple[int, ...] = ()
    letter: str | None = None
    status: str = ""


def _encode(tok, text: str) -> list[int]:
    return [int(t) for t in tok.encode(text, add_special_tokens=False)] if text else []


def _hash_ids(ids: Sequence[int]) -> str:
    return hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()


def render_prompt(job: HorizonJob, arm, question, instruction: str) -> str:
    """The arm's prompt text for one item (instruction + arm text; effort in the system message)."""
    fam = job.family
    if arm.effort is not None:
        fam = dataclasses.replace(fam, system=re.sub(r"Reasoning: \w+", f"Reasoning: {arm.effort}",
                                                     fam.system))
    text = instruction + ("\n\n" + arm.instruction if arm.instruction else "")
    return fam.render_prompt(text, question.body())


def _parse(tok, ids: Sequence[int], n_options: int) -> tuple[str | None, str]:
    letter = extract_choice(tok.decode(list(ids), skip_special_tokens=True), n_options)
    return letter, "ok" if letter is not None else "no_answer"


def _chunks(seq: list, size: int):
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


def run_horizon(job: HorizonJob, out: str | os.PathLike, *, engine: Engine | None = None,
                overwrite: bool = False, progress: bool = True,
                log: Callable[[str], None] | None = None) -> HorizonSummary:
    """Run `job` and write the run directory `out` (see the module docstring).

    `engine`: an open engine to use (tests share one); by default the job's
    engine is opened here and closed at the end.
    """
    from otbench.analysis.measurement import write_run

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out}: already exists (pass `overwrite` to replace it)")
    t0 = time.perf_counter()
    questions = load_choice_questions(job.data)
    if not questions:
        raise ArgumentError("the job's [data] selects no questions")
    own = engine is None
    engine_cfg = job.base.engine
    if own:
        # Located as the probe runner does (embedded entry, Hugging Face id through the hub
        # cache, local folder): a wrong path or id is one line before any engine starts.
        engine_cfg = resolve_engine_config(job.base, log)
        log(f"starting the {engine_cfg.kind} engine on {engine_cfg.model} ...")
        engine = open_engine(engine_cfg)
    stats: dict[str, Any] = {"engine_start_s": time.perf_counter() - t0}
    try:
        tok = engine.tokenizer()
        V = engine.vocab_size()
        vocab = build_vocabulary(tok, V)
        fmt = compile_format(job.family, tok, vocab, boundary_rule=job.base.boundary)
        result = _run(job, engine, fmt, tok, V, questions, stats, log, progress)
        stp = None
        if job.stp_logit_set:
            from ._stp import run_stp_logit
            log(f"candidate-logit STP of {job.stp_logit_set}")
            t = time.perf_counter()
            stp = run_stp_logit(engine, fmt, job, questions, result["spellings"], result["prefix_ids"],
                                out_dir=None)
            stats["stp_logit_s"] = time.perf_counter() - t
        info = engine.info()
    finally:
        if own:
            engine.close()
    man = result["manifest"]
    man["provenance"]["engine"] = {k: v for k, v in info.items() if k != "config"} | {
        "config": {k: v for k, v in engine_cfg.as_dict().items() if k != "model"}}
    man["provenance"]["tokenizer_hash"] = vocab.tokenizer_hash
    if own and job.base.hub is not None:
        man["provenance"]["model"] = {"id": job.base.model, "repository": job.base.hub[0],
                                      "revision": engine_cfg.revision}
    written = write_run(out, man, result["trajectories"], result["readouts"], overwrite=overwrite)
    if stp is not None:
        from otbench.analysis.measurement import save
        save(stp, out / "stp_logit", overwrite=True)
    stats["total_s"] = time.perf_counter() - t0
    return RunSummary.write(out, written, stats)


@dataclasses.dataclass
class _Ctx:
    """What every phase of a horizon run reads: the job, the engine and the run's fixed ids."""

    job: HorizonJob
    engine: Engine
    fmt: ProbeFormat
    tok: Any
    V: int
    questions: list
    stats: dict
    log: Callable[[str], None]
    progress: bool
    n_opt: dict[int, int]
    spell: OptionSpellings
    prefix_ids: list[int]
    closure_ids: list[int]
    instruction: str
    prompts: dict[str, list[list[int]]]

    @property
    def model(self) -> str:
        return self.job.base.model


@dataclasses.dataclass
class _Inputs:
    """Readout inputs, each distinct id sequence once: rows point at their input's index."""

    continuation: bool
    ids: dict[tuple[int, ...], int] = dataclasses.field(default_factory=dict)
    rows: list[tuple[dict[str, Any], int]] = dataclasses.field(default_factory=list)
    cont: set[int] = dataclasses.field(default_factory=set)

    def add(self, row: dict[str, Any], ids: Sequence[int], cont: bool) -> None:
        u = self.ids.setdefault(tuple(ids), len(self.ids))
        self.rows.append((row, u))
        if cont and self.continuation:
            self.cont.add(u)


def _run(job: HorizonJob, engine: Engine, fmt: ProbeFormat, tok, V: int, questions: list,
         stats: dict, log, progress: bool) -> dict[str, Any]:
    n_opt = {i: len(q.options) for i, q in enumerate(questions)}
    spell: OptionSpellings = find_spellings(tok, max(n_opt.values()), V)
    if not all(spell.ids[LETTERS.index(q.reference)] for q in questions):
        log("warning: a gold letter has no one-token spelling; its readouts have q_true = 0")
    prefix_ids = _encode(tok, job.answer_prefix) if job.answer_prefix is not None \
        else list(fmt.answer_prefix_ids)
    instruction = load_instructions()["choice"]
    c = _Ctx(job, engine, fmt, tok, V, questions, stats, log, progress, n_opt, spell, prefix_ids,
             _encode(tok, job.closure_text), instruction,
             {a.name: [_encode(tok, render_prompt(job, a, q, instruction)) for q in questions]
              for a in job.arms})
    trajs = _trajectories(c)
    _natural_answers(c, trajs)
    inp = _Inputs(job.continuation)
    _stop_inputs(c, trajs, inp)
    _matched_inputs(c, trajs, inp)
    missing_swaps = _control_inputs(c, trajs, inp) if job.control_arm else {}
    uniq, lp_ids, conts = _read(c, inp)
    return {"manifest": _manifest(c, missing_swaps), "trajectories": _trajectory_rows(c, trajs),
            "readouts": _readout_rows(c, inp, uniq, lp_ids, conts), "spellings": spell,
            "prefix_ids": prefix_ids}


def _trajectories(c: _Ctx) -> list[_Traj]:
    """Every arm's trajectories (the same seeds across arms); a scripted arm's are written, not sampled."""
    job, fmt = c.job, c.fmt
    trajs: list[_Traj] = []
    reqs, where = [], []
    for a in job.arms:
        limit = a.thinking_limit or job.thinking_limit
        for qi, q in enumerate(c.questions):
            for r in range(job.replicates):
                seed = derive_seed(c.model, q.dataset, q.id, r, "think")
                if a.script is not None:
                    th = tuple(scripted_thinking(c.tok, a.script, q.reference, limit))
                    trajs.append(_Traj(a.name, qi, r, seed, c.prompts[a.name][qi], th, False, None, True,
                                       status="scripted"))
                    continue
                trajs.append(_Traj(a.name, qi, r, seed, c.prompts[a.name][qi], (), False, None, False))
                reqs.append(GenRequest(c.prompts[a.name][qi], 1, seed, limit, fmt.think_stop_ids))
                where.append(len(trajs) - 1)
    t = time.perf_counter()
    for chunk in _chunks(list(range(len(reqs))), job.batch):
        outs = c.engine.generate([reqs[i] for i in chunk], job.base.sampling)
        for i, o in zip(chunk, outs):
            tr = trajs[where[i]]
            tr.thinking = tuple(int(x) for x in o[0].token_ids)
            tr.stop_id = o[0].stop_id
            tr.finished = o[0].stop_id is not None and o[0].stop_id in fmt.think_stop_ids
        if c.progress:
            c.log(f"  trajectories {min(chunk[-1] + 1, len(reqs))}/{len(reqs)}")
    c.stats["trajectories_s"] = time.perf_counter() - t
    c.stats["reasoning_tokens"] = int(sum(len(tr.thinking) for tr in trajs))
    return trajs


def _natural_answers(c: _Ctx, trajs: list[_Traj]) -> None:
    """Each sampled trajectory's own answer (forced at the limit when it did not finish), graded."""
    job, fmt = c.job, c.fmt
    t = time.perf_counter()
    reqs, where = [], []
    for k, tr in enumerate(trajs):
        if tr.scripted:
            continue
        q = c.questions[tr.q]
        if tr.finished and not job.family.native_thinking:
            tr.answer = ()
            tr.letter, tr.status = _parse(c.tok, tr.thinking, c.n_opt[tr.q])
            continue
        if tr.finished:
            ctx = fmt.answer_context(tr.prompt, tr.thinking, True)
        else:   # cut at the limit: the forced answer of the full reasoning
            ctx, _, _ = stop_input(fmt, tr.prompt, tr.thinking, len(tr.thinking), False, c.closure_ids,
                                   c.prefix_ids)
        reqs.append(GenRequest(ctx, 1, derive_seed(c.model, q.dataset, q.id, tr.r, "answer"),
                               job.answer_limit, fmt.answer_stop_ids))
        where.append(k)
    for chunk in _chunks(list(range(len(reqs))), job.batch):
        outs = c.engine.generate([reqs[i] for i in chunk], job.base.sampling)
        for i, o in zip(chunk, outs):
            tr = trajs[where[i]]
            tr.answer = tuple(int(x) for x in o[0].token_ids)
            tr.letter, tr.status = _parse(c.tok, tr.answer, c.n_opt[tr.q])
    c.stats["natural_answers_s"] = time.perf_counter() - t


def _stop_inputs(c: _Ctx, trajs: list[_Traj], inp: _Inputs) -> None:
    """Stopped at every read horizon, and at the trajectory's own end, in each context."""
    job = c.job
    for tr in trajs:
        q = c.questions[tr.q]
        base = {"arm": tr.arm, "group": q.group, "question": q.id, "replicate": tr.r}
        for ctx in job.contexts:
            p = tr.prompt if ctx == "policy" else c.prompts[job.common_arm][tr.q]
            for B in job.read_horizons:
                ids, keep, term = stop_input(c.fmt, p, tr.thinking, B, tr.finished, c.closure_ids,
                                             c.prefix_ids)
                inp.add(base | {"context": ctx, "kind": "stop", "variant": "", "B": B, "length": keep,
                                "terminal": term}, ids, True)
            if not tr.scripted:
                L = len(tr.thinking)
                ids, keep, term = stop_input(c.fmt, p, tr.thinking, L, tr.finished, c.closure_ids,
                                             c.prefix_ids)
                inp.add(base | {"context": ctx, "kind": "terminal", "variant": "", "B": L, "length": keep,
                                "terminal": term}, ids, True)


def _matched_inputs(c: _Ctx, trajs: list[_Traj], inp: _Inputs) -> None:
    """The upper arm's reasoning stopped at the lower arm's own length (matched horizons)."""
    job = c.job
    by_key = {(tr.arm, tr.q, tr.r): tr for tr in trajs}
    for lower, upper in job.matched:
        for qi, q in enumerate(c.questions):
            for r in range(job.replicates):
                lo, up = by_key[(lower, qi, r)], by_key[(upper, qi, r)]
                if lo.scripted or not lo.finished:
                    continue           # the lower arm's terminal outcome is not observed
                ell = len(lo.thinking)
                if not (len(up.thinking) >= ell or (up.finished and len(up.thinking) < ell)):
                    continue           # not replayable: a missing outcome (worst-case bounds)
                ids, keep, term = stop_input(c.fmt, c.prompts[job.common_arm][qi], up.thinking, ell,
                                             up.finished, c.closure_ids, c.prefix_ids)
                inp.add({"arm": upper, "group": q.group, "question": q.id, "replicate": r,
                         "context": "common", "kind": "matched", "variant": lower, "B": ell, "length": keep,
                         "terminal": term}, ids, True)


def _control_inputs(c: _Ctx, trajs: list[_Traj], inp: _Inputs) -> dict[str, int]:
    """Random, shuffled and swapped prefixes of the control arm; returns missing swaps per horizon."""
    job, questions = c.job, c.questions
    missing_swaps: dict[str, int] = {}
    pool = plain_ids(c.tok, c.V)
    arm_trajs = [tr for tr in trajs if tr.arm == job.control_arm]
    donors = [((questions[tr.q].group, questions[tr.q].id), len(tr.thinking)) for tr in arm_trajs]
    for B in job.control_horizons:
        recv = [tr for tr in arm_trajs if len(tr.thinking) > B]
        pick = assign_donors([(questions[tr.q].group, questions[tr.q].id) for tr in recv], donors, B,
                             control_seed(c.model, "", "", 0, "swap", B, job.seed)) \
            if "swap" in job.controls else [None] * len(recv)
        for tr, d in zip(recv, pick):
            q = questions[tr.q]
            base = {"arm": tr.arm, "group": q.group, "question": q.id, "replicate": tr.r,
                    "context": "policy", "kind": "control", "B": B, "length": B, "terminal": False}
            for v in job.controls:
                s = control_seed(c.model, q.group, q.id, tr.r, v, B, job.seed)
                donor = None
                if v == "random":
                    pre = random_prefix(pool, B, s)
                elif v == "shuffle":
                    pre = shuffled_prefix(tr.thinking, B, s)
                else:
                    if d is None:
                        missing_swaps[str(B)] = missing_swaps.get(str(B), 0) + 1
                        continue
                    dt = arm_trajs[d]
                    pre = list(dt.thinking[:B])
                    dq = questions[dt.q]
                    donor = f"{dq.group}/{dq.id}/{dt.arm}/{dt.r}"
                ids = close(c.fmt, list(tr.prompt) + list(pre), c.closure_ids, c.prefix_ids)
                inp.add(base | {"variant": v, "donor": donor}, ids, False)
    return missing_swaps


def _read(c: _Ctx, inp: _Inputs):
    """(distinct inputs, option log-probabilities per input, greedy continuations by input index)."""
    job = c.job
    uniq: list[list[int]] = [None] * len(inp.ids)
    for key, u in inp.ids.items():
        uniq[u] = list(key)
    t = time.perf_counter()
    lp_ids: list[list[float]] = []
    for n_done, chunk in enumerate(_chunks(uniq, job.batch)):
        lp_ids.extend(readout_logprobs(c.engine, chunk, c.spell.flat_ids))
        if c.progress:
            c.log(f"  readouts {min((n_done + 1) * job.batch, len(uniq))}/{len(uniq)}")
    c.stats["readouts_s"] = time.perf_counter() - t
    c.stats["readout_inputs"] = len(uniq)
    c.stats["readout_tokens"] = int(sum(map(len, uniq)))
    t = time.perf_counter()
    conts: dict[int, tuple[int, ...]] = {}
    cu = sorted(inp.cont)
    for chunk in _chunks(cu, job.batch):
        outs = c.engine.generate([GenRequest(uniq[u], 1, 0, job.answer_limit, c.fmt.answer_stop_ids)
                                  for u in chunk], GREEDY)
        for u, o in zip(chunk, outs):
            conts[u] = tuple(int(x) for x in o[0].token_ids)
    c.stats["continuations_s"] = time.perf_counter() - t
    c.stats["continuations"] = len(cu)
    return uniq, lp_ids, conts


def _readout_rows(c: _Ctx, inp: _Inputs, uniq, lp_ids, conts) -> list[dict[str, Any]]:
    qix = {(q.group, q.id): i for i, q in enumerate(c.questions)}
    out = []
    for row, u in inp.rows:
        qi = qix[(row["group"], row["question"])]
        n = c.n_opt[qi]
        logp = logp_from_ids(lp_ids[u], c.spell, n)
        sc = score_logp(logp)
        gold = c.questions[qi].reference
        arg = None if sc.argmax is None else LETTERS[sc.argmax]
        r = row | {"logp": logp, "M": sc.M, "argmax": arg, "correct": arg == gold,
                   "input_sha256": _hash_ids(uniq[u])}
        if u in conts:
            letter, status = _parse(c.tok, conts[u], n)
            r |= {"cont": list(conts[u]), "cont_letter": letter, "cont_correct": letter == gold,
                  "cont_status": status if letter is None or letter == gold else "wrong_answer"}
        out.append(r)
    return out


def _trajectory_rows(c: _Ctx, trajs: list[_Traj]) -> list[dict[str, Any]]:
    out = []
    for tr in trajs:
        q = c.questions[tr.q]
        y = int(tr.letter is not None and tr.letter == q.reference)
        status = tr.status if tr.letter is None or y else "wrong_answer"
        out.append({
            "model": c.model, "arm": tr.arm, "group": q.group, "dataset": q.dataset, "question": q.id,
            "replicate": tr.r, "seed": tr.seed, "gold": q.reference, "n_options": c.n_opt[tr.q],
            "scripted": tr.scripted, "prompt": list(tr.prompt), "thinking": list(tr.thinking),
            "L": len(tr.thinking), "finished": tr.finished, "stop_id": tr.stop_id,
            "answer": list(tr.answer), "answer_letter": tr.letter, "y": y, "y_status": status})
    return out


def _manifest(c: _Ctx, missing_swaps: dict[str, int]) -> dict[str, Any]:
    job = c.job
    return {
        "model": c.model, "family": job.family.name,
        "arms": [dataclasses.asdict(a) for a in job.arms], "common_arm": job.common_arm,
        "replicates": job.replicates, "thinking_limit": job.thinking_limit,
        "answer_limit": job.answer_limit, "horizons": list(job.horizons),
        "checkpoints": list(job.checkpoints), "read_horizons": list(job.read_horizons),
        "contexts": list(job.contexts), "continuation": job.continuation,
        "closure": {"name": job.closure, "text": job.closure_text, "ids": c.closure_ids},
        "answer_prefix": {"text": job.answer_prefix, "ids": c.prefix_ids},
        "spellings": c.spell.as_dict(),
        "controls": {"arm": job.control_arm, "kinds": list(job.controls),
                     "horizons": list(job.control_horizons), "seed": job.seed,
                     "missing_swaps": missing_swaps},
        "matched": [{"lower": lo, "upper": up} for lo, up in job.matched],
        "data": dict(job.data), "synthetic": any(a.script for a in job.arms),
        "sampling": job.base.sampling.as_dict(),
        "seeds": "trajectories: derive_seed(model, dataset, question, replicate, 'think'), shared by "
                 "all arms; natural answers: phase 'answer'; controls: "
                 "otbench.probe.horizon._stops.control_seed; continuations: greedy",
        "provenance": provenance(("numpy", "pyarrow", "torch", "transformers", "vllm"),
                                 instruction=c.instruction),
    }
