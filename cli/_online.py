"""`otbench online run|certify`: an OTBench stopping method run while the model generates, and its certificate."""

from pathlib import Path

import click

from ._common import argument_errors, data_errors, load_set, result_path, write_result
from ._numbers import Count, Real


@click.group("online")
def online_group() -> None:
    """Online early exit in vLLM (the `otbench.probe.online` logits processor)."""


def _offline(ms, method, theta: float, split: str):
    """(the set with its splits, rows of `split`, OTBench's stops there, the fitted `Method`)."""
    from otbench.analysis.bench import assign_splits, stop_positions

    if ms.split is None or not (ms.split >= 0).any():
        ms = assign_splits(ms)
    rows, k, fitted = stop_positions(ms, method, theta, split=split)
    return ms, rows, k, fitted


def _offline_signal(ms, asked: str | None) -> str:
    """The recorded signal the offline walk reads: `margin_own` (the online processor's context)
    when the set records it, else the probe's `margin`; `asked` overrides."""
    from otbench.probe.online import OnlineControlError

    sig = asked or ("margin_own" if "margin_own" in ms.signals else "margin")
    if sig not in ms.signals:
        raise OnlineControlError(f"--offline-signal {sig}: the set records no such signal "
                                 f"(it has {', '.join(sorted(ms.signals))})")
    return sig


def _rule(method: str | None):
    """The resolved method (the registry's default online method without `--method`) and how it
    runs online (`Method.online`: the logits processor or side requests); a method that does not
    run online is refused in one line."""
    from otbench.analysis.methods import DEFAULT_ONLINE, MethodError, resolve
    from otbench.probe.online import OnlineControlError

    spec = method or DEFAULT_ONLINE
    try:
        m = resolve(spec)
    except MethodError as e:
        raise OnlineControlError(f"--method {spec}: {e}") from None
    if m.online is None:
        raise OnlineControlError(f"--method {spec}: it does not run online (`otbench bench list` says "
                                 "how each method runs: in the logits processor or with side requests)")
    return m


def _on_signal(m, ms, asked: str | None):
    """`m` on the set's offline signal (`_offline_signal`) when it is a processor method reading the
    margin and taking a ``signal`` option, else `m` as it is."""
    from otbench.analysis.methods import MethodError, resolve
    from otbench.probe.online import OnlineControlError

    if m.online != "processor" or "margin" not in m.signals or not m.accepts("signal"):
        return m
    try:
        return resolve(m.config_spec, signal=_offline_signal(ms, asked))
    except MethodError as e:
        raise OnlineControlError(f"--method {m.name}: {e}") from None


def _field(set_dir: Path, ms, m, theta: float, split: str, grader: str, trajectories,
           thinking: str, server: dict) -> dict:
    from otbench.probe.online import certify_field

    def offline(sub):
        from otbench.analysis.bench import offline_point

        return offline_point(sub, m, theta, split=split)

    return certify_field(set_dir, ms, offline, method=m, theta=theta, grader=grader,
                         trajectories=trajectories, thinking=thinking, server=server)


def _processor(set_dir: Path, ms, m, theta: float, split: str, trajectories, **kw) -> dict:
    """`m` run in the logits processor on `split`: the offline walk fits it and gives its stops, and
    the fitted `Method` itself goes to the controller (`certify_set`)."""
    from otbench.probe.online import certify_set

    ms, rows, k, fitted = _offline(ms, m, theta, split)
    if trajectories is not None:
        rows, k = rows[:trajectories], k[:trajectories]
    return certify_set(set_dir, ms, rows, k, method=fitted, theta=theta, **kw)


ENGINE_BUDGET = "engine-budget"
"""`online certify --method engine-budget`: the engine's own thinking cap (not a `Method`: it is
the engine's rule, scored against the fixed-budget point of budget forcing at the same θ)."""


def _engine_cap(set_dir: Path, ms, theta: float, grader: str, trajectories, json_path, start, end,
                server: dict, runner: str | None = None) -> None:
    from otbench.analysis.methods import BudgetForcing
    from otbench.probe.online import cap_line, certify_engine_cap, check_replayable

    check_replayable(set_dir, ms)
    ms, rows, k, fixed = _offline(ms, BudgetForcing(), theta, "test")
    if trajectories is not None:
        rows, k = rows[:trajectories], k[:trajectories]
    cert = certify_engine_cap(set_dir, ms, rows, k, theta=theta, grader=grader, start=start, end=end,
                              server=server, frontier=_fb_frontier(ms, rows), offline=fixed.name,
                              runner=runner)
    path = write_result({"schema": "otbench.online-certify-cap/2", **cert}, set_dir, "online_certify.json",
                        json_path)
    click.echo(f"wrote {path}")
    click.echo(cap_line(cert))


def _fb_frontier(ms, rows):
    """`beta -> {"beta", "accuracy", "grid"}`: the exact oracle FB frontier of `rows` (NumPy, no JAX;
    docs/rules.md), its macro accuracy at the largest point of the 1,001-point grid `<= beta`."""
    import numpy as np

    from otbench.analysis.frontier import frontiers

    def at(beta: float) -> dict:
        fr = frontiers(ms.take(np.asarray(rows)), strategies="fb", grid=1001)
        i = int(np.clip(np.floor(beta * 1000 + 1e-9), 0, 1000)) if np.isfinite(beta) else 0
        return {"beta": i / 1000, "accuracy": float(fr.strategies["fb"].macro[i]), "grid": 1001}
    return at


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
    from otbench.probe.online import certificate_line, check_replayable, disagreement_line, net_line, signals_line

    ms = load_set(str(set_dir))
    _check_result(set_dir, "online_certify.json", json_path)
    with argument_errors():
        if method == ENGINE_BUDGET:
            _engine_cap(set_dir, ms, theta, grader, trajectories, json_path, reasoning_start, reasoning_end,
                        {"base_url": base_url, "api_key_env": api_key_env}, cap_runner)
            return
        if reasoning_start is not None or reasoning_end is not None or cap_runner is not None:
            from otbench.probe.online import OnlineControlError

            raise OnlineControlError(f"--reasoning-start/--reasoning-end/--runner apply to --method {ENGINE_BUDGET} "
                                     "only")
        m = _rule(method)
        check_replayable(set_dir, ms)
        server = {"base_url": base_url, "api_key_env": api_key_env}
        if m.online == "side":
            cert = _field(set_dir, ms, m, theta, "test", grader, trajectories, thinking, server)
            path = write_result({"schema": "otbench.online-certify/2", **cert}, set_dir, "online_certify.json",
                                json_path)
            click.echo(f"wrote {path}")
            click.echo(certificate_line(cert))
            click.echo(disagreement_line(cert))
            click.echo(net_line(cert))
            click.echo(signals_line(cert))
            return
        cert = _processor(set_dir, ms, _on_signal(m, ms, offline_signal), theta, "test", trajectories,
                          grader=grader, server=server)
    path = write_result({"schema": "otbench.online-certify/2", **cert}, set_dir, "online_certify.json",
                        json_path)
    click.echo(f"wrote {path}")
    click.echo(certificate_line(cert))
    click.echo(disagreement_line(cert))


@online_group.command("run")
@_common
@click.option("--split", type=click.Choice(["train", "validation", "test"]), default="test", show_default=True)
def run_cmd(set_dir: Path, method: str, theta: float, grader: str, trajectories, json_path, thinking: str,
            split: str, base_url, api_key_env) -> None:
    """Run the method online over SET's questions (stored prompts and seeds) and record what happened.

    One record per trajectory: thinking tokens, where the controller
    stopped, the answer's grade; marked online in its provenance.
    """
    from otbench.probe.online import check_replayable

    ms = load_set(str(set_dir))
    _check_result(set_dir, "online_run.json", json_path)
    with argument_errors():
        if method == ENGINE_BUDGET:
            from otbench.probe.online import OnlineControlError

            raise OnlineControlError(f"--method {ENGINE_BUDGET}: the engine's own cap is certified, not "
                                     f"run (otbench online certify SET --method {ENGINE_BUDGET} --theta T)")
        m = _rule(method)
        check_replayable(set_dir, ms)
        server = {"base_url": base_url, "api_key_env": api_key_env}
        if m.online == "side":
            rec = _field(set_dir, ms, m, theta, split, grader, trajectories, thinking, server)
        else:
            rec = _processor(set_dir, ms, m, theta, split, trajectories, grader=grader, shift=False,
                             server=server)
    keep = ("method", "theta", "grader", "online", "sampling", "trajectories", "online_acc",
            "online_rel_cost", "per_trajectory") + (("online_net_rel_cost", "side", "thinking", "controller")
                                                    if m.online == "side" else ())
    doc = {"schema": "otbench.online-run/1", "split": split, **{k2: rec[k2] for k2 in keep}}
    path = write_result(doc, set_dir, "online_run.json", json_path)
    click.echo(f"wrote {path}")
    net = f", net {100 * rec['online_net_rel_cost']:.1f}% with side requests" if "side" in rec else ""
    click.echo(f"online run: {rec['trajectories']} trajectories, accuracy {100 * rec['online_acc']:.1f}%, "
               f"relative cost {100 * rec['online_rel_cost']:.1f}%{net}")
