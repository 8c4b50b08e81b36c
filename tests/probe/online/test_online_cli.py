"""`otbench online` refuses what it cannot replay in one line (no engine starts)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _bad_input import cli, refused, small_set  # noqa: E402


def test_certify_refuses_a_set_without_probe_records(tmp_path):
    from otbench.analysis import save
    from otbench.analysis.bench import assign_splits

    for synthetic in (False, True):
        d = tmp_path / f"s{int(synthetic)}"
        save(assign_splits(small_set(synthetic=synthetic)), d)
        refused(cli("online", "certify", d, "--theta", "1"), "online replay needs a probe run")


def test_only_rules_that_run_in_the_processor(tmp_path):
    from otbench.analysis import save

    save(small_set(), tmp_path / "s")
    refused(cli("online", "run", tmp_path / "s", "--theta", "1", "--method", "thinkswitcher"), "--method")


def test_side_request_methods_need_a_probe_run_too(tmp_path):
    from otbench.analysis import save
    from otbench.analysis.bench import assign_splits

    save(assign_splits(small_set()), tmp_path / "s")
    for method in ("dynasor-cot", "deer", "answer-consistency", "budget-forcing"):
        refused(cli("online", "certify", tmp_path / "s", "--theta", "2", "--method", method),
                "online replay needs a probe run")


def test_certify_offline_signal_must_be_recorded(tmp_path):
    import dataclasses

    from otbench.analysis import save
    from otbench.analysis.bench import assign_splits

    ms = assign_splits(small_set())
    prov = {**ms.provenance, "family": {"name": "generic-chat"}, "sampling": {}, "engine": {}}
    save(dataclasses.replace(ms, provenance=prov), tmp_path / "s")
    refused(cli("online", "certify", tmp_path / "s", "--theta", "1", "--offline-signal", "margin_own"),
            "--offline-signal margin_own: the set records no such signal")


def test_deepconf_exit_runs_in_the_processor_and_needs_a_probe_run(tmp_path):
    from otbench.analysis import save
    from otbench.analysis.bench import assign_splits, resolve

    assert resolve("deepconf-exit").online == "processor"
    save(assign_splits(small_set()), tmp_path / "s")
    refused(cli("online", "certify", tmp_path / "s", "--theta", "90", "--method", "deepconf-exit"),
            "online replay needs a probe run")


def test_deepconf_threshold_is_fit_on_train_for_one_model():
    # The CLI fits the method once (OTBench's offline walk) and passes the fitted `Method` to the
    # controller, which sends its online parameters for the set's one model.
    import numpy as np

    from otbench.analysis.bench import assign_splits, resolve, stop_positions
    from otbench.analysis.measurement import simulate
    from otbench.probe.online import OnlineControlError
    from otbench.probe.online import set_rule_args

    ms = assign_splits(simulate("tiny", 0, peer_signals=True))
    one = ms.take(np.flatnonzero(np.asarray(ms.cell_model)[ms.cell] == 0))
    _, _, m = stop_positions(one, resolve("deepconf-exit"), 90.0)
    args = set_rule_args(m, one, 90.0)
    train = one.take(np.flatnonzero(one.split == 0))
    # the synthetic set records DeepConf's own warm-up value, so the threshold is fit on it
    last = train.signals["deepconf_warmup_conf"][np.arange(train.num_trajectories), train.n]
    assert args == {"method": "deepconf-exit",
                    "params": {"threshold": float(np.percentile(last, 10.0)), "window": 2048}}
    if len(ms.models) > 1:
        import pytest

        _, _, m2 = stop_positions(ms, resolve("deepconf-exit"), 90.0)
        with pytest.raises(OnlineControlError, match="online certify replays one model's set"):
            set_rule_args(m2, ms, 90.0)


def test_engine_budget_is_certified_not_run_and_its_strings_are_its_own(tmp_path):
    from otbench.analysis import save
    from otbench.analysis.bench import assign_splits

    d = tmp_path / "s"
    save(assign_splits(small_set(synthetic=True)), d)
    refused(cli("online", "run", d, "--method", "engine-budget", "--theta", "8"),
            "the engine's own cap is certified, not run")
    refused(cli("online", "certify", d, "--method", "thinkbrake-onectx", "--theta", "0.5", "--reasoning-end", "x"),
            "apply to --method engine-budget only")
    # a synthetic set was never probed: nothing to regenerate
    refused(cli("online", "certify", d, "--method", "engine-budget", "--theta", "8"),
            "online replay needs a probe run", "synthetic")
