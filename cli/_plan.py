"""`otbench plan JOB.toml`: a probe job's tokens by phase and device-hours before any engine starts."""

from pathlib import Path

import click

from ._common import DataError, data_errors, write_json


def _questions(text: str | None) -> dict[str, int] | None:
    if text is None:
        return None
    out = {}
    for part in text.split(","):
        name, eq, n = part.strip().rpartition("=")
        if not eq or not name or not n.strip().isdigit() or int(n) < 1:
            raise DataError(f"--questions {text!r}: want GROUP=N[,GROUP=N...] with N a positive integer "
                            f"(at {part.strip()!r})")
        out[name.strip()] = int(n)
    return out


@click.command("plan")
@click.argument("job_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--pilot", "pilot", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A pilot measurement set: its measured lengths, steps and answer lengths per group.")
@click.option("--device", "device", default="h200", show_default=True,
              help="Accelerator of the device model: h200, h100, a100-80gb, l40s.")
@click.option("--questions", "questions", default=None,
              help="GROUP=N,... questions per group instead of loading the job's [data].")
@click.option("--max-num-seqs", "max_num_seqs", default=None, type=click.IntRange(min=1),
              help="Sequences decoded at once [default: the job's engine.max_num_seqs, else 256].")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the plan as JSON.")
def plan_cmd(job_file: Path, pilot: Path | None, device: str, questions: str | None,
             max_num_seqs: int | None, json_out: Path | None) -> None:
    """Estimate JOB_FILE's tokens by phase and device-hours per benchmark group (low/high range),
    from a pilot set or stated priors; starts no engine."""
    from otbench.probe.plan import plan_job, plan_text
    from otbench.probe.stp import load_job

    counts = _questions(questions)
    with data_errors():
        job = load_job(job_file)
        plan = plan_job(job, pilot=pilot, device_name=device, questions=counts, max_num_seqs=max_num_seqs)
    for line in plan_text(plan):
        click.echo(line)
    if json_out is not None:
        write_json(plan.as_dict(), json_out)
