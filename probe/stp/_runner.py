"""Run a probe job end to end: engine(s), prompts, work units, measurement set on disk (docs/rules.md-§3).

Writes `OUT/` (the measurement set with its `tokens` and `probes` tables,
through `otbench.analysis.measurement._io.save`) and `OUT/run.json` (throughput, cache
hit rate, timings, journal and worker reports: facts about this execution,
kept out of the manifest so the set's bytes depend only on what was
measured).

Crash safety and resume: with a `journal` folder every completed
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

from otbench.probe.config import derive_seed, load_instructions
from otbench.probe.data import load_data
from otbench.probe.engines import EngineConfig, open_engine
from otbench.probe.grading import DEEPCONF_TOPK, check_gradable, open_grader, resolve_grader

from otbench.files import (
    clean_stale,
    drop_temporary,
    new_temporary,
    provenance,
    write_text_atomic,
)

from ._cost import cost_record
from ._direct import direct_answers
from ._imported import think_results
from ._job import ProbeJob
from ._loop import RunStats, UnitResult, run_units
from ._output import direct_table, measurement_set, write_token_tables
from ._results import signal_definitions
from ._run_checks import _check_units, _run_job_iv, check_paths
from ._setup import (
    kv_cache,
    memory_line,
    prepare,
    requests_in_flight,
    resolve_engine_config,
    units_in_flight,
)
from otbench.errors import ArgumentError

RUN_FILE = "run.json"


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What a run did (`run_job`, `run_horizon`): where its output is, the output's manifest,
    and this execution's stats (`run`, also written to OUT/run.json)."""

    out: Path
    manifest: dict[str, Any]
    run: dict[str, Any]

    @classmethod
    def write(cls, out: Path, manifest: dict[str, Any], run: dict[str, Any]) -> "RunSummary":
        """Write `run` to OUT/run.json (atomically; keys sorted) and return the summary."""
        write_text_atomic(out / RUN_FILE, json.dumps(run, indent=2, sort_keys=True) + "\n")
        return cls(out=out, manifest=manifest, run=run)


def _progress_bar(total: int, progress):
    """A context manager giving the run's progress bar (`update(n)`, optionally `set_postfix`).

    `progress`: False (none), True (a tqdm bar with tokens/s on stderr), or a
    factory `progress(total)` of such a context manager (the CLI passes plain
    timed lines when stderr is not a terminal, e.g. a batch system's log).
    """
    import contextlib

    if not progress:
        return contextlib.nullcontext()
    if callable(progress):
        return progress(total)
    from tqdm import tqdm
    return tqdm(total=total, unit="traj", desc="probing", file=sys.stderr, dynamic_ncols=True)


class _LocalExecutor:
    """Units in this process on one engine (the default)."""

    def __init__(self, job: ProbeJob, engine_cfg: EngineConfig, questions, instructions, grader: str, log):
        self.job, self.questions, self.engine_cfg = job, questions, engine_cfg
        self._grade, self._grade_close = open_grader(grader)[1:]
        log(f"starting the {engine_cfg.kind} engine on {engine_cfg.model} ...")
        self.engine = open_engine(engine_cfg)
        try:
            self.tok, self.fmt, self.setup = prepare(job, engine_cfg, self.engine, questions, instructions)
            log(memory_line(job, self.engine, self.setup.prompts))
        except BaseException:
            self.engine.close()
            raise

    def run(self, units: Sequence[tuple[int, int]], on_batch, stats: RunStats) -> None:
        job, todo = self.job, set(units)
        run_units(self.engine, self.fmt, model=job.model, questions=self.questions,
                  prompts=self.setup.prompts, R=job.R, P=job.P, b=job.b,
                  thinking_limit=job.thinking_limit, answer_limit=job.answer_limit,
                  sampling=job.sampling, grade_batch=self._grade, tokenizer=self.tok,
                  max_in_flight=units_in_flight(job, self.engine, self.setup.prompts), stats=stats,
                  on_batch=on_batch, skip=lambda u: u not in todo,
                  given=think_results(job, self.questions, self.fmt),
                  max_requests=requests_in_flight(job, self.engine, self.setup.prompts),
                  kv_cache=kv_cache(job, self.engine),
                  hesitation_words=job.hesitation_words, field_probes=job.field_probes,
                  deepconf_window=job.deepconf_window)

    def direct(self) -> list[dict[str, Any]]:
        """The job's direct answers (`_loop.direct_answers`), on this engine."""
        job = self.job
        return direct_answers(self.engine, self.fmt, model=job.model, questions=self.questions,
                              prompts=self.setup.prompts, answer_limit=job.answer_limit,
                              sampling=job.sampling, grade_batch=self._grade, tokenizer=self.tok)

    def report(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        self._grade_close()
        self.engine.close()


def run_job(job: ProbeJob, out: str | os.PathLike, *, overwrite: bool = False,
            progress=True, log=None, journal: str | os.PathLike | None = None,
            resume: bool = False, workers: int = 1, ray_address: str | None = None,
            worker_cpus: float = 1, worker_gpus: float | None = None) -> RunSummary:
    """Probe every (question, trajectory) of `job` and write the measurement set to `out`.

    Args:
      progress: False, True (a progress bar on stderr), or a factory
        `progress(total)` of a context manager giving a bar (`_progress_bar`).
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
    from ._journal import Journal

    _run_job_iv(job, journal, resume, workers, ray_address, worker_cpus, worker_gpus)
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(out)
    check_paths(job, out, journal, overwrite=overwrite, resume=resume)
    t_start = time.perf_counter()
    job, questions, data_record, imported, instructions, grader_name = _checked_inputs(job, log)
    use_ray = workers > 1 or ray_address is not None

    # Without a journal folder, units are spooled to a private one beside the output
    # (the final set is assembled from it in bounded memory) and it is removed after. It is
    # a marked temporary of the output (otbench.files' one rule): removed only by this run,
    # or, if this run is killed, by a later writer of the output once this pid is gone.
    spool = journal is None
    # The model is located before anything is created: a wrong path or id costs one line.
    engine_cfg = None if use_ray else resolve_engine_config(job, log)
    if spool:
        journal = new_temporary(out)
    fresh = not Path(journal).exists()
    try:
        jr = Journal.open(journal, resume=resume, overwrite=overwrite)
    except BaseException:
        if spool:
            drop_temporary(journal)
        raise
    try:
        if engine_cfg is not None:
            _pin_revision(jr, job, engine_cfg, log)        # before the engine starts
        if resume:
            # Temporaries of a save() killed mid-write (it renames only when complete): only
            # marked ones whose writer no longer runs; a live writer's or a user's look-alike
            # stays.
            clean_stale(out)
        t = time.perf_counter()
        executor = _executor(job, engine_cfg, questions, instructions, grader_name, log, workers=workers,
                             ray_address=ray_address, worker_cpus=worker_cpus, worker_gpus=worker_gpus)
        t_engine = time.perf_counter() - t
        try:
            setup, engine_cfg = executor.setup, executor.engine_cfg
            if use_ray:
                _pin_revision(jr, job, engine_cfg, log)    # the workers resolved the model
            log(f"engine ready in {t_engine:.1f} s; {len(questions)} questions x R={job.R} trajectories, "
                f"P={job.P} probes per position, b={job.b}, grader={grader_name}"
                + (f", {workers} Ray workers" if use_ray else ""))
            units, keys = _unit_keys(job, setup, questions, imported, grader_name)
            # Only each unit's small per-position numbers stay here (the measurement
            # set proper); token ids live in the journal until the final write.
            summaries = _reused(jr, units, keys, questions, log) if resume else {}
            pending = [u for u in units if u not in summaries]
            stats, t_probe = _probe(executor, pending, jr, keys, questions, summaries, progress)
            direct = executor.direct() if job.direct_answer else None
            worker_report = executor.report()
        finally:
            executor.close()
        missing = [u for u in units if u not in summaries]
        if missing:
            raise RuntimeError(f"{len(missing)} units were not probed (first: {missing[0]}); "
                               "rerun with --resume")
        manifest = _write_set(job, out, questions, units, keys, summaries, jr, setup, engine_cfg,
                              grader_name, instructions, overwrite=overwrite or resume, direct=direct,
                              data_record=data_record, imported=imported)
    except BaseException:
        jr.close()
        if fresh and jr.committed == 0 and not spool:    # (a spool: dropped below)
            shutil.rmtree(journal, ignore_errors=True)        # nothing of this run to keep
        raise
    finally:
        jr.close()
        if spool:
            drop_temporary(journal)
    run = {"engine_start_s": t_engine, "probe_s": t_probe, "total_s": time.perf_counter() - t_start,
           "units": {"total": len(units), "probed": len(pending), "reused": len(units) - len(pending)},
           "workers": worker_report, **stats.as_dict(),
           "cost": cost_record(stats, setup.info, workers=workers if use_ray else 1)}
    if not spool:
        run["journal"] = jr.report()
    return RunSummary.write(out, manifest, run)


def _executor(job: ProbeJob, engine_cfg, questions, instructions, grader_name: str, log, *,
              workers: int, ray_address, worker_cpus, worker_gpus):
    """The units' executor: Ray actors (more than one worker, or a cluster), else this process."""
    if workers > 1 or ray_address is not None:
        from ._ray import RayExecutor
        return RayExecutor(job, questions, instructions, grader_name, workers=workers,
                           address=ray_address, worker_cpus=worker_cpus,
                           worker_gpus=worker_gpus, log=log)
    return _LocalExecutor(job, engine_cfg, questions, instructions, grader_name, log)


def _checked_inputs(job: ProbeJob, log):
    """`_load_inputs` and the instructions and grader, checked before any engine starts (one
    line, exit 2): the grader can grade every task, and R x questions fits the budget."""
    job, questions, data_record, imported = _load_inputs(job, log)
    instructions = load_instructions()
    grader_name = resolve_grader(job.grader)[0]
    check_gradable(grader_name, questions)
    if imported is None:
        _check_units(job, len(questions))
    return job, questions, data_record, imported, instructions, grader_name


def _pin_revision(jr, job: ProbeJob, engine_cfg, log) -> None:
    """A hub model: log the commit its revision resolved to and pin it in the journal (a resume at
    another commit is refused in one line, `Journal.pin_model`)."""
    if job.hub is None:
        return
    repo, revision = job.hub[0], job.hub[1] or "main"
    if engine_cfg.revision != revision:
        log(f"{repo}: revision {revision!r} is commit {engine_cfg.revision}")
    jr.pin_model(repo, revision, engine_cfg.revision)


def _load_inputs(job: ProbeJob, log):
    """(job, questions, data record, imported trajectories or None): the job's [data], then its
    [trajectories], which replace sampling and may narrow the questions."""
    questions, data_record = load_data(job.data)
    if not questions:
        raise ArgumentError("the job's [data] selects no questions")
    imported = None
    if job.trajectories is not None:
        from ._imported import import_trajectories
        imported = import_trajectories(job, questions, log)
        questions, job = imported.questions, imported.job
    return job, questions, data_record, imported


def _unit_keys(job: ProbeJob, setup, questions, imported, grader_name: str):
    """(units, journal key per unit): the job's (question, trajectory) units under a key of
    everything their results depend on (`_keys`)."""
    from otbench import __version__

    from ._keys import run_digest, run_key_material, unit_key

    material = run_key_material(
        job, fingerprint=setup.fingerprint, tokenizer_hash=setup.tokenizer_hash,
        engine_info=setup.info, grader=grader_name, otbench_version=__version__)
    if imported is not None:        # issue 15: the imported units, keyed by their traces
        imported.check_tokenizer(setup.tokenizer_hash)
        imported.check_ids(setup.vocab_size)
        material["trajectories"] = imported.digest
        units = sorted(imported.units)          # own indices: a question may skip some
    else:
        units = [(q, r) for q in range(len(questions)) for r in range(job.R)]
    run_id = run_digest(material)
    keys = {(q, r): unit_key(run_id, model=job.model, question=questions[q], trajectory=r,
                             think_seed=derive_seed(job.model, questions[q].dataset, questions[q].id, r,
                                                    "think"),
                             prompt=setup.prompts[q])
            for q, r in units}
    return units, keys


def _reused(jr, units, keys, questions, log) -> dict[tuple[int, int], UnitResult]:
    """Summaries of the units already committed in the journal (a damaged record is quarantined)."""
    summaries = {}
    for q, r in units:
        u = jr.lookup(keys[q, r], group=questions[q].group, question=questions[q].id, trajectory=r)
        if u is not None:
            summaries[q, r] = _summary(u)
    for name, reason in jr.quarantined:
        log(f"journal: {name}: {reason}; moved to quarantine, the unit is probed again")
    log(f"journal {jr.root}: {len(summaries)} of {len(units)} units reused, "
        f"{len(units) - len(summaries)} to probe")
    return summaries


def _probe(executor, pending, jr, keys, questions, summaries, progress) -> tuple[RunStats, float]:
    """Probe `pending` on the executor, committing each unit as it comes; (stats, seconds)."""
    where = {(qs.group, qs.id): q for q, qs in enumerate(questions)}
    stats = RunStats()

    def rates(st: RunStats) -> dict[str, str]:
        gen = st.think.generated + st.probe.generated + st.signal.generated
        post = {"generated": f"{gen / max(time.perf_counter() - t, 1e-9):.0f} tok/s",
                "think": f"{st.think.tokens_per_s:.0f} tok/s",
                "probe": f"{st.probe.tokens_per_s:.0f} tok/s"}
        if st.cache_queries:
            post["cache"] = f"{100 * st.cache_hits / st.cache_queries:.0f}%"
        return post

    def on_batch(res: Sequence[UnitResult], st: RunStats) -> None:
        for u in res:
            qr = (where[u.group, u.question], u.trajectory)
            jr.commit_later(keys[qr], u)
            summaries[qr] = _summary(u)
        if bar is None:
            return
        bar.update(len(res))
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(rates(st), refresh=True)

    t = time.perf_counter()
    with _progress_bar(len(pending), progress) as bar:
        if hasattr(bar, "live"):
            # A timed progress line reads the counters as they grow (tokens arrive long before
            # the first unit commits: its whole probe phase runs first), not only at commits.
            bar.live = lambda: rates(stats)
        if pending:
            executor.run(pending, on_batch, stats)
    jr.drain()                                   # every probed unit is on disk
    return stats, time.perf_counter() - t


def _summary(u: UnitResult) -> UnitResult:
    """`u` without its token ids: what the measurement set proper needs (a few numbers per position)."""
    return dataclasses.replace(u, prompt=(), thinking=(), answer=(), probe_tokens=(), probe_status=())


def _write_set(job: ProbeJob, out: Path, questions, units, keys, summaries, jr, setup, engine_cfg,
               grader_name: str, instructions, *, overwrite: bool,
               direct: list[dict[str, Any]] | None = None, data_record=None,
               imported=None) -> dict[str, Any]:
    """The measurement set from the summaries, its token tables streamed from the journal."""
    from otbench.analysis.measurement import save

    info = setup.info
    prov = provenance(
        ("numpy", "pyarrow", "torch", "transformers", "vllm"),
        stage="probe",
        model={"id": job.model, "entry": job.model_entry, "weights": engine_cfg.model if not job.embedded
               else f"embedded:{job.embedded}", "fingerprint": setup.fingerprint,
               **({"repository": job.hub[0], "revision": engine_cfg.revision,
                   "requested_revision": job.hub[1] or "main"} if job.hub else {})},
        family=job.family.as_dict(),
        engine={k: v for k, v in info.items() if k != "config"} | {
            "config": {k: v for k, v in engine_cfg.as_dict().items() if k != "model"}},
        probe={"R": job.R, "P": job.P, "b": job.b, "boundary": job.boundary,
                  "thinking_limit": job.thinking_limit,
               "answer_limit": job.answer_limit, "units_per_batch": job.units_per_batch,
               "hesitation_words": list(job.hesitation_words),
               **({"direct_answer": True} if job.direct_answer else {}),
               **({"field_probes": list(job.field_probes)} if job.field_probes else {})},
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
        signals=signal_definitions(job.field_probes),
        # what DeepConf's signal was read with (the method reads the window from here)
        **({"deepconf": {"window": job.deepconf_window, "top_k": DEEPCONF_TOPK}}
           if "deepconf" in job.field_probes else {}),
    )
    if imported is not None:
        prov["trajectories"] = imported.record
    order = sorted(units, key=lambda u: (questions[u[0]].group, questions[u[0]].id, u[1]))
    qtext = {(q.group, q.id): q.text for q in questions}
    ms = measurement_set([summaries[u] for u in order], model=job.model, P=job.P,
                         question_text=qtext, provenance=prov)
    extra = {"direct": direct_table(direct, model=job.model)} if direct is not None else None
    return save(ms, out, overwrite=overwrite, extra_tables=extra, write_extra=lambda folder: write_token_tables(
        (jr.read(keys[u], arrays=True) for u in order), folder, model=job.model))
