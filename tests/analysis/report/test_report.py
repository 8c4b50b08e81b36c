"""The report (issue 8): every file, sizes, determinism, synthetic marking, inputs, rules, CLI."""

import csv
import dataclasses
import html
import html.parser
import io
import itertools
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import content_hash, frontiers, metrics, simulate
from otbench.analysis.bench._splits import assign_splits
from otbench.analysis.measurement._build import from_ragged, ragged
from otbench.analysis.measurement._io import save
from otbench.analysis.report._curves import (
    MAX_SMALL_MULTIPLES,
    PerTrajectory,
    example_question,
    example_rows,
    pair_mad,
    step_length_bs,
    step_lengths,
)
from otbench.analysis.report._figures import (
    DPI,
    SNAP,
    local_change_edges,
    png_size,
    size_px,
)
from otbench.analysis.report._inputs import CACHE_FILES, ReportInputError, gather
from otbench.analysis.report._bench_section import evaluated_split_frontiers
from otbench.analysis.report._tables import (
    interval_table,
    matrix_table,
    to_csv,
    to_html,
    to_latex,
)
from otbench.analysis.report._write import ReportError, write_report
from otbench.cli._report import report_cmd

ALL_FIGURES = ("fig1_overthinking", "fig2_baselines", "fig3_local_changes", "fig4_frontiers",
               "fig5_frontier_bands", "fig6_otbench", "fig7_sensitivity", "fig8_stp_examples",
               "fig9_question_trajectories", "fig10_step_lengths")
BOUNDARY = (7, 9)    # boundary token ids of the hand-built token set
NL_END, NL_START = (3,), (4,)   # "vocab+span": the pair (3, 4) is a boundary too
B0 = 8               # its recorded target step length


# -- inputs built here ------------------------------------------------------------------------

def _span(rule: str):
    from otbench.analysis.measurement._segment import boundary_mask

    if rule == "vocab":
        return None
    return boundary_mask(50, NL_END), boundary_mask(50, NL_START)


def token_set(synthetic: bool = False, rule: str = "vocab"):
    """A small set whose positions come from segmenting stored token ids (as the probe does).

    2 models x 2 groups x 3 questions, R = 3 (one question R = 1, one trajectory
    with no thinking), P = 4; the `tokens` table holds the thinking ids, the
    provenance the boundary ids and b = 8, so re-segmenting at b = 8
    reproduces every stored `L`.
    """
    from otbench.analysis.measurement._segment import boundary_mask, segment

    rng = np.random.default_rng(5)
    mask = boundary_mask(50, BOUNDARY)
    rows = []
    for m, g, q in itertools.product(("model-a", "model-b"), ("G1", "G2"), ("q1", "q2", "q3")):
        for s in range(1 if (g, q) == ("G2", "q3") else 3):
            n_tok = 0 if (m, g, q, s) == ("model-a", "G1", "q1", 0) else int(rng.integers(5, 70))
            ids = rng.integers(0, 50, n_tok).astype(np.int64)
            if n_tok > 10:                       # a spanning pair, a boundary under "vocab+span"
                j = int(rng.integers(1, n_tok - 2))
                ids[j:j + 2] = (NL_END[0], NL_START[0])
            L = segment(ids, mask, B0, span=_span(rule))
            C = rng.integers(0, 5, L.size)
            rows.append(dict(model=m, group=g, question=f"{g}-{q}", traj=s, ids=ids, L=L, C=C,
                             y=int(rng.integers(0, 2))))
    ms = from_ragged(
        model=[r["model"] for r in rows], group=[r["group"] for r in rows],
        question=[r["question"] for r in rows],
        trajectory=np.array([r["traj"] for r in rows], dtype=np.int64),
        probes=np.full(len(rows), 4, dtype=np.int64),
        L=ragged([r["L"] for r in rows], np.int64), C=ragged([r["C"] for r in rows], np.int64),
        y=np.array([r["y"] for r in rows], dtype=np.int64), synthetic=synthetic,
        provenance={"boundary_ids": list(BOUNDARY), "boundary_rule": rule, "probe": {"b": B0},
                    "newline_end_ids": list(NL_END), "newline_start_ids": list(NL_START)})
    tokens = pa.table({
        "model": pa.array([r["model"] for r in rows], pa.string()),
        "thinking": pa.array([r["ids"].tolist() for r in rows], pa.list_(pa.int32())),
        "L": pa.array([r["L"].tolist() for r in rows], pa.list_(pa.int32()))})
    return ms, tokens, rows


def bootstrap_doc(m: dict, f: dict, *, replicates: int = 200) -> dict:
    """An ``otbench.bootstrap/1`` document of the issue-4 shape (intervals: value ± a margin)."""
    keys = ("or", "ad", "full_acc", "tokens", "endpoint_acc")

    def iv(v, k):
        w = 50.0 if k == "tokens" else 0.03
        return None if v is None else [v - w, v + w]

    g = np.linspace(0.0, 1.0, 101)
    fr = {"grid": g.tolist()}
    for s, sf in f["strategies"].items():
        y = np.interp(g, np.asarray(f["grid"]), np.asarray(sf["macro"]))
        bm = sf["beta_match"]
        fr[s] = {"lo": np.clip(y - 0.02, 0, 1).tolist(), "hi": np.clip(y + 0.02, 0, 1).tolist(),
                 "median": y.tolist(), "beta_match": None if bm is None else [bm / 2, min(1, bm * 1.5)],
                 "ceiling": [sf["ceiling"] - 0.01, sf["ceiling"] + 0.01], "beta_sat": [0.5, None]}
    return {"schema": "otbench.bootstrap/1", "replicates": replicates, "seed": 20260721,
            "percentiles": [2.5, 97.5],
            "cells": [dict(model=c["model"], group=c["group"], **{k: iv(c[k], k) for k in keys})
                      for c in m["cells"]],
            "by_model": {k: {x: iv(v[x], x) for x in keys} for k, v in m["by_model"].items()},
            "by_group": {k: {x: iv(v[x], x) for x in keys} for k, v in m["by_group"].items()},
            "macro": {k: iv(m["macro"][k], k) for k in keys}, "frontiers": fr}


def thinning_doc(m: dict) -> dict:
    """An ``otbench.thinning/1`` document of the issue-4 shape."""
    o, a = m["macro"]["or"], m["macro"]["ad"]
    return {"schema": "otbench.thinning/1",
            "probes": {str(k): {"or": o + 0.01 * (4 - k), "ad": a + 0.01 * (4 - k),
                                "retention": k / 4,
                                "cells": [{"model": c["model"], "group": c["group"], "or": c["or"],
                                           "ad": c["ad"], "retention": k / 4} for c in m["cells"]]}
                       for k in (1, 2, 3, 4)},
            "trajectories": {str(r): {"or": [o - 0.1 / r, o + 0.1 / r], "ad": [a - 0.05 / r, a + 0.05 / r],
                                      "mean_or": o, "mean_ad": a} for r in (1, 2)}}


def bench_doc(ms, *, strategy: str = "dee") -> dict:
    """An ``otbench.bench/1`` document on the set's test split: two points read off its frontier."""
    test = ms.take(np.flatnonzero(ms.split == 2))
    end = test.L[np.arange(test.num_trajectories), test.n].astype(np.int64)
    cells = []
    for c in np.unique(test.cell).tolist():
        rows = test.cell_rows(c)
        mm, gg = test.cell_name(c)
        cells.append({"model": mm, "group": gg, "trajectories": int(rows.size),
                      "total_tokens": int(end[rows].sum()), "points": []})
    f = frontiers(test, strategies=[strategy], grid=11).to_json()["strategies"][strategy]["macro"]
    pts = [{"theta": float(t), "cost": 10.0 * t, "rel_cost": t / 10, "acc": f[t] - 0.01,
            "frontier_acc": f[t], "gap": 1.0, "nondominated": t != 5} for t in (2, 5, 8)]
    return {"schema": "otbench.bench/1", "method": "fixed-test", "strategy": strategy,
            "split": "test", "synthetic": bool(ms.synthetic), "points": pts,
            "summary": {"gap_area": 1.0, "gap_area_full": 0.8, "realized_share": 0.5,
                        "points": 3, "curve_points": 2},
            "reference": {"a_zero": 0.1, "a_full": 0.5},
            "config": {"splits": dict(ms.provenance.get("split", {}))}, "cells": cells}


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    ms, tokens, _ = token_set()
    ms = assign_splits(ms)
    d = tmp_path_factory.mktemp("set") / "set"
    save(ms, d, extra_tables={"tokens": tokens})
    return d, ms


@pytest.fixture(scope="module")
def full_report(token_dir, tmp_path_factory):
    """A report with every input: bootstrap, thinning and OTBench files in DIR/results."""
    d, ms = token_dir
    m, f = metrics(ms), frontiers(ms).to_json()
    res = d / "results"
    res.mkdir()
    bound = {"content_hash": content_hash(ms)}     # as otbench writes them
    (res / "bootstrap.json").write_text(json.dumps({**bootstrap_doc(m, f), **bound}))
    (res / "thinning.json").write_text(json.dumps({**thinning_doc(m), **bound}))
    (res / "bench-dee.json").write_text(json.dumps({**bench_doc(ms), **bound}))
    out = tmp_path_factory.mktemp("rep") / "report"
    lines = []
    index = write_report(d, out, progress=lines.append)
    return out, index, ms, lines


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.src, self.href = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.src.append(a["src"])
        if tag == "a":
            self.href.append(a["href"])


# -- the report as a whole ----------------------------------------------------------------------

def test_every_file_is_written(full_report):
    out, index, ms, lines = full_report
    assert index == out / "index.html"
    man = json.loads((out / "report.json").read_text())
    assert [f["name"] for f in man["figures"]] == list(ALL_FIGURES)
    assert man["notes"] == [] and man["synthetic"] is False
    assert {s["kind"]: s["origin"] for s in man["inputs"]} == {
        "metrics": "computed", "frontier": "computed", "bootstrap": "cached",
        "thinning": "cached", "otbench": "cached"}
    names = {t["name"] for t in man["tables"]}
    assert {"table1_or", "table2_ad", "table3_full_acc", "table4_tokens", "table9_or_ci",
            "table10_ad_ci", "table11_full_acc_ci", "table18_frontiers", "table17_local_changes",
            "table19_otbench", "table20_thinning_probes", "table21_thinning_trajectories",
            "table22_step_lengths", "table6_zero_step", "table14_zero_step_ci",
            "table15_pairwise_or_ci", "table16_pairwise_ad_ci"} <= names
    for t in names:
        assert (out / "tables" / f"{t}.csv").stat().st_size > 0
        assert (out / "tables" / f"{t}.tex").read_text().startswith("% otbench report table")
    for k in ("metrics", "frontier", "bootstrap", "thinning", "otbench"):
        assert json.loads((out / "data" / f"{k}.json").read_text())["schema"].startswith("otbench.")
    # Progress: one line per figure, and the final path.
    assert sum(line.startswith("figure ") for line in lines) == len(ALL_FIGURES)
    assert lines[-1] == f"wrote {index}"


def test_pngs_have_the_recorded_size_and_are_not_blank(full_report):
    import matplotlib.image

    out, _, ms, _ = full_report
    man = json.loads((out / "report.json").read_text())
    step = DPI // SNAP                       # sizes are whole 1/8 inches at 144 dpi
    for f in man["figures"]:
        path = out / f["file"]
        w, h = png_size(path)
        assert (w, h) == (f["width"], f["height"]) and w % step == 0 and h % step == 0
        assert 400 <= w <= 2600 and 300 <= h <= 2600, (f["name"], w, h)
        img = matplotlib.image.imread(path)
        assert img.shape[:2] == (h, w)
        # Drawn: many distinct colours, and a sizeable share of non-white pixels.
        rgb = np.round(img[..., :3] * 255).astype(np.int64).reshape(-1, 3)
        packed = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
        assert np.unique(packed).size > 50
        assert np.mean(rgb.min(axis=1) < 230) > 0.03
    # 4.8 in snaps to 4.75 in (38/8): 7.5 x 144 = 1080, 4.75 x 144 = 684 pixels.
    assert size_px((7.5, 4.8)) == (1080, 684)


def test_captions_titles_and_page(full_report):
    out, index, ms, _ = full_report
    man = json.loads((out / "report.json").read_text())
    T = ms.num_trajectories
    page = index.read_text()
    for f in man["figures"]:
        assert f["title"] and f["caption"].endswith(".") and "\n" not in f["caption"]
        assert "trajectories" in f["caption"]
        assert html.escape(f["caption"]) in page
        if f["name"] not in ("fig6_otbench", "fig9_question_trajectories"):
            assert f["trajectories"] == T and f"{T:,} trajectories" in f["caption"]
    test_rows = int(np.sum(ms.split == 2))
    assert next(f for f in man["figures"] if f["name"] == "fig6_otbench")["trajectories"] == test_rows
    # Self-contained: every image and link resolves inside the folder; nothing remote.
    p = _Links()
    p.feed(page)
    assert sorted(p.src) == sorted(f["file"] for f in man["figures"])
    for ref in p.src + [h for h in p.href if not h.startswith("#")]:
        assert (out / ref).is_file(), ref
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_the_trajectory_page_shows_the_figures_trajectories(full_report):
    import re

    out, index, ms, _ = full_report
    man = json.loads((out / "report.json").read_text())
    page = (out / "trajectories.html").read_text(encoding="utf-8")
    assert '<a href="trajectories.html">' in index.read_text()
    shown = {int(x) for x in re.findall(r'<section class="traj" id="t(\d+)"', page)}
    pt = PerTrajectory.of(ms)
    assert set(example_rows(ms, pt)) <= shown
    q = example_question(ms, pt)
    assert q is not None and set(np.asarray(q)[np.argsort(ms.trajectory[q], kind="stable")]
                                 [:MAX_SMALL_MULTIPLES].tolist()) <= shown
    assert man["view"] == {"file": "trajectories.html", "trajectories": len(shown)}
    assert "<script" not in page.replace("<script>document.documentElement", "", 1)


def test_same_inputs_give_byte_identical_files(full_report, token_dir, tmp_path):
    out, _, _, _ = full_report
    d, _ = token_dir
    again = write_report(d, tmp_path / "again").parent
    # Only the footer's reproduce command (index.html, report.json) names the output folder.
    moved = {k: v.replace(str(again).encode(), str(out).encode()) for k, v in files(again).items()}
    # The folder's ledger records the checksums of what it wrote: those two files differ by the
    # folder name, every other entry is the same.
    ledgers = [json.loads(x.pop(".otbench-written.json"))["files"] for x in (moved, files(out))]
    for led in ledgers:
        led.pop("index.html"), led.pop("report.json")
    assert ledgers[0] == ledgers[1] and len(ledgers[0]) > 10
    assert moved == {k: v for k, v in files(out).items() if k != ".otbench-written.json"}
    assert [k for k, v in files(again).items() if str(again).encode() in v] == ["index.html",
                                                                                 "report.json"]


def test_an_earlier_report_is_rewritten_and_other_folders_are_refused(token_dir, tmp_path):
    d, ms = token_dir
    out = tmp_path / "r"
    write_report(ms, out, results_dir=None)
    (out / "figures" / "mine.png").write_bytes(b"x")          # a user's file in the report
    (out / "notes.txt").write_text("my notes")
    write_report(ms, out, results_dir=None)                   # rewritten: the user's files stay
    assert (out / "figures" / "mine.png").read_bytes() == b"x"
    assert (out / "notes.txt").read_text() == "my notes"
    # A figure the user changed is no longer otbench's: the new report does not replace it.
    fig = next((out / "figures").glob("fig1_*.png"))
    fig.write_bytes(b"edited")
    with pytest.raises(ReportError, match="was not written by otbench"):
        write_report(ms, out, results_dir=None)
    assert fig.read_bytes() == b"edited"
    write_report(ms, out, results_dir=None, overwrite=True)   # asked for: replaced
    assert fig.read_bytes() != b"edited" and (out / "notes.txt").read_text() == "my notes"
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    (other / "report.json").write_text("{}")                  # a name alone proves nothing
    with pytest.raises(ReportError, match="otbench did not write it"):
        write_report(ms, other)
    assert (other / "keep.txt").read_text() == "mine"
    with pytest.raises(ReportError, match="refusing to write onto an input"):
        write_report(d, d.parent)                             # a folder holding the input set
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temp left


def test_missing_inputs_become_notes(tmp_path):
    ms = simulate("tiny", 0)
    index = write_report(ms, tmp_path / "r")
    man = json.loads((index.parent / "report.json").read_text())
    assert [f["name"] for f in man["figures"]] == [
        "fig1_overthinking", "fig2_baselines", "fig3_local_changes", "fig4_frontiers",
        "fig8_stp_examples", "fig9_question_trajectories"]
    notes = " ".join(man["notes"])
    # One numbering: the hints name the numbers the files and captions use.
    for what in ("(Tables 9–13)", "(Figure 5)", "(Figure 6)", "(Figure 7)", "(Figure 10)"):
        assert what in notes
    assert "<b>Figure 8.</b>" in index.read_text()        # fig8_stp_examples, numbers kept
    assert "otbench bootstrap DIR --frontiers" in notes and "in-memory set" in notes
    page = index.read_text()
    assert all(html.escape(n) in page for n in man["notes"])


def test_synthetic_sets_are_marked_everywhere_and_real_ones_nowhere(tmp_path, full_report):
    ms = simulate("tiny", 0)
    out = write_report(ms, tmp_path / "syn").parent
    man = json.loads((out / "report.json").read_text())
    assert man["synthetic"] is True
    assert "SYNTHETIC DATA (simulated, not model outputs)" in (out / "index.html").read_text()
    for f in man["figures"]:
        assert f["title"].endswith("[SYNTHETIC DATA]")
    for t in man["tables"]:
        assert (out / t["csv"]).read_text().startswith("# SYNTHETIC DATA")
        tex = (out / t["latex"]).read_text()
        assert "% SYNTHETIC DATA" in tex and "Synthetic data (simulated" in tex
    real, _, _, _ = full_report
    for p, data in files(real).items():
        if p.endswith((".csv", ".tex", ".html")):
            assert b"SYNTHETIC" not in data, p
    assert not any("SYNTHETIC" in f["title"] for f in json.loads((real / "report.json").read_text())["figures"])


# -- inputs and caching ----------------------------------------------------------------------------

def test_cached_metrics_and_frontiers_are_reused_only_when_they_fit(tmp_path):
    ms = simulate("tiny", 0)
    res = tmp_path / "results"
    res.mkdir()
    m, f = metrics(ms), frontiers(ms, grid=11).to_json()
    bound = {"content_hash": content_hash(ms)}      # as otbench writes its results
    (res / CACHE_FILES["metrics"]).write_text(json.dumps({**m, **bound}))
    (res / CACHE_FILES["frontier"]).write_text(json.dumps({**f, **bound}))
    got = gather(ms, results_dir=res, grid=11)
    assert got.metrics == {**m, **bound} and got.frontier == {**f, **bound} and got.notes == ()
    assert {s.kind: (s.origin, s.name) for s in got.sources} == {
        "metrics": ("cached", "metrics.json"), "frontier": ("cached", "frontier.json")}
    # Another grid, and metrics of another set: both recomputed, with a note each.
    (res / "metrics.json").write_text(json.dumps({**metrics(simulate("tiny", 1)), **bound}))
    got = gather(ms, results_dir=res, grid=21)
    assert got.metrics == m and len(got.frontier["grid"]) == 21
    assert {s.kind: s.origin for s in got.sources} == {"metrics": "computed", "frontier": "computed"}
    assert got.notes == (
        "metrics: metrics.json not used (its cells or their question/trajectory counts differ "
        "from the set's); recomputed",
        "frontier: frontier.json not used (its budget grid (11 points) is not the requested one "
        "(21 points)); recomputed")
    # A set whose trajectories changed keeps its cells and counts but not its token totals.
    f2 = json.loads(json.dumps(f))
    f2["strategies"]["fb"]["cells"][0]["total_tokens"] += 1
    assert gather(ms, results_dir=None, grid=11, frontier_doc=f2).notes == (
        "frontier: the given document not used (its fb cells or their token/probe totals differ "
        "from the set's); recomputed",)
    # The whole report reads the cache beside a set directory.
    d = tmp_path / "set"
    save(ms, d)
    (d / "results").mkdir()
    (d / "results" / "frontier.json").write_text(json.dumps({**f, **bound}))
    man = json.loads((write_report(d, tmp_path / "a", grid=11).parent / "report.json").read_text())
    assert {s["kind"]: s["origin"] for s in man["inputs"]} == {"metrics": "computed",
                                                                "frontier": "cached"}


def test_given_documents_that_do_not_fit_raise_and_discovered_ones_are_skipped(tmp_path):
    ms = simulate("tiny", 0)
    m = metrics(ms)
    bad = thinning_doc(m)
    bad["schema"] = "otbench.thinning/0"
    p = tmp_path / "thin.json"
    p.write_text(json.dumps(bad))
    kw = dict(results_dir=None, grid=11, metrics_doc=m)
    with pytest.raises(ReportInputError, match=r"thin\.json: cannot be used for this set: schema is "
                                                r"'otbench\.thinning/0', expected 'otbench\.thinning/1'"):
        gather(ms, thinning=p, **kw)
    wrong_cells = bootstrap_doc(m, frontiers(ms, grid=11).to_json())
    wrong_cells["cells"] = wrong_cells["cells"][1:]
    with pytest.raises(ReportInputError, match="its cells are not the set's cells"):
        gather(ms, bootstrap=wrong_cells, **kw)
    real = thinning_doc(m)
    real["synthetic"] = False                      # the set is synthetic
    with pytest.raises(ReportInputError, match="its synthetic flag differs from the set's"):
        gather(ms, thinning=real, **kw)
    with pytest.raises(ReportInputError, match="schema must be 'otbench.bench/1'"):
        gather(ms, otbench=[{"schema": "nope"}], **kw)
    with pytest.raises(ReportInputError, match="no such thinning result file"):
        gather(ms, thinning=tmp_path / "missing.json", **kw)
    res = tmp_path / "res"
    res.mkdir()
    (res / "thinning.json").write_text(json.dumps(bad))
    (res / "bootstrap.json").write_text("{not json")
    got = gather(ms, **dict(kw, results_dir=res))
    assert got.thinning is None and got.bootstrap is None
    assert any(n.startswith("thinning: thinning.json skipped (schema is") for n in got.notes)
    assert any(n.startswith("ignored bootstrap.json: ") and "not valid JSON" in n for n in got.notes)
    # The same documents, fitting, are used.
    (res / "thinning.json").write_text(json.dumps(thinning_doc(m)))
    assert gather(ms, **dict(kw, results_dir=res)).thinning == thinning_doc(m)


def test_evaluated_split_frontiers_are_rebuilt_only_when_the_cells_match(token_dir):
    _, ms = token_dir
    doc = bench_doc(ms)
    fr, ntraj, notes = evaluated_split_frontiers(ms, [doc])
    test = ms.take(np.flatnonzero(ms.split == 2))
    assert notes == [] and ntraj == {"dee": test.num_trajectories}
    assert fr["dee"]["strategies"]["dee"]["macro"] == \
        frontiers(test, strategies=["dee"], grid=1001).to_json()["strategies"]["dee"]["macro"]
    # Without a stored split, the seeded split recorded by the result is rebuilt.
    unsplit = dataclasses.replace(ms, split=np.full_like(ms.split, -1))
    fr2, _, notes2 = evaluated_split_frontiers(unsplit, [doc])
    assert notes2 == [] and fr2["dee"]["strategies"]["dee"]["macro"] == fr["dee"]["strategies"]["dee"]["macro"]
    # A result whose cells differ from every candidate split: no curve, a note.
    doc["cells"][0]["total_tokens"] += 1
    fr3, _, notes3 = evaluated_split_frontiers(ms, [doc])
    assert fr3 == {"dee": None} and "could not be reconstructed" in notes3[0]


# -- selection rules against plain-Python twins ----------------------------------------------------

def _exact_examples(ms, pt):
    out = []
    groups = [int(ms.cell_group[c]) for c in ms.cell.tolist()]
    for g in sorted(set(groups)):
        rows = [r for r in range(ms.num_trajectories) if groups[r] == g]
        for min_n in (3, 1, 0):
            cand = [r for r in rows if ms.n[r] >= min_n]
            if cand:
                break
        o = [Fraction(float(pt.ratio[r])) for r in cand]
        a = [Fraction(float(pt.degradation[r])) for r in cand]

        def sd(v):
            mu = sum(v) / len(v)
            var = sum((x - mu) ** 2 for x in v) / len(v)
            return mu, (float(var) ** 0.5 or 1.0)

        (mo, so), (ma, sa) = sd(o), sd(a)
        d = [float((x - mo) ** 2) / so ** 2 + float((y - ma) ** 2) / sa ** 2 for x, y in zip(o, a)]
        out.append(cand[d.index(min(d))])
    return out


def _exact_question(ms, pt):
    segs = {}
    for r in range(ms.num_trajectories):
        segs.setdefault((int(ms.cell[r]), int(ms.question[r])), []).append(r)
    vals = []
    for rows in segs.values():                       # insertion order = row order
        if len(rows) >= 2:
            pairs = list(itertools.combinations(rows, 2))
            v = sum(abs(Fraction(float(pt.ratio[a])) - Fraction(float(pt.ratio[b])))
                    for a, b in pairs) / len(pairs)
            vals.append((v, rows))
    if not vals:
        return None
    target = sorted(v for v, _ in vals)[(len(vals) - 1) // 2]
    return next(rows for v, rows in vals if v == target)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_example_choices_match_the_exact_twins(seed):
    ms = simulate("tiny", seed)
    pt = PerTrajectory.of(ms)
    assert example_rows(ms, pt) == _exact_examples(ms, pt)
    assert example_question(ms, pt).tolist() == _exact_question(ms, pt)


def test_example_rules_on_ties_and_single_trajectories():
    _, _, rows = token_set()
    # Identical trajectories everywhere: every distance ties, so the first row wins, and every
    # within-question variation is 0, so the first question with R >= 2 wins.
    L = [np.array([0, 3, 5, 9]) for _ in rows]
    C = [np.array([1, 3, 3, 2]) for _ in rows]
    ms = from_ragged(model=[r["model"] for r in rows], group=[r["group"] for r in rows],
                     question=[r["question"] for r in rows],
                     trajectory=np.array([r["traj"] for r in rows]), probes=np.full(len(rows), 4),
                     L=ragged(L, np.int64), C=ragged(C, np.int64), y=np.zeros(len(rows), np.int64))
    pt = PerTrajectory.of(ms)
    first_of_group = [int(np.flatnonzero(ms.cell_group[ms.cell] == g)[0]) for g in (0, 1)]
    assert example_rows(ms, pt) == first_of_group
    assert example_question(ms, pt).tolist() == [0, 1, 2]
    one = ms.take(np.asarray([0]))
    assert example_question(one, PerTrajectory.of(one)) is None


@settings(max_examples=40)
@given(st.lists(st.floats(-2, 2, allow_nan=False), min_size=2, max_size=12))
def test_pair_mad_equals_the_mean_over_all_pairs(v):
    want = sum(abs(a - b) for a, b in itertools.combinations(v, 2)) / (len(v) * (len(v) - 1) / 2)
    assert pair_mad(np.asarray(v)) == pytest.approx(want, abs=1e-12)   # sums of <= 66 terms <= 4


@settings(max_examples=60)
@given(st.integers(0, 40000))
def test_local_change_edges_rule(max_tokens):
    from otbench.analysis.overthinking._metrics import DEFAULT_BIN_EDGES

    e = local_change_edges(max_tokens)
    if max_tokens >= 16384:
        assert e == tuple(DEFAULT_BIN_EDGES)
        return
    w = e[1] - e[0] if len(e) > 1 else None
    assert e[0] == 0 and len(e) <= 12 and e[-1] <= max_tokens
    assert all(b - a == w for a, b in zip(e, e[1:]))
    if w is not None:
        # The smallest 2048 / 2^j width reaching max_tokens with at most 12 bins: it divides
        # the metrics' 2,048-token bins, so every report bin nests in one of them.
        widths = [2048 >> j for j in range(12)]
        assert w == min(x for x in widths if -(-(max_tokens + 1) // x) <= 12)
        assert 2048 % w == 0 and e[-1] + w > max_tokens
    else:
        assert e == (0,)


# -- step lengths ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["vocab", "vocab+span"])
def test_step_lengths_reproduce_stored_steps_and_the_per_trajectory_segmenter(rule, tmp_path):
    from otbench.analysis.measurement._segment import boundary_mask, segment

    ms, tokens, rows = token_set(rule=rule)
    save(ms, tmp_path / "s", extra_tables={"tokens": tokens})
    sl = step_lengths(tmp_path / "s")
    assert sl.b0 == B0 and sl.bs == step_length_bs(B0) == (4, 8, 16)
    assert sl.trajectories == ms.num_trajectories
    mask = boundary_mask(50, BOUNDARY)
    for model in ("model-a", "model-b"):
        mine = [r for r in rows if r["model"] == model]
        # At the recorded b the realized steps are exactly the stored positions' differences.
        stored = np.sort(np.concatenate([np.diff(r["L"]) for r in mine]))
        assert np.array_equal(np.sort(sl.steps[model][B0]), stored)
        for b in sl.bs:
            twin = np.concatenate([np.diff(segment(r["ids"], mask, b, span=_span(rule)))
                                   for r in mine])
            assert np.array_equal(np.sort(sl.steps[model][b]), np.sort(twin))
    if rule == "vocab+span":     # the span rule changes the segmentation of this data
        _, _, plain = token_set(rule="vocab")
        assert any(not np.array_equal(a["L"], b["L"]) for a, b in zip(rows, plain))


def test_step_lengths_say_why_they_are_missing(tmp_path):
    ms = simulate("tiny", 0)
    save(ms, tmp_path / "s")
    assert "no token ids" in step_lengths(tmp_path / "s")
    ms2, tokens, _ = token_set()
    ms2 = dataclasses.replace(ms2, provenance={})
    save(ms2, tmp_path / "t", extra_tables={"tokens": tokens})
    assert "no step-boundary token ids" in step_lengths(tmp_path / "t")
    assert step_length_bs(None) == (128, 256, 512) and step_length_bs(1) == (1, 2)


# -- tables -----------------------------------------------------------------------------------------

def test_matrix_table_values_layout_and_renderings():
    rows = [dict(model=m, group=g, question="q", traj=0) for m, g in
            (("a_1", "G&1"), ("a_1", "G2"), ("b", "G2"))]          # b has no G&1 cell
    ms = from_ragged(model=[r["model"] for r in rows], group=[r["group"] for r in rows],
                     question=["q"] * 3, trajectory=np.zeros(3, np.int64), probes=np.full(3, 4),
                     L=ragged([[0, 10], [0, 5, 10], [0, 10]], np.int64),
                     C=ragged([[4, 2], [0, 3, 1], [1, 1]], np.int64), y=np.array([1, 0, 1]))
    m = metrics(ms)
    t = matrix_table("t", m, "or", title="OR", caption="c.")
    assert t.header == ("model", "G&1", "G2", "Avg.")
    # OR by hand: (a_1, G&1) has k* = 0, so 100 %; (a_1, G2) k* = 1, (10 - 5) / 10 = 50 %;
    # (b, G2) is flat, k* = 0, 100 %. Avg. column: a_1 (100 + 50) / 2, b 100; Avg. row:
    # G&1 100 (a_1 only), G2 (50 + 100) / 2; macro over models (75 + 100) / 2.
    assert [c.text for c in t.rows[0]] == ["a_1", "100.0", "50.0", "75.0"]
    assert [c.text for c in t.rows[1]] == ["b", "-", "100.0", "100.0"]
    assert [c.text for c in t.rows[2]] == ["Avg.", "100.0", "75.0", "87.5"]
    parsed = list(csv.reader(io.StringIO(to_csv(t, synthetic=False))))
    assert parsed[0] == ["model", "G&1 (%)", "G2 (%)", "Avg. (%)"] and parsed[2] == ["b", "", "100.0000", "100.0000"]
    tex = to_latex(t, synthetic=False)
    assert r"a\_1 & 100.0 & 50.0 & 75.0 \\" in tex and r"G\&1" in tex and "\\midrule\nAvg." in tex
    page = to_html(t)
    # Shading spans the body (50..100): 100.0 is the darkest, 50.0 white.
    assert 'style="background:#6baed6">100.0' in page and 'style="background:#ffffff">50.0' in page
    assert "G&amp;1" in page


def test_interval_tables_follow_the_metrics_layout():
    ms = simulate("tiny", 0)
    m, f = metrics(ms), frontiers(ms, grid=11).to_json()
    b = bootstrap_doc(m, f)
    t = interval_table("t4", b, m, "or", title="x", caption="y")
    first = m["cells"][0]
    assert t.rows[0][1].text == f"[{100 * (first['or'] - 0.03):.1f}, {100 * (first['or'] + 0.03):.1f}]"
    assert t.csv_header[1:3] == (f"{first['group']} lo (%)", f"{first['group']} hi (%)")
    assert len(t.csv_rows[0]) == 1 + 2 * (len(m["by_group"]) + 1)
    point = matrix_table("t1", m, "or", title="x", caption="y", boot=b)
    assert point.rows[-1][-1].sub == t.rows[-1][-1].text      # the macro interval, beside the value


# -- CLI and imports -----------------------------------------------------------------------------------

def test_cli_writes_the_report_and_reports_bad_inputs(tmp_path):
    ms = simulate("tiny", 0)
    d = tmp_path / "set"
    save(ms, d)
    r = CliRunner().invoke(report_cmd, [str(d), "--out", str(tmp_path / "rep"), "--grid", "11"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[-1] == str(tmp_path / "rep" / "index.html")
    assert r.stdout.startswith("SYNTHETIC DATA")
    assert "report: figure fig4_frontiers" in r.stderr and "report: computing metrics" in r.stderr
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x").write_text("x")
    r = CliRunner().invoke(report_cmd, [str(d), "--out", str(tmp_path / "junk")])
    assert r.exit_code == 2 and "exists and otbench did not write it" in r.stderr
    (tmp_path / "b.json").write_text(json.dumps({"schema": "otbench.metrics/1"}))
    r = CliRunner().invoke(report_cmd, [str(d), "--out", str(tmp_path / "r2"),
                                        "--bootstrap", str(tmp_path / "b.json")])
    assert r.exit_code == 2 and "b.json: cannot be used for this set: schema is " \
                                "'otbench.metrics/1', expected 'otbench.bootstrap/1'" in r.stderr
    r = CliRunner().invoke(report_cmd, [str(tmp_path / "nope"), "--out", str(tmp_path / "r3")])
    assert r.exit_code == 2


def test_importing_the_analysis_and_the_command_does_not_load_matplotlib():
    code = ("import sys, otbench.analysis, otbench.analysis.report._write, otbench.cli._report; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_single_trajectory_without_steps(tmp_path):
    # One question, R = 1, n = 0, L(n) = 0: no local changes, no small multiples; the rest draws.
    ms = from_ragged(model=["m"], group=["g"], question=["q"], trajectory=np.array([0]),
                     probes=np.array([4]), L=ragged([[0]], np.int64), C=ragged([[2]], np.int64),
                     y=np.array([1]))
    man = json.loads((write_report(ms, tmp_path / "r").parent / "report.json").read_text())
    assert [f["name"] for f in man["figures"]] == ["fig1_overthinking", "fig2_baselines",
                                                  "fig4_frontiers", "fig8_stp_examples"]
    assert "No local changes: every trajectory has n = 0 steps." in man["notes"]
    assert any(n.startswith("No within-question small multiples (Figure 9)") for n in man["notes"])


def test_every_report_csv_header_names_its_unit(tmp_path):
    """Units in every CSV header; file names, captions and the page share one numbering."""
    from otbench.analysis.report import _numbering as num

    ms = simulate("tiny", 0)
    index = write_report(ms, tmp_path / "r", grid=11)
    labels = {"model", "strategy", "method", "split"}
    for f in sorted((tmp_path / "r" / "tables").glob("*.csv")):
        header = next(csv.reader(ln for ln in f.open() if not ln.startswith("#")))
        bare = [h for h in header if h not in labels and "(" not in h]
        assert not bare, f"{f.name}: columns without a unit {bare}"
    page = index.read_text()
    man = json.loads((tmp_path / "r" / "report.json").read_text())
    for fig in man["figures"]:
        kind, n = num.number_of(fig["name"])
        assert kind == "figure" and f'id="{fig["name"]}"' in page
        assert f'<figure id="{fig["name"]}"><img src="figures/{fig["name"]}.png"' in page
        assert page.split(f'<figure id="{fig["name"]}">', 1)[1].split("<b>", 1)[1].startswith(
            f"Figure {n}.")
    for t in man["tables"]:
        kind, n = num.number_of(t["name"])
        assert kind == "table" and f"<b>Table {n}. " in page
