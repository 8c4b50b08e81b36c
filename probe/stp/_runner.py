"""Run a probe job end to end: engine(s), prompts, work units, measurement set on disk (SPEC §2-§3).

Writes `OUT/` (the measurement set with its `tokens` and `probes` tables,
through `otbench.analysis.measurement._io.save`) and `OUT/run.json` (throughput, cache
hit rate, timings, journal and worker reports: facts about this execution,
kept out of the manifest so the set's bytes depend only on what was
measured).

Crash safety and resume (issue 6): with a `journal` folder every completed
work unit is committed there atomically as soon as its batch finishes
(`_resume`), under a key of everything its result depends on
(`_resume_keys`). `resume=True` reuses the committed units whose keys match
and probes only the rest; since a unit's result depends only on its inputs
(seeds come from what a sample is, `_seeds`), the final set equals an
uninterrupted run's. Units run in one process (`workers=1`, no
`ray_address`) or on Ray actors, one engine each (`_ray`); either way this
process is the journal's only writer.
"""

import dataclasses
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from otbench.analysis.measurement import provenance, write_text_atomic
from otbench.probe.config import derive_seed, load_instructions
from otbench.probe.data import load_data
from otbench.probe.engines import EngineConfig, open_engine
from otbench.probe.grading import resolve_grader
from otbench.probe.tokens import build_vocabulary, compile_format

from ._imported import replay_engine
from ._job import ProbeJob
from ._loop import RunStats, UnitResult, encode_prompts, run_units
from ._output import measurement_set, token_tables

RUN_FILE = "run.json"


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What `run_job` did: where the set is, its counts, and this execution's stats."""

    out: Path
    manifest: dict[str, Any]
    run: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class EngineSetup:
    """What the run needs from an opened engine, as plain data (it crosses Ray to the driver).

    Attributes:
      prompts: prompt ids per question.
      tokenizer_hash, boundary_ids, newline_end_ids, newline_start_ids: the
        vocabulary facts recorded in the provenance.
      fingerprint: `_resume_keys.model_fingerprint` of the weights folder.
      info: `Engine.info()` (engine, library versions, device, config).
    """

    prompts: tuple[tuple[int, ...], ...]
    tokenizer_hash: str
    boundary_ids: tuple[int, ...]
    newline_end_ids: tuple[int, ...]
    newline_start_ids: tuple[int, ...]
    fingerprint: str
    info: dict[str, Any]

    def agreement(self) -> dict[str, Any]:
        """Everything that must be equal across workers for their units to be interchangeable."""
        d = dataclasses.asdict(self)
        d["info"] = {k: v for k, v in self.info.items() if k != "config"}
        return d


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="traj", desc="probing", file=sys.stderr, dynamic_ncols=True)


def resolve_engine_config(job: ProbeJob, log) -> EngineConfig:
    """The job's engine settings with an embedded model converted (once per machine) and located."""
    if not job.embedded:
        return job.engine
    from otbench.probe.config import embedded_model_dir
    return dataclasses.replace(job.engine, model=str(embedded_model_dir(job.embedded, log=log)))


def prepare(job: ProbeJob, engine_cfg: EngineConfig, engine, questions: Sequence,
            instructions: dict[str, str]):
    """(tokenizer, probe format, `EngineSetup`) for an opened engine; checks the context limit."""
    from otbench.probe.config import cache_dir

    from ._keys import model_fingerprint

    tok = engine.tokenizer()
    vocab = build_vocabulary(tok, engine.vocab_size())
    fmt = compile_format(job.family, tok, vocab, boundary_rule=job.boundary)
    prompts = encode_prompts(fmt, tok, questions, instructions)
    longest = max(map(len, prompts))
    need = longest + job.thinking_limit + len(fmt.separator_ids) + len(fmt.end_ids) \
        + len(fmt.answer_prefix_ids) + job.answer_limit + 1
    if need > engine_cfg.max_model_len:
        raise ValueError(f"engine.max_model_len {engine_cfg.max_model_len} is too small: the longest "
                         f"prompt ({longest} tokens) + thinking_limit + answer_limit needs {need}")
    setup = EngineSetup(
        prompts=tuple(tuple(p) for p in prompts), tokenizer_hash=vocab.tokenizer_hash,
        boundary_ids=tuple(vocab.boundary_ids.tolist()),
        newline_end_ids=tuple(np.flatnonzero(vocab.ends_newline).tolist()),
        newline_start_ids=tuple(np.flatnonzero(vocab.starts_newline).tolist()),
        fingerprint=model_fingerprint(engine_cfg.model, memo=cache_dir() / "fingerprints.json"),
        info=engine.info())
    return tok, fmt, setup


class _LocalExecutor:
    """Units in this process on one engine (the default)."""

    def __init__(self, job: ProbeJob, engine_cfg: EngineConfig, questions, instructions, grader: str, log):
        self.job, self.questions, self.engine_cfg = job, questions, engine_cfg
        self._grade = resolve_grader(grader)[1]
        log(f"starting the {engine_cfg.kind} engine on {engine_cfg.model} ...")
        self.engine = replay_engine(open_engine(engine_cfg), job)
        try:
            self.tok, self.fmt, self.setup = prepare(job, engine_cfg, self.engine, questions, instructions)
        except BaseException:
            self.engine.close()
            raise

    def run(self, units: Sequence[tuple[int, int]], on_batch, stats: RunStats) -> None:
        job, todo = self.job, set(units)
        run_units(self.engine, self.fmt, model=job.model, questions=self.questions,
                  prompts=self.setup.prompts, R=job.R, P=job.P, b=job.b,
                  thinking_limit=job.thinking_limit, answer_limit=job.answer_limit,
                  sampling=job.sampling, grade_batch=self._grade, tokenizer=self.tok,
                  units_per_batch=job.units_per_batch, stats=stats, on_batch=on_batch,
                  skip=lambda u: u not in todo)

    def report(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        self.engine.close()


def _run_job_iv(journal, resume: bool, workers: int, ray_address, worker_cpus, worker_gpus):
    if resume and journal is None:
        raise ValueError("`resume` needs a `journal` folder to resume from.")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"`workers` must be a positive integer, got {workers!r}.")
    if ray_address is not None and (not isinstance(ray_address, str) or not ray_address):
        raise ValueError(f"`ray_address` must be a non-empty string or None, got {ray_address!r}.")
    if isinstance(worker_cpus, bool) or not isinstance(worker_cpus, (int, float)) or worker_cpus <= 0:
        raise ValueError(f"`worker_cpus` must be a positive number, got {worker_cpus!r}.")
    if worker_gpus is not None and (isinstance(worker_gpus, bool)
                                    or not isinstance(worker_gpus, (int, float)) or worker_gpus < 0):
        raise ValueError(f"`worker_gpus` must be a non-negative number or None, got {worker_gpus!r}.")


def _check_out(out: Path, *, overwrite: bool, resume: bool) -> None:
    if not out.exists() or overwrite:
        return
    if not resume:
        raise FileExistsError(f"{out}: already exists (pass --overwrite)")
    if not (out / "manifest.json").is_file():
        # A set written by an earlier attempt of this run is rebuilt from the journal;
        # anything else is not ours to replace.
        raise FileExistsError(f"{out}: exists and is not a measurement set (pass --overwrite to replace it)")


def run_job(job: ProbeJob, out: str | os.PathLike, *, overwrite: bool = False,
            progress: bool = True, log=None, journal: str | os.PathLike | None = None,
            resume: bool = False, workers: int = 1, ray_address: str | None = None,
            worker_cpus: float = 1, worker_gpus: float | None = None) -> RunSummary:
    """Probe every (question, trajectory) of `job` and write the measurement set to `out`.

    Args:
      journal: folder committing each finished unit (crash safety; see the
        module docstring and `_resume`); None: no journal.
      resume: reuse the units already committed in `journal`. An existing
        `out` that is a measurement set is then rebuilt (replaced).
      workers: engine workers; more than one (or any `ray_address`) runs them
        as Ray actors (`_ray`).
      ray_address: a Ray cluster to join ("auto", "host:port", "ray://...");
        None starts a local Ray instance when `workers > 1`.
      worker_cpus, worker_gpus: Ray resources per worker (None GPUs: on a
        cluster with GPUs the vLLM tensor-parallel size, or 1 for
        transformers; else 0).
    """
    from otbench import __version__
    from otbench.analysis.measurement import save

    from ._journal import Journal
    from ._keys import run_digest, run_key_material, unit_key

    _run_job_iv(journal, resume, workers, ray_address, worker_cpus, worker_gpus)
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(out)
    _check_out(out, overwrite=overwrite, resume=resume)
    t_start = time.perf_counter()
    questions, data_record = load_data(job.data)
    if not questions:
        raise ValueError("the job's [data] selects no questions")
    # -- imported trajectories (issue 15): the job's [trajectories] replace sampling
    imported = None
    if job.trajectories is not None:
        from ._imported import import_trajectories
        imported = import_trajectories(job, questions, log)
        questions, job = imported.questions, imported.job
    # --
    instructions = load_instructions()
    grader_name = resolve_grader(job.grader)[0]
    use_ray = workers > 1 or ray_address is not None

    jr = Journal.open(journal, resume=resume, overwrite=overwrite) if journal is not None else None
    try:
        if resume:
            # Temp folders of a save() killed mid-write (it renames only when complete).
            for stale in out.parent.glob(f".{out.name}.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)
        t = time.perf_counter()
        if use_ray:
            from ._ray import RayExecutor
            executor = RayExecutor(job, questions, instructions, grader_name, workers=workers,
                                   address=ray_address, worker_cpus=worker_cpus,
                                   worker_gpus=worker_gpus, log=log)
        else:
            executor = _LocalExecutor(job, resolve_engine_config(job, log), questions, instructions,
                                      grader_name, log)
        t_engine = time.perf_counter() - t
        try:
            setup = executor.setup
            engine_cfg = executor.engine_cfg
            log(f"engine ready in {t_engine:.1f} s; {len(questions)} questions x R={job.R} trajectories, "
                f"P={job.P} probes per position, b={job.b}, grader={grader_name}"
                + (f", {workers} Ray workers" if use_ray else ""))
            material = run_key_material(
                job, fingerprint=setup.fingerprint, tokenizer_hash=setup.tokenizer_hash,
                engine_info=setup.info, grader=grader_name, otbench_version=__version__)
            units = [(q, r) for q in range(len(questions)) for r in range(job.R)]
            if imported is not None:        # issue 15: the imported units, keyed by their traces
                imported.check_tokenizer(setup.tokenizer_hash)
                material["trajectories"] = imported.digest
                units = [u for u in units if u in imported.units]
            run_id = run_digest(material)
            keys = {(q, r): unit_key(run_id, model=job.model, question=questions[q], trajectory=r,
                                     think_seed=derive_seed(job.model, questions[q].dataset,
                                                            questions[q].id, r, "think"),
                                     prompt=setup.prompts[q])
                    for q, r in units}
            where = {(qs.group, qs.id): q for q, qs in enumerate(questions)}
            results: dict[tuple[int, int], UnitResult] = {}
            if jr is not None and resume:
                for q, r in units:
                    u = jr.lookup(keys[q, r], group=questions[q].group, question=questions[q].id,
                                  trajectory=r)
                    if u is not None:
                        results[q, r] = u
                for name, reason in jr.quarantined:
                    log(f"journal: {name}: {reason}; moved to quarantine, the unit is probed again")
                log(f"journal {jr.root}: {len(results)} of {len(units)} units reused, "
                    f"{len(units) - len(results)} to probe")
            pending = [u for u in units if u not in results]
            stats = RunStats()
            bar = _progress_bar(len(pending), progress)

            def on_batch(res: Sequence[UnitResult], st: RunStats) -> None:
                for u in res:
                    qr = (where[u.group, u.question], u.trajectory)
                    results[qr] = jr.commit(keys[qr], u) if jr is not None else u
                if bar is None:
                    return
                bar.update(len(res))
                post = {"think": f"{st.think.tokens_per_s:.0f} tok/s",
                        "probe": f"{st.probe.tokens_per_s:.0f} tok/s"}
                if st.cache_queries:
                    post["cache"] = f"{100 * st.cache_hits / st.cache_queries:.0f}%"
                bar.set_postfix(post, refresh=True)

            t_probe = time.perf_counter()
            try:
                if pending:
                    executor.run(pending, on_batch, stats)
            finally:
                if bar is not None:
                    bar.close()
            t_probe = time.perf_counter() - t_probe
            worker_report = executor.report()
        finally:
            executor.close()
    finally:
        if jr is not None:
            jr.close()
    missing = [u for u in units if u not in results]
    if missing:
        raise RuntimeError(f"{len(missing)} units were not probed (first: {missing[0]}); "
                           "rerun with --resume")

    info = setup.info
    prov = provenance(
        ("numpy", "pyarrow", "torch", "transformers", "vllm"),
        stage="probe",
        model={"id": job.model, "entry": job.model_entry, "weights": engine_cfg.model if not job.embedded
               else f"embedded:{job.embedded}", "fingerprint": setup.fingerprint},
        family=job.family.as_dict(),
        engine={k: v for k, v in info.items() if k != "config"} | {
            "config": {k: v for k, v in engine_cfg.as_dict().items() if k != "model"}},
        probe={"R": job.R, "P": job.P, "b": job.b, "boundary": job.boundary,
                  "thinking_limit": job.thinking_limit,
               "answer_limit": job.answer_limit, "units_per_batch": job.units_per_batch},
        sampling=job.sampling.as_dict(),
        seeds="otbench.seed/1: sha256(model, benchmark, question, trajectory, phase[, position]); "
              "sample j of a request uses seed + j (otbench.probe.config._seeds)",
        data=dict(job.data),
        data_sources=data_record.as_dict(),
        grader=grader_name,
        instructions=instructions,
        tokenizer_hash=setup.tokenizer_hash,
        boundary_ids=list(setup.boundary_ids),
        boundary_rule=job.boundary,
        # The pair tables of the "vocab+span" rule, so `resegment` needs no tokenizer.
        newline_end_ids=list(setup.newline_end_ids),
        newline_start_ids=list(setup.newline_start_ids),
        signals={"logp_end": "log p(thinking-end token | retained prefix)",
                 "logp_other": "log p(most likely other token | retained prefix)",
                 "margin": "logp_other - logp_end (ThinkBrake: stop when margin <= theta)"},
    )
    if imported is not None:
        prov["trajectories"] = imported.record
    final = [results[u] for u in units]
    qtext = {(q.group, q.id): q.text for q in questions}
    ms = measurement_set(final, model=job.model, P=job.P, question_text=qtext, provenance=prov)
    manifest = save(ms, out, overwrite=overwrite or resume,
                    extra_tables=token_tables(final, model=job.model))
    run = {"engine_start_s": t_engine, "probe_s": t_probe, "total_s": time.perf_counter() - t_start,
           "units": {"total": len(units), "probed": len(pending), "reused": len(units) - len(pending)},
           "workers": worker_report, **stats.as_dict()}
    if jr is not None:
        run["journal"] = jr.report()
    write_text_atomic(out / RUN_FILE, json.dumps(run, indent=2, sort_keys=True) + "\n")
    return RunSummary(out=out, manifest=manifest, run=run)

