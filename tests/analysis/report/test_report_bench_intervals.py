"""The report's OTBench table and figure carry the intervals and warning `bench compare` prints
(issue 58): rank, behind-best and own gap-area intervals, equal for tied methods, and the
small-split warning in HTML, LaTeX and CSV."""

import csv
import json

import pytest
from otbench.analysis import simulate
from otbench.analysis.bench import (
    assign_splits,
    evaluate,
    leaderboard,
    leaderboard_block,
    small_split_warning,
)
from otbench.analysis.measurement import content_hash, save
from otbench.analysis.report import write_report


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    ms = assign_splits(simulate("tiny", 0, field_signals=True))
    d = tmp_path_factory.mktemp("set") / "set"
    save(ms, d)
    a = evaluate(ms, "thinkbrake-onectx", theta_grid=5)
    twin = evaluate(ms, "thinkbrake-onectx", theta_grid=5)
    object.__setattr__(twin, "method", "thinkbrake-twin")     # the same stops: a tie
    bf = evaluate(ms, "budget-forcing", theta_grid=5)
    results = [a, twin, bf]
    board = leaderboard(results, ms, replicates=60, seed=5)
    (d / "results").mkdir()
    for r in results:      # as `bench compare` writes them
        doc = {**r.to_json(), "leaderboard": leaderboard_block(board, r.method),
               "content_hash": content_hash(ms)}
        (d / "results" / f"bench-{r.method}.json").write_text(json.dumps(doc))
    out = tmp_path_factory.mktemp("rep") / "report"
    index = write_report(d, out, grid=11)
    return board, results, out, index


def test_table_19_carries_rank_and_behind_best_intervals_in_every_form(compared):
    board, results, out, index = compared
    rows = list(csv.DictReader(ln for ln in (out / "tables" / "table19_otbench.csv").open()
                               if not ln.startswith("#")))
    by = {r["method"]: r for r in rows}
    for b in board.rows:
        got = by[b["method"]]
        assert int(got["rank"]) == b["rank"]
        assert (int(got["rank_lo (95%)"]), int(got["rank_hi (95%)"])) == (b["rank_lo"], b["rank_hi"])
        assert (int(got["net rank_lo (95%)"]), int(got["net rank_hi (95%)"])) == (
            b["net_rank_lo"], b["net_rank_hi"])
        for key, col in (("gap_behind_best", "behind best (pp)"),
                         ("gap_behind_best_lo", "behind best lo (pp)"),
                         ("gap_behind_best_hi", "behind best hi (pp)")):
            assert float(got[col]) == pytest.approx(100 * b[key], abs=1e-4)
        for pre, col in (("", "gap area [0,1]"), ("net_", "net gap area [0,1]")):
            # the method's own gap-area interval, and the measured reason when it is outside
            assert float(got[f"{col} lo (pp)"]) == pytest.approx(100 * b[f"{pre}gap_area_full_lo"], abs=1e-4)
            assert float(got[f"{col} hi (pp)"]) == pytest.approx(100 * b[f"{pre}gap_area_full_hi"], abs=1e-4)
            assert got[f"{col.replace(' [0,1]', '')} outside (text)"] == (b[f"{pre}gap_area_full_outside"] or "")
    # Tied methods: one rank and equal intervals, in the report as on the leaderboard.
    tb, twin = by["thinkbrake-onectx"], by["thinkbrake-twin"]
    assert tb["rank"] == twin["rank"] == "1"
    same = ("rank_lo (95%)", "rank_hi (95%)", "behind best lo (pp)", "gap area [0,1] lo (pp)",
            "gap area [0,1] hi (pp)", "net gap area [0,1] lo (pp)", "net gap area [0,1] hi (pp)")
    assert [tb[k] for k in same] == [twin[k] for k in same]
    tex = (out / "tables" / "table19_otbench.tex").read_text()
    page = index.read_text()
    lo, hi = board.rows[0]["rank_lo"], board.rows[0]["rank_hi"]
    shown = f"{lo}" if lo == hi else f"{lo}–{hi}"
    assert "rank 95\\%" in tex and "rank 95%" in page and f"<td>{shown}</td>" in page
    assert "behind best (pp) [95\\%]" in tex and "60 replicates at seed 5" in page
    assert "gap area [0,1] 95\\% (pp)" in tex and "gap area [0,1] 95% (pp)" in page
    g = board.rows[0]
    assert f"[{100 * g['gap_area_full_lo']:.2f}, {100 * g['gap_area_full_hi']:.2f}]" in page
    assert "oracle frontier re-solved on every replicate" in tex


def test_the_small_split_warning_travels_into_html_latex_and_csv(compared):
    board, results, out, index = compared
    warning = small_split_warning(results[0])
    assert warning is not None and list(board.warnings) == [warning]
    page = index.read_text()
    figure = next(f for f in page.split("<figure")[1:] if "one panel each in the" in f)
    assert f"Warning: {warning}." in figure.split("</figure>")[0]          # the OTBench figure
    assert "Below each panel&#x27;s gap and realized share: its 95% rank interval" in figure
    assert page.count(f"Warning: {warning}.") == 2                   # and Table 19's caption
    tex = (out / "tables" / "table19_otbench.tex").read_text()
    assert "Warning: the test split is too small to rank methods" in tex
    rows = list(csv.DictReader(ln for ln in (out / "tables" / "table19_otbench.csv").open()
                               if not ln.startswith("#")))
    assert {r["warning (text)"] for r in rows} == {warning}


def test_a_result_without_intervals_shows_na(tmp_path):
    ms = assign_splits(simulate("tiny", 1, field_signals=True))
    d = tmp_path / "set"
    save(ms, d)
    (d / "results").mkdir()
    r = evaluate(ms, "thinkbrake-onectx", theta_grid=5)                # `bench run`: no leaderboard
    (d / "results" / "bench-thinkbrake.json").write_text(
        json.dumps({**r.to_json(), "content_hash": content_hash(ms)}))
    write_report(d, tmp_path / "rep", grid=11)
    tex = (tmp_path / "rep" / "tables" / "table19_otbench.tex").read_text()
    assert "Rank, behind-best and gap-area intervals: n/a" in tex
    rows = list(csv.DictReader(ln for ln in (tmp_path / "rep" / "tables" / "table19_otbench.csv").open()
                               if not ln.startswith("#")))
    assert rows[0]["rank_lo (95%)"] == "" and rows[0]["warning (text)"] == small_split_warning(r)
