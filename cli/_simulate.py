"""`otbench simulate`: write a synthetic measurement set from the calibrated simulator."""

import click

from ._common import DataError, data_errors
from ._numbers import Seed

SCALES = ("tiny", "small", "paper")  # mirrors otbench.analysis.measurement._simulate.SCALES (kept import-free)


@click.command("simulate")
@click.argument("scale_arg", metavar="[SCALE]", required=False, type=click.Choice(SCALES))
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Directory to write the measurement set to.")
@click.option("--scale", type=click.Choice(SCALES), default=None,
              help="tiny (tests), small, or paper (6 models x 963 questions x 16 trajectories); "
                   "also accepted as the argument SCALE, as `oa.simulate(\"small\")` takes it.  "
                   "[default: small]")
@click.option("--seed", type=Seed(), default=0, show_default=True,
              help="Seed of every draw; the same seed writes the same set.")
@click.option("--overwrite", is_flag=True, help="Replace an existing set at --out.")
@click.option("--unsplit", is_flag=True,
              help="Leave the questions without a train/validation/test split (by default the "
                   "default split of `otbench split` is assigned, so `otbench bench` runs at once).")
@click.option("--field-signals", "field_signals", is_flag=True,
              help="Also draw the synthetic answer, answer_conf, hesitation and answer_tokens "
                   "signals the field's early-exit methods need (dynasor-cot, deer, "
                   "answer-consistency); the other arrays do not change.")
@click.option("--peer-signals", "peer_signals", is_flag=True,
              help="Also draw synthetic signals of Dynasor-CoT's and DEER's own probes "
                   "(dynasor_answer, dynasor_window, dynasor_uncertain, dynasor_tokens, deer_conf, "
                   "deer_tokens; docs/rules.md); the other arrays do not change.")
def simulate_cmd(scale_arg: str | None, out: str, scale: str | None, seed: int, overwrite: bool, unsplit: bool,
                 field_signals: bool, peer_signals: bool) -> None:
    """Simulate a SYNTHETIC STP measurement set (no model is run; docs/rules.md).

    The set has the paper's shapes and aggregates near the paper's, is marked
    synthetic in its manifest, and records the generator, its parameters and
    the seed in its provenance. Its questions get the default OTBench split
    (`otbench split` with its defaults) unless --unsplit is given.
    """
    if scale_arg is not None and scale is not None and scale_arg != scale:
        raise DataError(f"give the scale once: the argument {scale_arg!r} and --scale {scale!r} differ")
    scale = scale_arg or scale or "small"
    from otbench.analysis import save
    from otbench.analysis.measurement import simulate

    ms = simulate(scale, seed, field_signals=field_signals, peer_signals=peer_signals)
    if not unsplit:
        from otbench.analysis.bench import assign_splits

        ms = assign_splits(ms)
    with data_errors():
        manifest = save(ms, out, overwrite=overwrite)
    c = manifest["counts"]
    mean_tokens = c["thinking_tokens"] / max(c["trajectories"], 1)
    click.echo(f"SYNTHETIC measurement set (simulated, not model outputs; scale {scale}, "
               f"seed {seed}): {c['trajectories']} trajectories, {c['questions']} questions, "
               f"{c['cells']} cells, mean {mean_tokens:.1f} thinking tokens per trajectory "
               f"-> {out}")
    if unsplit:
        click.echo("no split assigned (--unsplit): run `otbench split` before `otbench bench`")
    else:
        info = ms.provenance["split"]
        ratios = "/".join(f"{100 * r:g}" for r in info["ratios"])
        click.echo(f"split: the default question split (seed {info['seed']}, {ratios} % "
                   f"train/validation/test); `otbench split {out} --seed N --ratios ...` changes it")
