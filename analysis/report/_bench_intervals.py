"""The leaderboard's intervals and small-split warning in the report's OTBench table and figure.

`otbench bench compare` prints, per method, the 95 % rank interval within
its strategy, the paired interval of its gap area behind the strategy's best
method, the interval of its own gap area over [0, 1] (gross and net; an
estimate outside it marked with the measured reason), and a warning when the evaluated split is too small
to rank. It writes the same numbers into each method's result
(``leaderboard``, `otbench.analysis.bench.leaderboard_block`); the report
shows them beside the point values, so a table a paper prints carries the
uncertainty the terminal showed. The warning is recomputed from the result's
own cells (`small_split_warning`), so a result of `bench run` carries it too.
"""

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from . import _tables as tabs

IV_HEADER = ["rank 95%", "behind best (pp) [95%]", "net rank 95%", "net behind best (pp) [95%]",
             "gap area [0,1] 95% (pp)", "net gap area [0,1] 95% (pp)"]
"""Display columns the leaderboard's intervals add to the OTBench table."""
CSV_HEADER = ["rank", "method", "strategy", "split", "curve/points (count)", "gap area (pp)",
              "gap area [0,1] (pp)", "realized (%)", "net gap area [0,1] (pp)",
              "net realized (%)", "no thinking (%)", "full thinking (%)",
              "rank_lo (95%)", "rank_hi (95%)", "behind best (pp)", "behind best lo (pp)",
              "behind best hi (pp)", "net rank_lo (95%)", "net rank_hi (95%)",
              "net behind best (pp)", "net behind best lo (pp)", "net behind best hi (pp)",
              "gap area [0,1] lo (pp)", "gap area [0,1] hi (pp)", "gap area outside (text)",
              "net gap area [0,1] lo (pp)", "net gap area [0,1] hi (pp)",
              "net gap area outside (text)", "warning (text)"]
"""The OTBench table's CSV columns: every interval end in its own column, the measured reason
of a gap area outside its own interval (empty inside), and the warning."""


def _block(d: Mapping[str, Any]) -> Mapping[str, Any]:
    b = d.get("leaderboard")
    return b if isinstance(b, Mapping) else {}


def rank_text(d: Mapping[str, Any], pre: str = "") -> str:
    """``lo–hi`` (or one rank) of the result's rank interval; `tabs.MISSING` without one."""
    b = _block(d)
    lo, hi = b.get(f"{pre}rank_lo"), b.get(f"{pre}rank_hi")
    if lo is None or hi is None:
        return tabs.MISSING
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def behind_text(d: Mapping[str, Any], pre: str = "") -> str:
    """``v [lo, hi]`` of the gap behind the best (pp); `tabs.MISSING` without it."""
    b = _block(d)
    v = b.get(f"{pre}gap_behind_best")
    if v is None:
        return tabs.MISSING
    iv = (b.get(f"{pre}gap_behind_best_lo"), b.get(f"{pre}gap_behind_best_hi"))
    return f"{100 * v:.2f}" + ("" if iv[0] is None else f" {tabs.fmt_interval(iv, 100.0, 2)}")


def gap_text(d: Mapping[str, Any], pre: str = "") -> str:
    """``[lo, hi]`` of the result's own gap area over [0, 1] (pp), `tabs.EXCLUDES` when its
    estimate lies outside; `tabs.MISSING` without it."""
    b = _block(d)
    iv = (b.get(f"{pre}gap_area_full_lo"), b.get(f"{pre}gap_area_full_hi"))
    if iv[0] is None or iv[1] is None:
        return tabs.MISSING
    return tabs.fmt_interval(iv, 100.0, 2) + (f" {tabs.EXCLUDES}" if b.get(f"{pre}gap_area_full_outside") else "")


def outside_text(bench: Sequence[Mapping[str, Any]]) -> str:
    """The measured reasons of the gap areas outside their own intervals (caption text; empty without)."""
    found = [f"{d['method']} ({'net' if pre else 'gross'}): {_block(d)[f'{pre}gap_area_full_outside']}"
             for d in bench for pre in ("", "net_") if _block(d).get(f"{pre}gap_area_full_outside")]
    return (f" {tabs.EXCLUDES} the gap area lies outside its own interval, measured: "
            + "; ".join(found) + ".") if found else ""


def warning(d: Mapping[str, Any]) -> str | None:
    """The small-split warning of one result, from its own cells (as `bench compare` prints it)."""
    from otbench.analysis.bench import small_split_warning

    cells = tuple(SimpleNamespace(model=c.get("model"), group=c.get("group"),
                                  questions=int(c["questions"]))
                  for c in d.get("cells", []) if isinstance(c.get("questions"), int))
    if not cells:
        return None
    return small_split_warning(SimpleNamespace(cells=cells, split=d.get("split", "test")))


def interval_cells(d: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """The six interval cells of one table row: (display, CSV columns); the warning ends the CSV row."""
    b = _block(d)

    def num(key, scale=1.0):
        v = b.get(key)
        return "" if v is None else (str(v) if scale == 1.0 else tabs.csv_num(v, scale))

    out = []
    for pre in ("", "net_"):
        out.append((rank_text(d, pre), (num(f"{pre}rank_lo"), num(f"{pre}rank_hi"))))
        out.append((behind_text(d, pre), tuple(num(f"{pre}gap_behind_best{e}", 100.0)
                                               for e in ("", "_lo", "_hi"))))
    for pre in ("", "net_"):
        out.append((gap_text(d, pre), (num(f"{pre}gap_area_full_lo", 100.0),
                                       num(f"{pre}gap_area_full_hi", 100.0),
                                       b.get(f"{pre}gap_area_full_outside") or "")))
    text, cols = out[-1]
    out[-1] = (text, cols + (warning(d) or "",))
    return out


def warnings_of(bench: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every distinct small-split warning of the results, in order."""
    out: list[str] = []
    for d in bench:
        w = warning(d)
        if w is not None and w not in out:
            out.append(w)
    return out


def interval_caption(bench: Sequence[Mapping[str, Any]]) -> str:
    """What the interval columns are, from which draw, and the warnings (caption text)."""
    draws = {(b["intervals"].get("replicates"), b["intervals"].get("seed"))
             for b in map(_block, bench) if isinstance(b.get("intervals"), Mapping)}
    if draws:
        reps = " / ".join(f"{r:,} replicates at seed {s}" for r, s in sorted(draws))
        text = (f"Rank 95%: the 2.5/97.5 percentile ranks within the strategy (tied methods share "
                f"a rank in every replicate); behind best: the gap area over [0, 1] behind the "
                f"strategy's best method with its paired 95% interval (pp; 0 inside: the data do "
                f"not separate the two); gap area [0,1] 95%: the method's own gap area over "
                f"[0, 1] with its strategy's oracle frontier re-solved on every replicate "
                f"(docs/rules.md); gross and net; two-stage paired bootstrap of the "
                f"evaluated split, {reps}, as `otbench bench compare` printed them.")
        text += outside_text(bench)
        if any(not _block(d).get("intervals") for d in bench):
            text += " n/a: a result without leaderboard intervals (`bench run`, or `--replicates 0`)."
    else:
        text = ("Rank, behind-best and gap-area intervals: n/a (no result carries them; `otbench "
                "bench compare` computes them).")
    return text + "".join(f" Warning: {w}." for w in warnings_of(bench))


def panel_line(d: Mapping[str, Any]) -> str | None:
    """The figure panel's interval lines: rank interval, its own gap area's interval, and the gap
    behind the best (None: none)."""
    if not _block(d).get("intervals"):
        return None
    # Three short lines: fewer would overrun the panel's width into its neighbour's title.
    return f"rank 95%: {rank_text(d)}\ngap 95%: {gap_text(d)} pp\nbehind best: {behind_text(d)} pp"
