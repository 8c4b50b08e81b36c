"""`otbench probe ...`: run a probe job, audit a tokenizer's boundaries, re-segment stored trajectories (docs/rules.md)."""

import sys
from pathlib import Path

import click

from otbench.descriptors import engine_kinds

from ._common import DataError, Declared, argument_errors, data_errors, library_progress, write_json
from ._numbers import Count, Real, counts
from ._tracking import log_options, probe_record, track


@click.group("probe")
def probe_group() -> None:
    """Generate trajectories and answer probes with an inference engine (docs/rules.md)."""


@probe_group.command("run")
@click.option("--config", "config", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Job TOML (model, engine, data, probe, sampling, grader); or the one-line form below.")
@click.option("--model", "model", default=None, type=Declared(engine_kinds),
              help="One-line start: the engine (openai: an OpenAI-compatible server at base_url).")
@click.option("--model-args", "model_args", default="",
              help="KEY=VALUE,... : pretrained=ID|DIR, revision=, family=, dtype=, max_model_len=, "
                   "tensor_parallel_size=, base_url=, model= (served name), api_key_env=, num_concurrent=, ...")
@click.option("--tasks", "tasks", default=None,
              help="Comma-separated task names (`otbench probe tasks`), each NAME or NAME=PATH.")
@click.option("--R", "R", default=None, type=Count(min=1), help="One-line start: trajectories per question.")
@click.option("--P", "P", default=None, type=Count(min=1), help="One-line start: answer probes per position.")
@click.option("--b", "b", default=None, type=Count(min=1), help="One-line start: target tokens per step.")
@click.option("--gen-kwargs", "gen_kwargs", default="",
              help="One-line start: sampling overrides, e.g. temperature=0.6,top_p=0.95.")
@click.option("--write-job", "write_job", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Write the one-line start as the equivalent job TOML (then run only if --out is given).")
@click.option("--out", "out", default=None, type=click.Path(path_type=Path),
              help="Directory for the measurement set.")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUT (and empty its journal).")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run: reuse the units committed in the journal.")
@click.option("--journal", "journal", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder where each finished unit is committed (default: OUT.journal beside OUT).")
@click.option("--workers", default=1, show_default=True, type=Count(min=1),
              help="Engine workers; more than one runs them as Ray actors.")
@click.option("--ray-address", "ray_address", default=None,
              help="Join this Ray cluster ('auto', HOST:PORT, ray://...); default: local.")
@click.option("--worker-cpus", default=1.0, show_default=True, type=Real(min=0, min_open=True),
              help="Ray CPUs per worker.")
@click.option("--worker-gpus", default=None, type=Real(min=0),
              help="Ray GPUs per worker [default on a GPU cluster: vLLM's tensor-parallel size, "
                   "transformers 1; else 0].")
@click.option("--limit", "limit", default=None, type=Count(min=1),
              help="Probe only the first N questions of each group (smoke runs; recorded as data.limit).")
@click.option("--progress/--no-progress", default=True,
              help="Progress on stderr: a bar with tokens/s on a terminal, else a line every 30 s.")
@log_options
def run_cmd(config: Path | None, model: str | None, model_args: str, tasks: str | None, R, P, b,
            gen_kwargs: str, write_job: Path | None, out: Path | None, overwrite: bool, resume: bool,
            journal: Path | None, workers: int, ray_address: str | None, worker_cpus: float,
            worker_gpus: float | None, limit: int | None, progress: bool) -> None:
    """Probe the questions of a job and write the measurement set to OUT.

    The job is a TOML file (--config) or one line, as lm-eval takes it:
    --model vllm --model-args pretrained=ID,revision=... --tasks math500,aime24
    --limit N --R 8 --P 16 (--write-job FILE saves it as the equivalent TOML).
    Every finished work unit is committed to the journal as it completes, so
    a crashed or killed run continues with `--resume` and gives the same set.
    """
    from otbench.probe.stp import check_job_path, check_run_arguments, load_job, oneline_job, run_job, write_job_file

    from otbench.errors import OtbenchError

    if ray_address is not None and not ray_address.strip():
        raise DataError("--ray-address is empty: give 'auto', HOST:PORT or ray://HOST:PORT, or leave "
                        "it out to run locally")
    oneline = model is not None or tasks is not None
    if config is not None and (oneline or R or P or b or gen_kwargs or model_args):
        raise DataError("give --config FILE or the one-line form (--model, --model-args, --tasks, "
                        "--R, --P, --b, --gen-kwargs), not both")
    if config is None and not (model and tasks):
        raise DataError("give --config FILE, or --model and --tasks (the one-line start)")
    if write_job is not None and not oneline:
        raise DataError("--write-job writes a one-line start as TOML; a --config job is one already")
    if out is None and write_job is None:
        raise DataError("--out DIR is required (or --write-job FILE alone, to only write the job)")
    if out is not None:         # the run's own arguments, before a one-line start converts the model
        with argument_errors():
            check_run_arguments(journal=journal or out.parent / f"{out.name}.journal", resume=resume,
                                workers=workers, ray_address=ray_address,
                                worker_cpus=worker_cpus, worker_gpus=worker_gpus)
    try:
        if write_job is not None:       # before the model is resolved (and perhaps converted)
            check_job_path(write_job, overwrite=overwrite)
        if oneline:
            table, job = oneline_job(model, model_args, tasks, limit=limit, R=R, P=P, b=b,
                                     gen_kwargs=gen_kwargs, for_job_file=write_job is not None)
        else:
            job = load_job(config, limit=limit)
    except (OtbenchError, FileExistsError) as e:
        raise DataError(str(e)) from None
    if write_job is not None:
        try:
            write_job_file(table, write_job, overwrite=overwrite)
        except (OtbenchError, FileExistsError) as e:
            raise DataError(str(e)) from None
        click.echo(f"wrote {write_job}")
        if out is None:
            return
    from ._extras import extra_errors, require_probe

    require_probe("probe run", job.engine.kind)
    journal = journal if journal is not None else out.parent / f"{out.name}.journal"
    with extra_errors("probe run"), data_errors():
        summary = run_job(job, out, overwrite=overwrite, journal=journal, resume=resume,
                          progress=progress and library_progress("probing"), workers=workers,
                          ray_address=ray_address, worker_cpus=worker_cpus, worker_gpus=worker_gpus)
    click.echo(_summary_text(summary))
    track(lambda rec: probe_record(rec, summary), out)


@probe_group.command("tasks")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the registry as JSON.")
def tasks_cmd(json_out: Path | None) -> None:
    """The task names `probe run --tasks` accepts: benchmark, group, grading, default source."""
    from otbench.probe.data import TASKS

    click.echo(f"{'task':14s} {'benchmark':14s} {'group':14s} {'grading':8s} source")
    for t in TASKS.values():
        if t.embedded is not None:
            src = f"embedded:{t.embedded} (offline)"
        elif t.hub is not None:
            src = f"hub {t.hub}" + (f" config {t.config}" if t.config else "") + (f" split {t.split}" if t.split else "")
        else:
            src = "no default; NAME=PATH"
        click.echo(f"{t.name:14s} {t.benchmark or '-':14s} {t.group:14s} {t.kind:8s} {src}")
    click.echo("NAME=PATH reads a local file or folder with the benchmark's schema "
               "(otbench.probe.data._benchmarks lists the accepted columns).")
    if json_out is not None:
        write_json({t.name: t.as_dict() for t in TASKS.values()}, str(json_out))


def _summary_text(summary) -> str:
    from otbench.probe.stp import cost_text

    c = summary.manifest["counts"]
    r = summary.run
    hit = r.get("cache_hit_rate")
    lines = [
        f"wrote {summary.out}: {c['trajectories']} trajectories, {c['questions']} questions, "
        f"{c['thinking_tokens']} thinking tokens, up to {c['max_steps']} steps",
        f"  trajectories: {r['think']['generated']} tokens at {r['think']['tokens_per_s']:.0f} tok/s; "
        f"probes: {r['probe']['generated']} tokens at {r['probe']['tokens_per_s']:.0f} tok/s"
        + (f"; prefix-cache hits {100 * hit:.1f}%" if hit is not None else "")
        + (f"; the engine preempted {r['preemptions']} sequences (recomputed: its KV cache ran out)"
           if r.get("preemptions") else ""),
        f"  engine start {r['engine_start_s']:.1f} s, total {r['total_s']:.1f} s "
        f"(details in {summary.out / 'run.json'})",
    ]
    if "cost" in r:
        lines.extend("  " + line for line in cost_text(r["cost"]))
    if "journal" in r:
        j = r["journal"]
        bad = len(j["quarantined"])
        lines.append(f"  journal {j['path']}: {j['reused']} units reused, {j['committed']} committed"
                     + (f", {bad} damaged records redone" if bad else ""))
    return "\n".join(lines)


@probe_group.command("audit-tokenizer")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--top", default=5, show_default=True, type=Count(min=0),
              help="Forms listed per kind.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the audit as JSON.")
def audit_cmd(path: Path, top: int, json_out: Path | None) -> None:
    """Boundary vocabulary of the Hugging Face tokenizer in PATH: size and forms by kind (docs/rules.md),
    and the coverage of the boundary->content mapping (docs/rules.md)."""
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from otbench.probe.tokens import KINDS, audit, build_vocabulary
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - transformers raises KeyError, TypeError, ... on a bad file
        why = " ".join(str(e).split())[:200] or type(e).__name__
        raise DataError(f"{path}: not a loadable tokenizer ({type(e).__name__}: {why})") from None
    result = audit(build_vocabulary(tok), top=top)
    click.echo(f"{path}: {result['size']} boundary ids of {result['vocab_size']} "
               f"(tokenizer sha256 {result['tokenizer_hash'][:12]})")
    for k in KINDS:
        entry = result["kinds"][k]
        # forms arrive escaped ("\\n" for a line feed); quote them as they are
        forms = ", ".join(f"'{f}' x{n}" for f, n in entry["forms"])
        click.echo(f"  {k:10s} {entry['count']:6d}" + (f"  {forms}" if forms else ""))
    # The boundary->content mapping: which boundary ids close on the single token
    # of their text up to one line feed (".\n\n" -> ".\n"), used by families
    # whose separator is a line feed; the rest close on their content plus it.
    m = result["mapping"]
    by_kind = ", ".join(f"{k} {m['kinds'][k]['mapped']}/{m['kinds'][k]['total']}" for k in KINDS)
    click.echo(f"  one-newline token for {m['mapped']} of {m['total']} boundary ids "
               f"({100 * m['fraction']:.1f}%): {by_kind}")
    if m["unmapped"]:
        click.echo("  without one: " + ", ".join(f"'{f}' x{n}" for f, n in m["unmapped"]))
    if json_out is not None:
        write_json(result, str(json_out))


def _parse_bs(value: str) -> list[int]:
    bs = counts(value, "'--b'")
    if not bs or any(b < 1 for b in bs):
        raise click.BadParameter(f"expected comma-separated positive integers, got {value!r}",
                                 param_hint="'--b'")
    return bs


@probe_group.command("resegment")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--b", "b_values", default="128,256,512", show_default=True,
              help="Target step lengths (comma-separated).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the distributions as JSON.")
def resegment_cmd(directory: Path, b_values: str, json_out: Path | None) -> None:
    """Realized step-length distributions of the stored trajectories at other b (no regeneration)."""
    from otbench.analysis.measurement import MeasurementSetError
    from otbench.probe.stp import resegment

    bs = _parse_bs(b_values)
    try:
        result = resegment(directory, bs)
    except (MeasurementSetError, ValueError) as e:
        raise DataError(str(e)) from None
    click.echo(f"{directory}: {result['trajectories']} trajectories, {result['tokens']} thinking tokens "
               f"({result['boundary_ids']} boundary ids, rule {result['boundary_rule']}); "
               f"stored b = {result['stored_b']}")
    if result["audit"] is not None:
        a = result["audit"]
        click.echo(f"  boundary events {a['events']}; LF-LF pairs spanning two tokens {a['cross']} "
                   f"({a['unmarked']} not at a boundary id)")
    if result["check"] is not None:
        ch = result["check"]
        click.echo(f"  b = {result['stored_b']} reproduces the stored positions of "
                   f"{ch['matches']}/{ch['trajectories']} trajectories")
    click.echo(f"  {'b':>6s} {'steps':>8s} {'mean':>8s} {'p10':>6s} {'p50':>6s} {'p90':>6s} "
               f"{'min':>6s} {'max':>7s}")
    for row in result["distributions"]:
        click.echo(f"  {row['b']:6d} {row['steps']:8d} {row['mean']:8.1f} {row['p10']:6d} "
                   f"{row['p50']:6d} {row['p90']:6d} {row['min']:6d} {row['max']:7d}")
    if json_out is not None:
        write_json(result, str(json_out))


if __name__ == "__main__":  # pragma: no cover - vLLM workers re-import entry modules
    probe_group(sys.argv[1:])
