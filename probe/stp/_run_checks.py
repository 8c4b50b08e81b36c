"""What a probe run refuses before anything is read or started: its arguments, its paths (never
onto an input, never over what is not a set), and the size of its units (docs/rules.md)."""

import os
from collections.abc import Mapping
from pathlib import Path

from otbench.files import refuse_input

from ._job import JobError, ProbeJob
from otbench.errors import ArgumentError


WORKER_BYTES = 1 << 30
"""The memory floor assumed per local engine worker (an interpreter with torch or vLLM imported,
before any weights); a budget refusal, not a measurement."""


def _run_job_iv(job: ProbeJob, journal, resume: bool, workers: int, ray_address, worker_cpus,
                worker_gpus):
    """Validate `run_job`'s arguments, before anything is read or started."""
    check_run_arguments(journal=journal, resume=resume, workers=workers, ray_address=ray_address,
                        worker_cpus=worker_cpus, worker_gpus=worker_gpus)
    if (workers > 1 or ray_address is not None) and job.direct_answer:
        raise JobError("probe.direct_answer runs on a single engine: run it without --workers / "
                       "--ray-address (it is one request per question)")


def check_run_arguments(*, journal=None, resume: bool = False, workers: int = 1, ray_address=None,
                        worker_cpus: float = 1.0, worker_gpus: float | None = None) -> None:
    """`run_job`'s arguments that need no job (workers, Ray, resume), refused in one line; the CLI
    calls it before a one-line start resolves (and perhaps converts) the model."""
    if resume and journal is None:
        raise ArgumentError("`resume` needs a `journal` folder to resume from.")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ArgumentError(f"`workers` must be a positive integer, got {workers!r}.")
    # Local workers are engine processes: each holds at least an interpreter with the engine's
    # libraries and the model's tokenizer, WORKER_BYTES, before any weights (a cluster's are
    # the cluster's: only the count is bounded).
    from otbench.resources import check_workers

    local = ray_address is None
    check_workers(f"{workers:,} {'local ' if local else ''}engine workers", "`workers`", workers,
                  per_worker=WORKER_BYTES if local else 0,
                  advice="or name a Ray cluster with --ray-address" if local else "")
    if ray_address is not None and (not isinstance(ray_address, str) or not ray_address):
        raise ArgumentError(f"`ray_address` must be a non-empty string or None, got {ray_address!r}.")
    if isinstance(worker_cpus, bool) or not isinstance(worker_cpus, (int, float)) or worker_cpus <= 0:
        raise ArgumentError(f"`worker_cpus` must be a positive number, got {worker_cpus!r}.")
    if worker_gpus is not None and (isinstance(worker_gpus, bool)
                                    or not isinstance(worker_gpus, (int, float)) or worker_gpus < 0):
        raise ArgumentError(f"`worker_gpus` must be a non-negative number or None, got {worker_gpus!r}.")


def _check_out(out: Path, *, overwrite: bool, resume: bool) -> None:
    if not out.exists() or overwrite:
        return
    if not resume:
        raise FileExistsError(f"{out}: already exists (pass `overwrite` to replace it)")
    if not (out / "manifest.json").is_file():
        # A set written by an earlier attempt of this run is rebuilt from the journal;
        # anything else is not ours to replace.
        raise FileExistsError(f"{out}: exists and is not a measurement set (pass `overwrite` to replace it)")


def _job_inputs(job: ProbeJob) -> list[str]:
    """The local paths a job reads (the weights folder, question files, imported traces): an
    output or journal on or inside one is refused before anything runs."""
    paths = [job.engine.model] if getattr(job.engine, "model", "") and os.path.exists(job.engine.model) else []
    data = job.data or {}
    for src in [data, *data.get("sources", ())]:
        if isinstance(src, Mapping) and isinstance(src.get("path"), (str, os.PathLike)):
            paths.append(src["path"])
    if job.trajectories and isinstance(job.trajectories.get("path"), (str, os.PathLike)):
        paths.append(job.trajectories["path"])
    return [str(p) for p in paths]


def check_paths(job: ProbeJob, out: Path, journal, *, overwrite: bool, resume: bool) -> None:
    """Never into the model's folder or onto a question file; `out` new, replaceable or resumed."""
    inputs = _job_inputs(job)
    refuse_input(out, *inputs)
    if journal is not None:
        refuse_input(journal, *inputs)
    _check_out(out, overwrite=overwrite, resume=resume)


UNIT_BYTES = 1024
"""Host memory the runner keeps per unit besides its positions (its key, its entry in the
unit list, its summary's object); `POSITION_BYTES` per probed position on top."""
POSITION_BYTES = 64


def _check_units(job: ProbeJob, n_questions: int) -> None:
    """The resource budget of `R` (per question: the run's units are questions x R, every
    one keyed and summarised in memory), before the engine starts: R = 65,535 over 100,000
    questions was 6.5e9 unit keys built one by one after the engine was ready."""
    from otbench.resources import check_budget

    positions = job.thinking_limit // job.b + 1
    per_question = n_questions * (UNIT_BYTES + POSITION_BYTES * positions)
    # every unit decodes its trajectory and P answers per position: at least one element
    # operation per token, so the time bound only refuses what could never finish
    per_question_ops = n_questions * (job.thinking_limit + positions * job.P * job.answer_limit)
    check_budget(f"a probe run of {n_questions:,} questions", "`R`", job.R,
                 per_unit=per_question, per_unit_ops=per_question_ops, unit="trajectory of every question",
                 advice="use a smaller R or fewer questions (--limit)")
