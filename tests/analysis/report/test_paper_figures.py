"""Figures and tables a paper can use as they are (issue 30).

A real run -- simulated set, split, bootstrap with frontiers, thinning and
every built-in OTBench method -- is reported once; the tests inspect the
written files and the matplotlib objects (never pixel digests): vector
files with embedded fonts, paper-column widths and fonts, legends outside
the data, units on the axes, Fig. 6's step curves against a plain twin,
anchored colour scales, marked intervals, one ranking, the reproduce command.
"""

import dataclasses
import json
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import assign_splits, bootstrap, frontiers, leaderboard_key
from otbench.analysis import simulate, thinning
from otbench.analysis.bench import compare
from otbench.analysis.measurement import save
from otbench.analysis.report import ReportError, write_report
from otbench.analysis.report import _bench_figure as bfig
from otbench.analysis.report import _curves as curves
from otbench.analysis.report import _figures as figs
from otbench.analysis.report import _style as style
from otbench.analysis.report import _tables as tabs
from otbench.analysis.report._bench_section import _ranked
from otbench.analysis.report._write import reproduce_command
from otbench.cli._report import report_cmd


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A synthetic set with every input written as the CLI writes it, and its report."""
    root = tmp_path_factory.mktemp("paper")
    ms = assign_splits(simulate("tiny", 1))
    save(ms, root / "set")
    docs = {"bootstrap": bootstrap(ms, replicates=40, frontiers=True).to_json(),
            "thinning": thinning(ms, probes=[2, 4], trajectories=[2], draws=50),
            "bench": {"schema": "otbench.bench-compare/1",
                      "results": [r.to_json() for r in compare(ms)]}}
    for k, d in docs.items():
        (root / f"{k}.json").write_text(json.dumps(d))
    out = root / "report"
    write_report(root / "set", out, bootstrap=root / "bootstrap.json",
                 thinning=root / "thinning.json", otbench=[root / "bench.json"],
                 formats="png,pdf,svg")
    return SimpleNamespace(root=root, out=out, ms=ms, docs=docs,
                           man=json.loads((out / "report.json").read_text()),
                           page=(out / "index.html").read_text())


def _data(run, kind):
    return json.loads((run.out / "data" / f"{kind}.json").read_text())


def _figures(run):
    """Every figure of the report, drawn again from the report's own data (name, Figure)."""
    m, f, b = _data(run, "metrics"), _data(run, "frontier"), _data(run, "bootstrap")
    bench = _data(run, "otbench")["results"]
    pt = curves.PerTrajectory.of(run.ms)
    rows = curves.example_rows(run.ms, pt)
    q = curves.example_question(run.ms, pt)
    test = run.ms.take(np.flatnonzero(run.ms.split == 2))
    fronts = {s: frontiers(test, strategies=[s], grid=1001).to_json() for s in ("dr", "fb", "dee")}
    edges = figs.local_change_edges(int(run.ms.L[:, -1].max()))
    counts = (np.asarray([5, 0, 3]), np.asarray([1, 0, 2]), np.asarray([4, 0, 1]))[: len(edges)]
    makers = {
        "matrix": lambda: figs.matrix_figure(m, ("or", "ad"), ("OR (%)", "AD (pp)"),
                                             ("OR (%)", "AD (pp)"), (100.0, 100.0), (1, 2),
                                             ("Blues", "Reds"), boot=b,
                                             ranges=((0.0, 100.0), (0.0, None))),
        "local": lambda: figs.local_changes_figure(edges, *[np.resize(c, len(edges))
                                                            for c in counts]),
        "frontiers": lambda: figs.frontier_figure(f),
        "bands": lambda: figs.bands_figure(f, b),
        "otbench": lambda: figs.otbench_figure(bench, fronts),
        "sensitivity": lambda: figs.thinning_figure(_data(run, "thinning"), m),
        "examples": lambda: curves.examples_figure(run.ms, pt, rows),
        "question": lambda: curves.question_figure(run.ms, pt, q),
    }
    with figs.figure_style():
        for name, make in makers.items():
            fig = make()
            fig.draw_without_rendering()
            yield name, fig


# -- files -------------------------------------------------------------------------------------

def test_every_figure_is_written_as_png_pdf_and_svg_with_embedded_fonts(run):
    assert run.man["figures"], "no figures"
    for f in run.man["figures"]:
        assert f["formats"] == ["png", "pdf", "svg"]
        assert f["files"] == [f"figures/{f['name']}.{x}" for x in ("png", "pdf", "svg")]
        pdf = (run.out / f["files"][1]).read_bytes()
        assert pdf.startswith(b"%PDF")
        # TrueType fonts embedded (pdf.fonttype 42), no Type 3 fonts, no creation date.
        assert b"/FontFile2" in pdf and b"/Type3" not in pdf and b"/CreationDate" not in pdf
        # The synthetic mark travels in the vector file's title too.
        assert b"SYNTHETIC DATA" in pdf
        svg = (run.out / f["files"][2]).read_text()
        assert svg.startswith("<?xml") and "<svg" in svg and "<text" not in svg  # text as paths
        assert "SYNTHETIC DATA" in svg                                         # its <title>
        for ref in f["files"]:
            assert f'href="{ref}"' in run.page


def test_vector_files_are_byte_identical_across_runs(run, tmp_path):
    again = tmp_path / "again"
    write_report(run.root / "set", again, bootstrap=run.root / "bootstrap.json",
                 thinning=run.root / "thinning.json", otbench=[run.root / "bench.json"],
                 formats="svg,pdf")
    for f in run.man["figures"]:
        for ext in ("pdf", "svg", "png"):
            a = (again / "figures" / f"{f['name']}.{ext}").read_bytes()
            assert a == (run.out / "figures" / f"{f['name']}.{ext}").read_bytes(), (f, ext)


def test_format_choice_and_bad_formats(run, tmp_path):
    assert style.figure_formats(None) == ("png", "pdf")
    assert style.figure_formats("svg") == ("png", "svg")          # the page needs the PNG
    assert style.figure_formats(["PDF", " png "]) == ("png", "pdf")
    with pytest.raises(ReportError, match="figure format 'tiff' is not one of png, pdf, svg"):
        write_report(run.ms, tmp_path / "x", formats="png,tiff", results_dir=None)
    r = CliRunner().invoke(report_cmd, [str(run.root / "set"), "--out", str(tmp_path / "r"),
                                        "--format", "png", "--grid", "11"])
    assert r.exit_code == 0, r.output
    assert sorted({p.suffix for p in (tmp_path / "r" / "figures").iterdir()}) == [".png"]
    r = CliRunner().invoke(report_cmd, [str(run.root / "set"), "--out", str(tmp_path / "s"),
                                        "--format", "eps"])
    assert r.exit_code == 2 and "figure format 'eps'" in r.stderr


# -- figures as a reviewer reads them ------------------------------------------------------------

def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(0.0, w) * max(0.0, h)


def test_figures_fit_paper_columns_with_legible_fonts_units_and_legends_outside(run):
    from matplotlib.text import Text

    seen = set()
    for name, fig in _figures(run):
        seen.add(name)
        w, _ = fig.get_size_inches()
        assert w <= style.TEXT_IN, (name, w)
        r = fig.canvas.get_renderer()
        for t in fig.findobj(Text):
            if t.get_visible() and t.get_text().strip():
                assert t.get_fontsize() >= style.MIN_FONT_PT, (name, t.get_text())
        heat = [a for a in fig.axes if a.images]
        data_axes = [a for a in fig.axes if a.get_visible() and (a.lines or a.collections)
                     and not heat and a.get_label() != "<colorbar>"]
        legends = [a.get_legend() for a in fig.axes if a.get_legend()] + list(fig.legends)
        if heat:        # heat maps: every value is printed, the colour bar names unit and range
            bars = [a for a in fig.axes if not a.images]
            assert len(bars) == len(heat) and all(", scale " in a.get_ylabel() for a in bars)
            continue
        assert data_axes and legends, name
        for ax in data_axes:
            for label in (ax.get_xlabel(), ax.get_ylabel()):
                if label:       # shared axes label the outer panels only
                    assert re.search(r"\(.+\)", label), (name, label)     # a unit
        for ax in fig.axes:
            for lg in legends:  # no legend over any data area (so over no curve)
                assert _overlap(lg.get_window_extent(r), ax.get_window_extent(r)) < 1.0, name
    assert seen == {"matrix", "local", "frontiers", "bands", "otbench", "sensitivity",
                    "examples", "question"}


def test_colour_scales_are_anchored_and_state_their_range(run):
    fig = dict(_figures(run))["matrix"]
    im_or, im_ad = [a.images[0] for a in fig.axes if a.images]
    assert im_or.norm.vmin == 0.0 and im_or.norm.vmax == 100.0
    assert im_ad.norm.vmin == 0.0 and im_ad.norm.vmax > 0.0
    labels = [a.get_ylabel() for a in fig.axes if not a.images and a.get_ylabel()]
    assert "OR (%), scale 0.0–100.0" in labels
    # HTML heat tables: 45-49 % on a 0-100 scale is pale, not a full ramp.
    t = tabs.Table(name="t", title="x", caption="y", header=("m", "a", "b", "Avg."),
                   rows=((tabs.Cell("r"), tabs.Cell("45", 45.0), tabs.Cell("49", 49.0),
                          tabs.Cell("47", 47.0)),),
                   csv_header=("m", "a", "b", "Avg."), csv_rows=(("r", "45", "49", "47"),),
                   heat=True, heat_range=(0.0, 100.0))
    colours = re.findall(r"background:(#[0-9a-f]{6})", tabs.to_html(t))
    assert colours == [tabs._heat_color(0.45), tabs._heat_color(0.49), tabs._heat_color(0.47)]
    free = tabs.to_html(dataclasses.replace(t, heat_range=(None, None)))
    assert re.findall(r"background:(#[0-9a-f]{6})", free)[:2] == [tabs._heat_color(0.0),
                                                                    tabs._heat_color(1.0)]


# -- Fig. 6: the step curves the summary integrates ------------------------------------------------

def _twin_curve(doc, zero):
    """Plain Python: the chained per-cell step curves at every breakpoint (None if undefined)."""
    cells = []
    for c in doc["cells"]:
        on = [(p["rel_cost"], p["acc"]) for p in c["points"] if p["nondominated"]]
        if not on:
            return None
        a0 = next((a for x, a in on if x == 0.0), zero.get((c["model"], c["group"])))
        if min(x for x, _ in on) > 0 and a0 is None:
            return None
        cells.append((c["model"], on, a0))
    xs = sorted({0.0, 1.0} | {x for _, on, _ in cells for x, _ in on if 0 <= x <= 1})

    def at(on, a0, x):
        reach = [a for c, a in on if c <= x]
        return max(reach) if reach else a0

    models = sorted({m for m, _, _ in cells})
    ys = []
    for x in xs:
        per = [sum(at(on, a0, x) for mm, on, a0 in cells if mm == m)
               / sum(1 for mm, _, _ in cells if mm == m) for m in models]
        ys.append(sum(per) / len(per))
    return xs, ys


@st.composite
def _bench_docs(draw):
    models = draw(st.lists(st.sampled_from(["m1", "m2", "m3"]), min_size=1, max_size=3,
                           unique=True))
    cells = []
    for m in models:
        for g in draw(st.lists(st.sampled_from(["g1", "g2"]), min_size=1, max_size=2,
                               unique=True)):
            n = draw(st.integers(1, 5))
            xs = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.5, 0.75, 1.0]), min_size=n,
                               max_size=n))
            pts = [{"rel_cost": x, "acc": draw(st.sampled_from([0.0, 0.2, 0.2, 0.5, 1.0])),
                    "nondominated": draw(st.booleans()) or i == 0} for i, x in enumerate(xs)]
            cells.append({"model": m, "group": g, "points": pts})
    return {"strategy": "dee", "cells": cells}


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(_bench_docs(), st.booleans())
def test_fig6_step_curve_is_the_chain_of_the_cell_curves(doc, with_zero):
    front = {"strategies": {"dee": {"cells": [{"model": c["model"], "group": c["group"],
                                                "acc": [0.1, 0.9]} for c in doc["cells"]]}}}
    got = bfig.macro_step_curve(doc, front if with_zero else None)
    want = _twin_curve(doc, {(c["model"], c["group"]): 0.1 for c in doc["cells"]}
                       if with_zero else {})
    if want is None:
        assert got is None
        return
    assert got is not None
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)


def test_fig6_draws_step_curves_with_the_scored_numbers(run):
    fig = dict(_figures(run))["otbench"]
    bench = _data(run, "otbench")["results"]
    test = run.ms.take(np.flatnonzero(run.ms.split == 2))
    fronts = {s: frontiers(test, strategies=[s], grid=1001).to_json() for s in ("dr", "fb", "dee")}
    for d in bench:         # one panel per method, titled with its name and strategy
        ax, = [a for a in fig.axes
               if a.get_title().split("\n")[0] == f"{d['method']} ({d['strategy'].upper()})"]
        line = next(ln for ln in ax.lines if ln.get_label() == f"{d['method']} step curve")
        assert line.get_drawstyle() == "steps-post"
        x, y = bfig.macro_step_curve(d, fronts[d["strategy"]])
        np.testing.assert_allclose(line.get_xdata(), 100.0 * x)
        np.testing.assert_allclose(line.get_ydata(), 100.0 * y)
        # It starts at the zero-thinking accuracy (every cell's A0, chained).
        assert abs(y[0] - d["reference"]["a_zero"]) < 1e-9
        s = d["summary"]
        share = "n/a" if s["realized_share"] is None else f"{100 * s['realized_share']:.1f}%"
        assert ax.get_title().split("\n")[1] == \
            f"gap {100 * s['gap_area_full']:.2f} pp, realized {share}"
    cap = next(f["caption"] for f in run.man["figures"] if f["name"] == "fig6_otbench")
    assert "realizes little even when its macro points" in cap and "gap area" in cap


def _crowded(bench, strategy="dee", copies=7):
    """`bench` with `copies` more methods of one strategy (the field's DEE methods, renamed)."""
    base = next(d for d in bench if d["strategy"] == strategy)
    names = ("dynasor-cot", "dynasor-cot-stp", "deer", "deer-stp", "answer-consistency",
             "deepconf-exit", "patient-brake", "x-8", "x-9")[:copies]
    return list(bench) + [dict(json.loads(json.dumps(base)), method=n) for n in names]


def test_fig6_is_one_readable_column_however_many_methods(run):
    """Fig. 6 with 11 methods (8 DEE) fits one column: a panel per method with its own single
    gap band, one legend below the panels that does not grow with the methods, nothing over
    any data area, no title over another panel."""
    from matplotlib.collections import PolyCollection

    bench = _data(run, "otbench")["results"]
    test = run.ms.take(np.flatnonzero(run.ms.split == 2))
    fronts = {s: frontiers(test, strategies=[s], grid=1001).to_json() for s in ("dr", "fb", "dee")}
    entries = []
    for docs in (bench, _crowded(bench)):
        with figs.figure_style():
            fig = figs.otbench_figure(docs, fronts)
            fig.draw_without_rendering()
            r = fig.canvas.get_renderer()
        w, _ = fig.get_size_inches()
        assert w <= style.COLUMN_IN, w                 # one column of a two-column paper
        assert len(fig.axes) == len(docs)              # a panel per method, every method shown
        titles = sorted(a.get_title().split("\n")[0] for a in fig.axes)
        assert titles == sorted(f"{d['method']} ({d['strategy'].upper()})" for d in docs)
        assert not any(a.get_legend() for a in fig.axes) and len(fig.legends) == 1
        legend = fig.legends[0]
        entries.append([t.get_text() for t in legend.get_texts()])
        box, page = legend.get_window_extent(r), fig.bbox
        assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0, box
        for ax in fig.axes:
            # The legend lies over no data area (no curve, no point).
            assert _overlap(box, ax.get_window_extent(r)) < 1.0, ax.get_title()
            # One translucent band per panel: the method's own gap, never stacked on another.
            bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
            assert len(bands) == 1 and 0 < bands[0].get_alpha() < 1
            t = ax.title.get_window_extent(r)
            for other in fig.axes:
                if other is not ax:
                    assert _overlap(t, other.get_window_extent(r)) < 1.0
                    assert _overlap(t, other.title.get_window_extent(r)) < 1.0
            for lab in ax.get_xticklabels() + [ax.xaxis.label]:
                if lab.get_visible() and lab.get_text():
                    assert _overlap(lab.get_window_extent(r), box) < 1.0
    # The legend explains the marks, not the methods: 4 or 11 methods, the same entries.
    assert entries[0] == entries[1] and len(entries[1]) <= 10
    assert "DEE oracle frontier" in entries[1] and "gap area (shaded)" in entries[1]


# -- numbers that agree ------------------------------------------------------------------------------

def test_every_shown_interval_contains_its_estimate_or_is_marked():
    m = {"by_model": {"a": {"pairwise_or": 0.3}}, "by_group": {"g": {"pairwise_or": 0.3}},
         "macro": {"pairwise_or": 0.3},
         "cells": [{"model": "a", "group": "g", "pairwise_or": 0.278}]}
    b = {"cells": [{"model": "a", "group": "g", "pairwise_or": [0.226, 0.2595]}],
         "by_model": {"a": {"pairwise_or": [0.2, 0.4]}}, "macro": {"pairwise_or": [0.2, 0.4]}}
    t = tabs.interval_table("x", b, m, "pairwise_or", title="t", caption="c.")
    assert t.rows[0][1].text == "[22.60, 25.95] †" and t.rows[0][2].text == "[20.00, 40.00]"
    assert t.caption == f"c; {tabs.EXCLUDES_NOTE}."
    assert "\\textdagger{}" in tabs.to_latex(t, synthetic=False)
    p = tabs.matrix_table("y", m, "pairwise_or", title="t", caption="c.", boot=b)
    assert p.rows[0][1].sub.endswith("†") and tabs.EXCLUDES_NOTE in p.caption
    clean = tabs.interval_table("z", {"cells": [{"model": "a", "group": "g",
                                                 "pairwise_or": [0.2, 0.3]}]}, m, "pairwise_or",
                                title="t", caption="c.")
    assert "†" not in clean.caption and all("†" not in c.text for r in clean.rows for c in r)
    for iv, est, out in (([0.1, 0.2], 0.2, False), ([0.1, 0.2], 0.21, True), ([0.1, None], 5, False),
                         (None, 1.0, False), ([0.1, 0.2], None, False), ([0.3, 0.4], 0.1, True)):
        assert tabs.excludes(iv, est) is out


def test_report_page_marks_what_excludes_its_estimate(run):
    """In the report of the real run, every "[lo, hi]" shown either holds its value or is marked."""
    b, m = _data(run, "bootstrap"), _data(run, "metrics")
    for key in ("pairwise_or", "pairwise_ad", "or", "ad"):
        for c, bc in zip(m["cells"], b["cells"]):
            iv, est = bc.get(key), c.get(key)
            text = tabs.fmt_interval(iv, 100.0, 2, est)
            assert text.endswith("†") == tabs.excludes(iv, est)
    if "†" in run.page:
        assert tabs.EXCLUDES_NOTE.split(":")[0] in run.page


def test_local_change_bins_nest_in_the_metrics_bins(run):
    cap = next(f["caption"] for f in run.man["figures"] if f["name"] == "fig3_local_changes")
    assert "bins" in cap and "metrics.json" in cap
    edges = figs.local_change_edges(int(run.ms.L[:, -1].max()))
    assert 2048 % (edges[1] - edges[0]) == 0


def test_otbench_table_is_ranked_by_the_leaderboard_key(run):
    bench = _data(run, "otbench")["results"]
    swapped = [dict(d, method=f"z-{d['method']}") if i == 0 else d for i, d in enumerate(bench)]
    twin = [dict(d, method="a-copy", summary=dict(d["summary"],
                                                  gap_area_full=d["summary"]["gap_area_full"] + 1))
            for d in swapped]
    ranked = _ranked(swapped + twin)
    for s in {d["strategy"] for d in bench}:
        mine = [(r, d) for r, d in ranked if d["strategy"] == s]
        assert [r for r, _ in mine] == list(range(1, len(mine) + 1))
        keys = [leaderboard_key(SimpleNamespace(summary=d["summary"], method=d["method"]))
                for _, d in mine]
        assert keys == sorted(keys) and mine[-1][1]["method"] == "a-copy"   # not alphabetical
    assert [d["strategy"] for _, d in ranked] == sorted((d["strategy"] for _, d in ranked),
                                                        key=("dr", "fb", "dee").index)
    csv = (run.out / "tables" / "table19_otbench.csv").read_text().splitlines()
    head = [ln for ln in csv if not ln.startswith("#")]
    assert head[0].startswith("rank,method,strategy")
    assert "Ranked within each strategy by gap area" in run.page


def test_report_tables_fit_a_page_and_typeset_their_symbols(run):
    """Every printed table is at most seven columns (Table 19's eighteen, with the leaderboard's
    interval columns, are four parts that each keep rank and method); symbols are LaTeX math,
    never "$\\beta$\\_match"."""
    parts = {t["name"]: t["parts"] for t in run.man["tables"]}
    assert parts["table19_otbench"] == 4 and set(parts.values()) <= {1, 2, 3, 4}
    for tex in sorted((run.out / "tables").glob("*.tex")):
        text = tex.read_text()
        aligns = re.findall(r"\\begin\{tabular\}\{([lr]+)\}", text)
        assert aligns and all(len(a) <= tabs.MAX_COLUMNS for a in aligns), tex.name
        assert len(aligns) == parts[tex.stem], tex.name
        assert r"$\_" not in text and "$$" not in text, tex.name
        for line in text.splitlines():     # math opens and closes on every line
            assert len(re.findall(r"(?<!\\)\$", line)) % 2 == 0, (tex.name, line)
    t19 = (run.out / "tables" / "table19_otbench.tex").read_text()
    heads = re.findall(r"^(rank & method & .*) \\\\$", t19, flags=re.M)
    assert len(heads) == 4 and "gap area (pp)" in heads[0] and "net realized" in heads[1]
    assert "gap area [0,1] (pp)" in heads[1]
    assert r"rank 95\%" in heads[2] and r"behind best (pp) [95\%]" in heads[2]
    assert r"gap area [0,1] 95\% (pp)" in heads[3] and r"net gap area [0,1] 95\% (pp)" in heads[3]
    assert r"\caption{OTBench summary (part 4 of 4)." in t19
    for i in (1, 2, 3, 4):
        assert f"<b>Table 19 (part {i} of 4). OTBench summary.</b>" in run.page
    t18 = (run.out / "tables" / "table18_frontiers.tex").read_text()
    assert r"$\beta_{\text{match}}$ (\%)" in t18 and r"$\beta_{\text{sat}}$" in t18
    assert r"$F_C(\beta)$ $\geq$ $A_{\text{full}}$" in t18 and r"\usepackage{amsmath}" in t18
    assert r"$\beta$\_" not in t18 and r"F\_C" not in t18


# -- the footer ---------------------------------------------------------------------------------------

def test_footer_gives_the_exact_reproduce_command(run, tmp_path):
    cmd = run.man["reproduce"]
    assert shlex.split(cmd) == [
        "otbench", "report", str(run.root / "set"), "--out", str(run.out),
        "--bootstrap", str(run.root / "bootstrap.json"), "--thinning",
        str(run.root / "thinning.json"), "--otbench", str(run.root / "bench.json"),
        "--format", "png,pdf,svg"]
    assert "DIR --out REPORT_DIR" not in run.page and shlex.quote(str(run.out)) in run.page
    # Running it gives the same tables (the report is a function of its command).
    args = shlex.split(cmd)[2:]
    args[args.index("--out") + 1] = str(tmp_path / "again")
    r = CliRunner().invoke(report_cmd, args)
    assert r.exit_code == 0, r.output
    for t in (run.out / "tables").iterdir():
        assert (tmp_path / "again" / "tables" / t.name).read_bytes() == t.read_bytes()
    odd = Path("my set")
    assert reproduce_command(odd, "out", grid=11, results_dir="cache", formats=("png",)) == \
        "otbench report 'my set' --out out --results cache --grid 11 --format png"
    assert reproduce_command(None, "o", bootstrap={"schema": "x"}, results_dir=None).startswith(
        "otbench report SET_DIR --out o (the set was given in memory")


def test_heat_map_intervals_without_their_estimate_are_marked():
    from matplotlib.text import Text
    from otbench.analysis.report._sections import _excluded

    m = {"by_model": {"a": {"or": 0.5}}, "by_group": {"g": {"or": 0.5}}, "macro": {"or": 0.5},
         "cells": [{"model": "a", "group": "g", "or": 0.5}]}
    b = {"cells": [{"model": "a", "group": "g", "or": [0.6, 0.7]}], "macro": {"or": [0.4, 0.6]}}
    with figs.figure_style():
        fig = figs.matrix_figure(m, ("or",), ("OR",), ("OR (%)",), (100.0,), (1,), ("Blues",),
                                 boot=b, ranges=((0.0, 100.0),))
    texts = [t.get_text() for t in fig.findobj(Text)]
    assert "[60.0, 70.0] †" in texts and "[40.0, 60.0]" in texts
    assert _excluded(m, b, ("or",)) and not _excluded(m, {"cells": [], "macro": b["macro"]},
                                                         ("or",))
