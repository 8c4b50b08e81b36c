"""Run a probe job end to end: engine, prompts, work units, measurement set on disk (SPEC §2-§3).

Writes `OUT/` (the measurement set with its `tokens` and `probes` tables,
through `otbench.analysis._io.save`) and `OUT/run.json` (throughput, cache
hit rate, timings: facts about this execution, kept out of the manifest so
the set's bytes depend only on what was measured).
"""

import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._engine import open_engine
from ._family import load_instructions
from ._grader import resolve_grader
from ._job import ProbeJob
from ._output import measurement_set, token_tables
from ._probe_ids import compile_format
from ._questions import load_questions
from ._run import RunStats, encode_prompts, run_units
from ._vocab import build_vocabulary

RUN_FILE = "run.json"


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What `run_job` did: where the set is, its counts, and this execution's stats."""

    out: Path
    manifest: dict[str, Any]
    run: dict[str, Any]


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent.parent
    head = here / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (here / ".git" / ref[5:]).read_text().strip()
        return ref
    except OSError:
        return None


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="traj", desc="probing", file=sys.stderr, dynamic_ncols=True)


def run_job(job: ProbeJob, out: str | os.PathLike, *, overwrite: bool = False,
            progress: bool = True, log=None) -> RunSummary:
    """Probe every (question, trajectory) of `job` and write the measurement set to `out`."""
    from otbench import __version__
    from otbench.analysis._io import save

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out}: already exists (pass --overwrite)")
    t_start = time.perf_counter()
    engine_cfg = job.engine
    if job.embedded:
        from ._embedded import embedded_model_dir
        engine_cfg = dataclasses.replace(engine_cfg, model=str(embedded_model_dir(job.embedded, log=log)))
    questions = load_questions(job.data)
    if not questions:
        raise ValueError("the job's [data] selects no questions")
    instructions = load_instructions()
    grader_name, grade_batch = resolve_grader(job.grader)

    log(f"starting the {engine_cfg.kind} engine on {engine_cfg.model} ...")
    t = time.perf_counter()
    engine = open_engine(engine_cfg)
    t_engine = time.perf_counter() - t
    try:
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
        log(f"engine ready in {t_engine:.1f} s; {len(questions)} questions x R={job.R} trajectories, "
            f"P={job.P} probes per position, b={job.b}, grader={grader_name}")
        stats = RunStats()
        bar = _progress_bar(len(questions) * job.R, progress)

        def on_batch(res, st: RunStats):
            if bar is None:
                return
            bar.update(len(res))
            post = {"think": f"{st.think.tokens_per_s:.0f} tok/s",
                    "probe": f"{st.probe.tokens_per_s:.0f} tok/s"}
            if st.cache_queries:
                post["cache"] = f"{100 * st.cache_hits / st.cache_queries:.0f}%"
            bar.set_postfix(post, refresh=True)

        try:
            results = run_units(engine, fmt, model=job.model, questions=questions, prompts=prompts,
                                R=job.R, P=job.P, b=job.b, thinking_limit=job.thinking_limit,
                                answer_limit=job.answer_limit, sampling=job.sampling,
                                grade_batch=grade_batch, tokenizer=tok,
                                units_per_batch=job.units_per_batch, stats=stats, on_batch=on_batch)
        finally:
            if bar is not None:
                bar.close()
        info = engine.info()
    finally:
        engine.close()

    provenance = {
        "stage": "probe",
        "code": {"otbench": __version__, "git": _git_commit()},
        "model": {"id": job.model, "entry": job.model_entry, "weights": engine_cfg.model if not job.embedded
                  else f"embedded:{job.embedded}"},
        "family": job.family.as_dict(),
        "engine": {k: v for k, v in info.items() if k != "config"} | {
            "config": {k: v for k, v in engine_cfg.as_dict().items() if k != "model"}},
        "probe": {"R": job.R, "P": job.P, "b": job.b, "boundary": job.boundary,
                  "thinking_limit": job.thinking_limit,
                  "answer_limit": job.answer_limit, "units_per_batch": job.units_per_batch},
        "sampling": job.sampling.as_dict(),
        "seeds": "otbench.seed/1: sha256(model, benchmark, question, trajectory, phase[, position]); "
                 "sample j of a request uses seed + j (otbench.probe._seeds)",
        "data": dict(job.data),
        "grader": grader_name,
        "instructions": instructions,
        "tokenizer_hash": vocab.tokenizer_hash,
        "boundary_ids": vocab.boundary_ids.tolist(),
        "boundary_rule": job.boundary,
        # The pair tables of the "vocab+span" rule, so `resegment` needs no tokenizer.
        "newline_end_ids": np.flatnonzero(vocab.ends_newline).tolist(),
        "newline_start_ids": np.flatnonzero(vocab.starts_newline).tolist(),
        "signals": {"logp_end": "log p(thinking-end token | retained prefix)",
                    "logp_other": "log p(most likely other token | retained prefix)",
                    "margin": "logp_other - logp_end (ThinkBrake: stop when margin <= theta)"},
        "hardware": {"machine": platform.machine(), "system": platform.system(),
                     "cpus": os.cpu_count(), "python": platform.python_version()},
    }
    qtext = {(q.group, q.id): q.text for q in questions}
    ms = measurement_set(results, model=job.model, P=job.P, question_text=qtext, provenance=provenance)
    manifest = save(ms, out, overwrite=overwrite, extra_tables=token_tables(results, model=job.model))
    run = {"engine_start_s": t_engine, "total_s": time.perf_counter() - t_start, **stats.as_dict()}
    tmp = out / f".{RUN_FILE}.tmp"
    tmp.write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / RUN_FILE)
    return RunSummary(out=out, manifest=manifest, run=run)
