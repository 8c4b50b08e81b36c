"""`otbench online run|certify`: an OTBench stopping method run while the model generates, and its certificate."""

from pathlib import Path

import click

from otbench.workflows import ENGINE_BUDGET

from ._common import argument_errors, data_errors, load_set, result_path, write_result
from ._numbers import Count, Real


@click.group("online")
def online_group() -> None:
    """Online early exit in vLLM (the `otbench.probe.online` logits processor)."""


def _common(f):
    # A served engine's address and key variable come from the command, never from the set.
    f = click.option("--api-key-env", default=None, help="A served set: the environment variable "
                     "holding the server's API key (sent only to --base-url URL).")(f)
    f = click.option("--base-url", default=None, help="A served set: the server to replay on "
                     "(http://HOST:PORT), or 'recorded' for the set's recorded address, without "
                     "credentials.")(f)
    f = click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Write the result here (default: SET/results/<command>.json).")(f)
    f = click.option("--trajectories", type=Count(min=1), default=None,
                     help="Replay only the first N trajectories of the split (small runs).")(f)
    f = click.option("--grader", default="auto", show_default=True, help="Grader of the online answers.")(f)
    # `inf` written out stays the method's to judge (an FB method's "no cap"), as in --thetas
    f = click.option("--theta", type=Real(spelled=True), required=True, help="The method's control parameter.")(f)
    f = click.option("--thinking", type=click.Choice(["generate", "stored"]), default="generate",
                     show_default=True, help="Side-request methods: decode the thinking, or feed the "
                                             "stored thinking (checks the signals and decisions alone).")(f)
    f = click.option("--method", default=None,
                     help="A method that runs online (`otbench bench list` says how each runs: in the "
                          "logits processor or with side requests, plug-ins included; default: the "
                          "ThinkBrake baseline), or engine-budget (certify only: the engine's own "
                          "thinking cap).")(f)
    return click.argument("set_dir", metavar="SET", type=click.Path(exists=True, file_okay=False,
                                                                    path_type=Path))(f)


def _check_result(set_dir: Path, name: str, json_path: Path | None) -> None:
    """The result's path is checked before the engine runs (an output refused after an hour of
    generation loses the hour)."""
    from otbench.files import check_output

    with data_errors():
        check_output(result_path(set_dir, name, json_path))


@online_group.command("certify")
@_common
@click.option("--offline-signal", type=click.Choice(["margin_own", "margin"]), default=None,
              help="The recorded signal of the offline walk (default: margin_own, the margin in the "
                   "model's own context that the processor reads, when the set records it; margin: "
                   "the probe's, after the boundary token is replaced).")
@click.option("--reasoning-start", default=None,
              help="engine-budget: the cap's start string (default: under Model Runner V1 the prompts' "
                   "last token; under V2, which counts from the last occurrence anywhere, the family's "
                   "reasoning start marker or the shortest prompt suffix absent from the thinking; "
                   "docs/guides/online.md).")
@click.option("--runner", "cap_runner", type=click.Choice(["v1", "v2"]), default=None,
              help="engine-budget: the model runner of a served engine, which does not report it "
                   "(a local vLLM engine reports its own).")
@click.option("--reasoning-end", default=None,
              help="engine-budget: the cap's end string (default: the text of otbench's own close: "
                   "separator, thinking end, answer prefix).")
def certify_cmd(set_dir: Path, method: str, theta: float, grader: str, trajectories, json_path,
                thinking: str, offline_signal, base_url, api_key_env, reasoning_start, reasoning_end,
                cap_runner) -> None:
    """Replay SET's test questions online with their stored seeds and compare with OTBench's point.

    Per test trajectory: the online stop position against the one OTBench's
    offline walk computes for THETA on the stored trajectory; then online
    accuracy and relative cost against the offline point on the macro chain,
    with OTBench's two-stage paired bootstrap intervals; the verdict
    (certified, rejected, or not certified on too little evidence, with its
    reasons) and every source of disagreement.

    `--method engine-budget`: the engine's own thinking cap (vLLM's
    thinking_token_budget) at THETA tokens, checked per trajectory against
    the stored trajectory's cut at THETA, token for token with its close,
    every disagreement by kind, and its point against the fixed-budget
    point and the FB frontier.
    """
    from otbench.probe.online import cap_line, certificate_line, disagreement_line, net_line, signals_line
    from otbench.workflows import certify

    ms = load_set(str(set_dir))
    _check_result(set_dir, "online_certify.json", json_path)
    with argument_errors():
        cert = certify(set_dir, ms, method, theta, grader=grader, trajectories=trajectories, thinking=thinking,
                       offline_signal=offline_signal, server={"base_url": base_url, "api_key_env": api_key_env},
                       reasoning_start=reasoning_start, reasoning_end=reasoning_end, runner=cap_runner)
    path = write_result(cert, set_dir, "online_certify.json", json_path)
    click.echo(f"wrote {path}")
    if method == ENGINE_BUDGET:
        click.echo(cap_line(cert))
        return
    click.echo(certificate_line(cert))
    click.echo(disagreement_line(cert))
    if cert.get("controller") == "side requests":
        click.echo(net_line(cert))
        click.echo(signals_line(cert))


@online_group.command("run")
@_common
@click.option("--split", type=click.Choice(["train", "validation", "test"]), default="test", show_default=True)
def run_cmd(set_dir: Path, method: str, theta: float, grader: str, trajectories, json_path, thinking: str,
            split: str, base_url, api_key_env) -> None:
    """Run the method online over SET's questions (stored prompts and seeds) and record what happened.

    One record per trajectory: thinking tokens, where the controller
    stopped, the answer's grade; marked online in its provenance.
    """
    from otbench.workflows import run_online

    ms = load_set(str(set_dir))
    _check_result(set_dir, "online_run.json", json_path)
    with argument_errors():
        doc = run_online(set_dir, ms, method, theta, split=split, grader=grader, trajectories=trajectories,
                         thinking=thinking, server={"base_url": base_url, "api_key_env": api_key_env})
    path = write_result(doc, set_dir, "online_run.json", json_path)
    click.echo(f"wrote {path}")
    net = f", net {100 * doc['online_net_rel_cost']:.1f}% with side requests" if "side" in doc else ""
    click.echo(f"online run: {doc['trajectories']} trajectories, accuracy {100 * doc['online_acc']:.1f}%, "
               f"relative cost {100 * doc['online_rel_cost']:.1f}%{net}")
