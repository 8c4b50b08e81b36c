"""Every reported bootstrap estimate lies inside its own interval or is flagged with the reason
(SPEC §7, docs/rules.md), over 20 simulated sets; the flags reach the JSON and the text."""

import dataclasses
import warnings

import numpy as np
import pytest
from otbench.analysis import simulate
from otbench.analysis.resampling import BOOT_METRICS, bootstrap, format_bootstrap, percentile
from otbench.analysis.resampling._flags import MARK, outside_intervals


def _reported(r):
    """(metric, scope, model, group, estimate, replicates) of every estimate the bootstrap reports."""
    n = r.names
    places = ([("cell", m, g, r.estimate_cell[:, c], r.cell[:, :, c]) for c, (m, g) in enumerate(n.cells)]
              + [("model", m, None, r.estimate_model[:, i], r.model[:, :, i])
                 for i, m in enumerate(n.models)]
              + [("group", None, g, r.estimate_group[:, i], r.group[:, :, i])
                 for i, g in enumerate(n.groups)]
              + [("macro", None, None, r.estimate_macro, r.macro)])
    for scope, m, g, est, reps in places:
        for j, k in enumerate(BOOT_METRICS):
            yield k, scope, m, g, est[j], reps[:, j]
    yield "spearman_or_ad", "macro", None, None, r.estimate_spearman, r.spearman_or_ad


def check_covered_or_flagged(r):
    flags = {(f["metric"], f["scope"], f["model"], f["group"]): f for f in outside_intervals(r)}
    outside = set()
    for k, scope, m, g, est, reps in _reported(r):
        lo, hi = percentile(reps, r.percentiles)
        if not (np.isfinite(est) and np.isfinite(lo) and np.isfinite(hi)):
            continue
        if not lo <= est <= hi:
            outside.add((k, scope, m, g))
            f = flags.get((k, scope, m, g))
            assert f is not None, (k, scope, m, g, est, lo, hi)
            side = "below" if est > hi else "above"      # the replicates lie on the other side
            assert f"lie {side} the estimate" in f["reason"], f["reason"]
    assert set(flags) == outside                         # nothing inside is flagged
    return flags


@pytest.mark.parametrize("seed", range(20))
def test_every_estimate_is_inside_its_interval_or_flagged(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                # cells undrawn in some replicates: counted
        r = bootstrap(simulate("tiny", seed=seed), replicates=200, batch=200)
    flags = check_covered_or_flagged(r)
    # The pairwise spreads over distinct trajectories centre on their estimates (SPEC §7): with
    # a trajectory drawn twice counted as a pair, 15 of these 20 sets had the macro |dOR| above
    # its own interval (38 estimates in all), none after.
    assert not [f for f in flags if f[0].startswith("pairwise")], flags
    assert (MARK in format_bootstrap(r)) == bool(flags)
    assert r.to_json()["outside_intervals"] == list(outside_intervals(r))


def test_an_estimate_outside_is_flagged_where_printed():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = bootstrap(simulate("tiny", seed=1), replicates=50, batch=50)
    # Every macro replicate moved up past its estimate: each estimate now lies below its interval.
    up = np.nanmax(np.abs(r.macro - r.estimate_macro), axis=0) + 1.0
    shifted = dataclasses.replace(r, macro=r.macro + up)
    flags = check_covered_or_flagged(shifted)
    macro = [f for f in flags.values() if f["scope"] == "macro"]
    assert {f["metric"] for f in macro} == set(BOOT_METRICS)
    assert all(f["reason"].startswith("100.0% of its 50 defined replicates lie above") for f in macro)
    text = format_bootstrap(shifted)
    assert f"{MARK} point estimate outside its own interval:" in text
    assert "  or, macro: 100.0% of its 50 defined replicates lie above the estimate" in text
    assert shifted.to_json()["outside_intervals"][0]["interval"][0] > flags[("or", "macro", None, None)]["estimate"]
    # The report's interval and matrix tables give the measured reasons in their captions.
    from otbench.analysis import metrics
    from otbench.analysis.report import _tables as tabs

    m = metrics(simulate("tiny", seed=1))
    for build in (tabs.interval_table, tabs.matrix_table):
        args = (shifted.to_json(), m) if build is tabs.interval_table else (m,)
        kw = {} if build is tabs.interval_table else {"boot": shifted.to_json()}
        t = build("t", *args, "or", title="OR", caption="OR.", **kw)
        assert tabs.EXCLUDES_NOTE in t.caption
        assert "(measured: Avg. / Avg.: 100.0% of its 50 defined replicates lie above" in t.caption
    # Undefined replicates are named in the reason.
    part = r.macro.copy()
    part[:10] = np.nan
    f = outside_intervals(dataclasses.replace(r, macro=part + up))
    assert any("undefined in 10 of 50 replicates" in x["reason"] for x in f)
