"""`otbench plan JOB.toml`: a probe job's tokens by phase and device-hours before any engine starts."""

from pathlib import Path

import click

from ._common import DataError, data_errors, write_json
from ._numbers import Count


def _questions(text: str | None) -> dict[str, int] | None:
    if text is None:
        return None
    out = {}
    for part in text.split(","):
        name, eq, n = part.strip().rpartition("=")
        n = n.strip()
        # ASCII digits only (`str.isdigit` accepts "²", which int() refuses), at most 12 of them
        if not eq or not name or not (n.isascii() and n.isdigit()) or len(n) > 12 or int(n) < 1:
            raise DataError(f"--questions {text!r}: want GROUP=N[,GROUP=N...] with N a positive integer "
                            f"of at most 12 ASCII digits (at {part.strip()!r})")
        if name.strip() in out:
            raise DataError(f"--questions {text!r}: group {name.strip()!r} is given twice (at "
                            f"{part.strip()!r}); give each group once")
        out[name.strip()] = int(n)
    return out


@click.command("plan")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--pilot", "pilot", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A pilot measurement set: its measured lengths, steps and answer lengths per group.")
@click.option("--device", "device", default=None,
              help="Accelerator of the device model: h200, h100, a100-80gb, l40s, cpu [default: h200, or the "
                   "device of the --calibrate runs].")
@click.option("--calibrate", "calibrate_runs", multiple=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="A measured run's output folder (its run.json and set); repeat for several. Fits the time "
                   "model's constants on them, prints predicted against measured engine-seconds per run, and "
                   "plans JOB_FILE (when given) with them; only for the device and model they were measured on.")
@click.option("--questions", "questions", default=None,
              help="GROUP=N,... questions per group instead of loading the job's [data].")
@click.option("--max-num-seqs", "max_num_seqs", default=None, type=Count(min=1),
              help="Sequences decoded at once [default: the job's engine.max_num_seqs, else 256].")
@click.option("--target", "target", default=None,
              help="Precision targets, e.g. 'OR:1pp,AD:0.5pp': the most each macro statistic's 95 % interval "
                   "half-width may be (OR, AD, P0). Needs --pilot; recommends the cheapest (R, P) of the "
                   "candidate grid that meets every target.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the plan as JSON.")
def plan_cmd(job_file: Path | None, pilot: Path | None, device: str | None, calibrate_runs: tuple[Path, ...],
             questions: str | None, max_num_seqs: int | None, target: str | None, json_out: Path | None) -> None:
    """Estimate JOB_FILE's tokens by phase and device-hours per benchmark group (low/high range),
    from a pilot set or stated priors; with a pilot also the bootstrap intervals' predicted
    half-widths, and with --target the cheapest (R, P) that meets them; with --calibrate the
    time model fitted on measured runs; starts no engine."""
    from otbench.probe.plan import calibrate, calibration_text, parse_targets, plan_advice, plan_job, plan_text
    from otbench.probe.stp import load_job
    from otbench.workflows import plan_precision

    if job_file is None and not calibrate_runs:
        raise DataError("plan: give JOB_FILE (or --calibrate RUN to fit the time model on measured runs)")
    counts = _questions(questions)
    with data_errors():
        targets = parse_targets(target) if target is not None else None
    if targets is not None and pilot is None:
        raise DataError("--target needs --pilot SET: the interval widths are predicted from a pilot")
    cal = job = None
    with data_errors():
        if calibrate_runs:
            cal = calibrate(calibrate_runs)
        if device is None:      # an empty --device is refused by name, not read as the default
            device = cal.device_key if cal is not None else "h200"
        if job_file is not None:
            job = load_job(job_file)
            if cal is not None:          # refused before anything is printed
                cal.check(device_name=device, model=job.model, tp=job.engine.tensor_parallel_size)
    if cal is not None:
        for line in calibration_text(cal):
            click.echo(line)
        if job is None:
            if json_out is not None:
                write_json(cal.as_dict(), json_out)
            return
    with data_errors():
        plan = plan_job(job, pilot=pilot, device_name=device, questions=counts, max_num_seqs=max_num_seqs,
                        calibration=cal)
    with data_errors():
        advice = plan_advice(job, plan, lambda changed: plan_job(
            changed, pilot=pilot, device_name=device, questions=counts, max_num_seqs=max_num_seqs, calibration=cal))
    for line in [*plan_text(plan), *advice]:
        click.echo(line)
    out = plan.as_dict() | {"advice": advice}
    if pilot is not None:
        with data_errors():
            precision = plan_precision(job, plan, pilot, targets=targets, device_name=device, questions=counts,
                                       max_num_seqs=max_num_seqs, calibration=cal)
        if precision.block is None and targets:
            raise DataError(f"--target: {precision.note}")
        for line in precision.lines:
            click.echo(line)
        out["precision"] = precision.block
    if json_out is not None:
        write_json(out, json_out)

