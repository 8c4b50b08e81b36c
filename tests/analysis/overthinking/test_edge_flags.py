"""Edge cases flagged where printed (docs/rules.md): OR at 0 % accuracy, Spearman over < 5 cells."""

import warnings

import numpy as np
from _sets import build_set
from otbench.analysis import format_metrics, metrics, simulate
from otbench.analysis.overthinking import (
    ZERO_ACCURACY_MARK,
    ZERO_ACCURACY_NOTE,
    spearman_note,
    zero_accuracy_places,
)
from otbench.analysis.report import _tables as tabs
from otbench.analysis.resampling import bootstrap, format_bootstrap


def two_cells():
    """Model `a` never answers correctly (every probe wrong at every step); model `b` does."""
    trajs = []
    for q in range(3):
        for s in range(2):
            trajs.append(("a", "g", f"q{q}", s, 4, [0, 10, 20 + s], [0, 0, 0], 0))
            trajs.append(("b", "g", f"q{q}", s, 4, [0, 10, 25 + s], [1, 3, 2 + s], 1))
    return build_set(trajs)


def _or_row(text, model):
    block = text.split("Overthinking Ratio OR (%)")[1].split("\n\n")[0]
    return next(line for line in block.splitlines() if line.startswith(model))


def test_or_at_zero_accuracy_is_flagged_in_the_metrics_text():
    m = metrics(two_cells())
    a = next(c for c in m["cells"] if c["model"] == "a")
    assert a["or"] == 1.0 and a["endpoint_acc"] == 0.0 and a["ad"] == 0.0     # the vacuous 100 %
    assert zero_accuracy_places(m["cells"]) == {("cell", "a", "g"), ("model", "a", None),
                                                ("group", None, "g"), ("macro", None, None)}
    text = format_metrics(m)
    assert _or_row(text, "a").split()[1:] == [f"100.0{ZERO_ACCURACY_MARK}"] * 2
    assert ZERO_ACCURACY_MARK not in _or_row(text, "b")
    assert ZERO_ACCURACY_NOTE in text
    # Only OR is flagged: AD's matrix carries no mark.
    assert text.count(ZERO_ACCURACY_MARK) == 5                # a's cell and Avg., g, macro, note
    # Two cells: the correlation is printed with its count and the warning.
    assert "(2 cells: fewer than 5, a rank correlation over so few cells is not informative" in text


def test_or_at_zero_accuracy_and_few_cells_in_the_bootstrap_text_and_report():
    ms = two_cells()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = format_bootstrap(bootstrap(ms, replicates=20, batch=20))
    assert ZERO_ACCURACY_NOTE in text and f"{ZERO_ACCURACY_MARK}" in _or_row(text, "a")
    assert ZERO_ACCURACY_MARK not in _or_row(text, "b")
    assert "(2 cells: fewer than 5" in text
    m = metrics(ms)
    t = tabs.matrix_table("table1_or", m, "or", title="OR", caption="OR.")
    shown = [c.text for r in t.rows for c in r]
    assert shown.count(f"100.0{ZERO_ACCURACY_MARK}") == 2                   # a's cell and Avg.
    assert sum(x.endswith(ZERO_ACCURACY_MARK) for x in shown) == 4         # with g's and the macro
    assert ZERO_ACCURACY_NOTE in t.caption
    assert r"\textdaggerdbl{}" in tabs.to_latex(t, synthetic=False)
    ad = tabs.matrix_table("table3_ad", m, "ad", title="AD", caption="AD.")
    assert not any(ZERO_ACCURACY_MARK in c.text for r in ad.rows for c in r)
    assert ZERO_ACCURACY_NOTE not in ad.caption


def test_no_flag_on_an_ordinary_set():
    m = metrics(simulate("small", seed=0))
    assert not zero_accuracy_places(m["cells"])
    assert ZERO_ACCURACY_MARK not in format_metrics(m)
    n = len(m["cells"])
    assert spearman_note(n) == f" ({n} cells)" and n >= 5
    assert all("fewer than" in spearman_note(k) for k in range(5))
    assert np.isfinite(m["spearman_or_ad"])


def test_or_at_zero_accuracy_is_marked_in_the_heat_map():
    from otbench.analysis.report import _figures as figs

    m = metrics(two_cells())
    fig = figs.matrix_figure(m, ["or", "ad"], ["OR (%)", "AD (pp)"], ["%", "pp"], [100.0, 100.0],
                             [1, 2], ["viridis", "viridis"])
    or_ax, ad_ax = (next(a for a in fig.axes if a.get_title().startswith(t)) for t in ("OR", "AD"))
    assert len(ad_ax.texts) == len(or_ax.texts) == 6          # rows a, b, Avg. x columns g, Avg.
    marked = sorted(t.get_text() for t in or_ax.texts if t.get_text().endswith(ZERO_ACCURACY_MARK))
    assert len(marked) == 4 and marked.count(f"100.0{ZERO_ACCURACY_MARK}") == 2
    assert not any(ZERO_ACCURACY_MARK in t.get_text() for t in ad_ax.texts)
