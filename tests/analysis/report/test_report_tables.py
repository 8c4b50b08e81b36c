"""Tables a page can hold (issue 40): wide tables printed in parts, symbols as LaTeX math."""

import re

import pytest
from otbench.analysis.report import _tables as tabs
from otbench.analysis.report._html import Section, render


def _wide(ncols: int = 12, keys: int = 2) -> tabs.Table:
    header = ["rank", "method", "strategy"][:keys] + [f"c{j} (pp)" for j in range(ncols - keys)]
    rows = [[(str(i), str(i)), (f"m_{i}", f"m_{i}"), ("DEE", "dee")][:keys]
            + [(f"{i}.{j}", f"{i}.{j}") for j in range(ncols - keys)] for i in range(3)]
    return tabs.simple_table("table19_otbench", title="OTBench summary", caption="What it shows.",
                             header=header, rows=rows, key_columns=keys)


def _tabulars(tex: str) -> list[str]:
    return re.findall(r"\\begin\{tabular\}\{([lr]+)\}", tex)


@pytest.mark.parametrize("ncols,keys,sizes", [(12, 2, [7, 7]), (12, 3, [6, 6, 6]), (8, 1, [5, 4]),
                                              (15, 1, [6, 6, 5]), (7, 2, [7])])
def test_a_wide_table_is_printed_in_parts_that_keep_its_identifying_columns(ncols, keys, sizes):
    t = _wide(ncols, keys)
    ps = tabs.parts(t)
    assert [len(p.header) for p in ps] == sizes and all(len(p.header) <= tabs.MAX_COLUMNS
                                                        for p in ps)
    for i, p in enumerate(ps, start=1):
        assert p.header[:keys] == t.header[:keys]                       # identifying columns
        assert [r[:keys] for r in p.rows] == [r[:keys] for r in t.rows]  # every row, in order
        assert p.part == (None if len(ps) == 1 else (i, len(ps)))
    # The other columns, each in exactly one part, in their order.
    assert [h for p in ps for h in p.header[keys:]] == list(t.header[keys:])
    assert [c for p in ps for c in p.rows[1][keys:]] == list(t.rows[1][keys:])

    tex = tabs.to_latex(t, synthetic=False)
    assert [len(a) for a in _tabulars(tex)] == sizes
    assert all(a.startswith("l" * keys) for a in _tabulars(tex))
    if len(ps) == 1:
        assert "part" not in tex and tex.count(r"\begin{table}") == 1
        return
    n = len(ps)
    caps = re.findall(r"\\caption\{(.*)\}", tex)
    assert caps[0] == f"OTBench summary (part 1 of {n}). What it shows."
    for i, cap in enumerate(caps[1:], start=2):
        assert cap.startswith(f"OTBench summary (part {i} of {n}). The rows of part 1 "
                              r"(Table~\ref{tab:otbench-table19-otbench})")
    assert re.findall(r"\\label\{(.*)\}", tex) == ["tab:otbench-table19-otbench"] + [
        f"tab:otbench-table19-otbench-part{i}" for i in range(2, n + 1)]
    # The CSV (the machine form) is never split.
    assert tabs.to_csv(t, synthetic=False).splitlines()[0].count(",") == ncols - 1

    sec = Section("s", "S")
    sec.table(t)
    page = render(title="r", synthetic=False, meta=[], sections=[sec], footer={})
    assert re.findall(r"<b>Table 19 \(part (\d) of (\d)\)\. OTBench summary\.</b>", page) == [
        (str(i), str(n)) for i in range(1, n + 1)]
    heads = re.findall(r"<thead><tr>(.*?)</tr></thead>", page)
    assert [h.count("<th>") for h in heads] == sizes
    assert page.count('href="tables/table19_otbench.tex"') == 1


def _metrics(groups: int) -> dict:
    gs = [f"g{j}" for j in range(groups)]
    cells = [{"model": m, "group": g, "or": (i + 2 * j) / 20} for i, m in enumerate("ab")
             for j, g in enumerate(gs)]
    return {"by_model": {"a": {"or": 0.3}, "b": {"or": 0.4}},
            "by_group": {g: {"or": 0.1 * j} for j, g in enumerate(gs)},
            "macro": {"or": 0.35}, "cells": cells}


def test_a_split_heat_table_keeps_one_scale_and_its_avg_column():
    t = tabs.matrix_table("table1_or", _metrics(7), "or", title="OR", caption="c.")
    whole = tabs.to_html(t)
    ps = tabs.parts(t)
    assert [p.header for p in ps] == [("model", "g0", "g1", "g2", "g3"),
                                      ("model", "g4", "g5", "g6", "Avg.")]
    html = [tabs.to_html(p) for p in ps]
    colour = re.compile(r"<td[^>]*background:(#[0-9a-f]{6})\">([^<]*)<")
    # Every cell has the colour it has in the whole table (one scale across the parts).
    shade = dict((text, c) for c, text in colour.findall(whole))
    assert all(shade[text] == c for h in html for c, text in colour.findall(h))
    assert len([1 for h in html for _ in colour.findall(h)]) == len(colour.findall(whole))
    # The Avg. column (bold, left out of the scale) is the last part's last column only.
    assert 'td class="avg"' not in html[0] and html[1].count('td class="avg"') == 3
    assert 'id="table1_or"' in html[0] and 'id="table1_or-part2"' in html[1]


def test_a_table_with_too_many_identifying_columns_is_refused():
    with pytest.raises(AssertionError, match="identifying columns"):
        tabs.parts(_wide(12, 2), max_columns=2)


def test_symbols_are_typeset_as_latex_math():
    e = tabs.latex_escape
    assert e("β_match (%)") == r"$\beta_{\text{match}}$ (\%)"
    assert e("β_sat = min β with F_C(β) = F_C(1)") == \
        r"$\beta_{\text{sat}}$ = min $\beta$ with $F_C(\beta)$ = $F_C(1)$"
    assert e("F_C(β) ≥ A_full") == r"$F_C(\beta)$ $\geq$ $A_{\text{full}}$"
    assert e("A0 and A0_g; q_true < tail; X − Y at B = H_X") == \
        r"$A_0$ and $A_{0,g}$; $q_{\text{true}}$ < tail; X $-$ Y at B = $H_X$"
    # Adjacent math is one formula, never "$$" (display math).
    assert e("mean pairwise |ΔOR| (pp)") == r"mean pairwise $|\Delta\mathrm{OR}|$ (pp)"
    assert e("ΔP(k) > 0, |x|") == r"$\Delta P(k)$ > 0, $|$x$|$"
    assert e("β≥A_full, |Δ|") == r"$\beta \geq A_{\text{full}}$, $| \Delta |$"
    # Names that are not symbols stay text with escaped underscores; a literal $ stays escaped.
    assert e("deepconf_min_conf a_1 A0B") == r"deepconf\_min\_conf a\_1 A0B"
    assert e("$5 β") == r"\$5 $\beta$"


def test_latex_tables_say_what_they_need():
    t = tabs.simple_table("table18_frontiers", title="F", caption="β_match = min β.",
                          header=["strategy", "β_match (%)"], rows=[[("DR", "dr"), ("1", "1")]])
    tex = tabs.to_latex(t, synthetic=False)
    assert tex.startswith(r"% otbench report table table18_frontiers; needs \usepackage{booktabs}"
                          r" and \usepackage{amsmath}")
    assert r"\caption{$\beta_{\text{match}}$ = min $\beta$.}" in tex
    assert r"strategy & $\beta_{\text{match}}$ (\%) \\" in tex and r"$\beta$\_" not in tex
    plain = tabs.to_latex(_wide(4), synthetic=False)
    assert plain.splitlines()[0].endswith(r"needs \usepackage{booktabs}")
