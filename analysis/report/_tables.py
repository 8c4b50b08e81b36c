"""Report tables: one table model rendered as CSV, LaTeX (booktabs) and HTML heat-tables.

A `Table` holds display cells (what a reader sees in LaTeX and HTML, in
display units: %, pp, tokens) and, separately, machine rows for CSV (same
units, more digits, empty string for a missing value), because a CSV cell
should parse as one number while a display cell may read
``64.3 [60.1, 68.0]``. Every renderer is a pure function of the table, so
the same inputs give byte-identical files.

Builders turn the analysis documents into tables:
* `matrix_table`: a Table-1/Table-3 style model x group matrix with the
  "Avg." row (equal weight over models) and column (equal weight over
  groups) from an ``otbench.metrics/1`` document, optionally with
  ``otbench.bootstrap/1`` intervals shown beside each value in HTML;
* `interval_table`: the Tables 4-6 layout (intervals only);
* smaller tables for frontiers, local changes, thinning, OTBench and step
  lengths.
"""

import dataclasses
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from otbench.analysis.overthinking import ZERO_ACCURACY_MARK, ZERO_ACCURACY_NOTE
from otbench.files import csv_text

from ._marks import outside_reasons, zero_or_places
from otbench.errors import ArgumentError

SYNTHETIC_NOTE = "SYNTHETIC DATA (simulated, not model outputs)"
MISSING = "n/a"
"""Display text of a value without data (never a silent zero)."""


@dataclasses.dataclass(frozen=True)
class Cell:
    """One display cell: `text` (LaTeX/HTML), `value` (heat shading), `sub` (HTML second line)."""

    text: str
    value: float | None = None
    sub: str | None = None


@dataclasses.dataclass(frozen=True)
class Table:
    """A report table (see the module docstring).

    Attributes:
      name: file stem, e.g. ``table1_or`` (``tables/<name>.csv`` / ``.tex``).
      title: short heading.
      caption: one sentence: what the numbers are, their units, the weights.
      header: column headings of the display table (first: the row label).
      rows: display rows, each `len(header)` cells (first: the row label).
      csv_header, csv_rows: the machine form (strings, already formatted).
      heat: shade the numeric body cells in HTML (matrix tables).
      rule_before_last: a rule above the last row (the "Avg." row).
      heat_range: fixed ends of the HTML shading (display units; None: the body's own
        end), so a small spread is not shaded as a large one.
      key_columns: how many leading columns identify a row (the row label, or e.g. rank,
        method and strategy); every part of a split table repeats them (`parts`).
      avg_column: the last column is the "Avg." column (None: when `heat`).
      part: (i, n) for part i of the n parts of a split table; None for a whole one.
    """

    name: str
    title: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    csv_header: tuple[str, ...]
    csv_rows: tuple[tuple[str, ...], ...]
    heat: bool = False
    rule_before_last: bool = False
    heat_range: tuple[float | None, float | None] = (None, None)
    key_columns: int = 1
    avg_column: bool | None = None
    part: tuple[int, int] | None = None

    @property
    def has_avg_column(self) -> bool:
        return self.heat if self.avg_column is None else self.avg_column


# -- number formatting --------------------------------------------------------------

def fmt(v: float | None, scale: float = 1.0, digits: int = 1) -> str:
    """Display text of a value in display units; `MISSING` for None."""
    return MISSING if v is None else f"{v * scale:.{digits}f}"


def csv_num(v: float | None, scale: float = 1.0, digits: int = 4) -> str:
    """CSV text of a value (more digits than the display); empty for None."""
    return "" if v is None else f"{v * scale:.{digits}f}"


def fmt_interval(iv: Sequence[float | None] | None, scale: float, digits: int,
                 estimate: float | None = None) -> str:
    """``[lo, hi]`` in display units; `EXCLUDES` appended when it does not contain `estimate`."""
    if iv is None or iv[0] is None or iv[1] is None:
        return MISSING
    mark = f" {EXCLUDES}" if excludes(iv, estimate) else ""
    return f"[{iv[0] * scale:.{digits}f}, {iv[1] * scale:.{digits}f}]{mark}"


EXCLUDES = "†"
"""The mark of an interval that does not contain its own estimate (explained in the caption)."""
EXCLUDES_NOTE = ("† the interval does not contain the point estimate: percentile intervals "
                 "follow the replicates' distribution, which a skewed or biased statistic "
                 "centres away from the estimate")


def excludes(iv: Sequence[float | None] | None, estimate: float | None) -> bool:
    """Whether a complete interval `iv` lies wholly above or below `estimate`."""
    if estimate is None or iv is None or iv[0] is None or iv[1] is None:
        return False
    return not (iv[0] <= estimate <= iv[1])


def marked(caption: str, texts: Iterable[str], note: str = EXCLUDES_NOTE) -> str:
    """`caption` with `note` added when some of the shown `texts` carries `EXCLUDES`."""
    if not any(EXCLUDES in t for t in texts):
        return caption
    return caption.rstrip(".") + f"; {note}."


def _shown(rows: Sequence[Sequence["Cell"]]) -> list[str]:
    return [c.text + (c.sub or "") for r in rows for c in r]


# -- builders -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """How one metric of the metrics document is shown."""

    key: str          # key in otbench.metrics/1 (and otbench.bootstrap/1 when it has one)
    label: str        # e.g. "OR (%)"
    scale: float      # fraction -> display unit
    digits: int

    @property
    def unit(self) -> str:
        """The display unit (`%`, `pp`, `tokens`), the label's last parenthesis; CSV headers carry it."""
        return self.label.rsplit("(", 1)[1].rstrip(")")


METRIC_SPECS = {
    "or": MetricSpec("or", "OR (%)", 100.0, 1),
    "ad": MetricSpec("ad", "AD (pp)", 100.0, 2),
    "full_acc": MetricSpec("full_acc", "original full-thinking accuracy (%)", 100.0, 2),
    "tokens": MetricSpec("tokens", "mean thinking tokens L(n) (tokens)", 1.0, 0),
    "endpoint_acc": MetricSpec("endpoint_acc", "STP endpoint accuracy P(n) (%)", 100.0, 2),
    "zero_step_acc": MetricSpec("zero_step_acc", "zero-step accuracy P(0) (%)", 100.0, 2),
    "pairwise_or": MetricSpec("pairwise_or", "within-question mean pairwise |ΔOR| (pp)", 100.0, 2),
    "pairwise_ad": MetricSpec("pairwise_ad", "within-question mean pairwise |ΔAD| (pp)", 100.0, 2),
}


def _axes(metrics_doc: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    return list(metrics_doc["by_model"]), list(metrics_doc["by_group"])


def _interval_lookup(boot: Mapping[str, Any] | None, key: str):
    """(cell, model, group, macro) interval getters from a bootstrap document.

    ``otbench.bootstrap/1`` has cell and macro intervals; optional
    ``by_model`` / ``by_group`` maps (same keys) fill the Avg. column / row.
    """
    if boot is None:
        return None
    cells = {(c["model"], c["group"]): c.get(key) for c in boot.get("cells", [])}
    by_model = {m: v.get(key) for m, v in (boot.get("by_model") or {}).items()}
    by_group = {g: v.get(key) for g, v in (boot.get("by_group") or {}).items()}
    macro = (boot.get("macro") or {}).get(key)
    return cells, by_model, by_group, macro


def matrix_table(name: str, metrics_doc: Mapping[str, Any], key: str, *, title: str,
                 caption: str, boot: Mapping[str, Any] | None = None,
                 heat_range: tuple[float | None, float | None] = (None, None)) -> Table:
    """Model x group matrix of one metric with the Avg. row and column (Tables 1 and 3).

    Rows are the document's models (sorted) plus "Avg." (equal weight over
    models), columns its groups plus "Avg." (equal weight over groups); a
    (model, group) pair without trajectories shows "-" (CSV: empty). With a
    bootstrap document that has intervals for `key`, each HTML cell shows
    the interval below the value; CSV and LaTeX keep the point values only
    (the intervals have their own tables, `interval_table`).
    """
    spec = METRIC_SPECS[key]
    models, groups = _axes(metrics_doc)
    by_cell = {(c["model"], c["group"]): c[key] for c in metrics_doc["cells"]}
    iv = _interval_lookup(boot, key)
    zero = zero_or_places(metrics_doc, key)

    def cell(v, interval=None, present=True, place=None) -> Cell:
        if not present:
            return Cell("-")
        sub = None if iv is None or interval is None else fmt_interval(interval, spec.scale,
                                                                        spec.digits, v)
        text = fmt(v, spec.scale, spec.digits) + (ZERO_ACCURACY_MARK if place in zero else "")
        return Cell(text, None if v is None else v * spec.scale, sub)

    header = ("model",) + tuple(groups) + ("Avg.",)
    rows, csv_rows = [], []
    for m in models:
        r = [Cell(m)]
        c = [m]
        for g in groups:
            present = (m, g) in by_cell
            v = by_cell.get((m, g))
            r.append(cell(v, None if iv is None else iv[0].get((m, g)), present, ("cell", m, g)))
            c.append(csv_num(v, spec.scale) if present else "")
        v = metrics_doc["by_model"][m][key]
        r.append(cell(v, None if iv is None else iv[1].get(m), place=("model", m, None)))
        c.append(csv_num(v, spec.scale))
        rows.append(tuple(r))
        csv_rows.append(tuple(c))
    r, c = [Cell("Avg.")], ["Avg."]
    for g in groups:
        v = metrics_doc["by_group"][g][key]
        r.append(cell(v, None if iv is None else iv[2].get(g), place=("group", None, g)))
        c.append(csv_num(v, spec.scale))
    v = metrics_doc["macro"][key]
    r.append(cell(v, None if iv is None else iv[3], place=("macro", None, None)))
    c.append(csv_num(v, spec.scale))
    rows.append(tuple(r))
    csv_rows.append(tuple(c))
    csv_header = ("model",) + tuple(f"{g} ({spec.unit})" for g in header[1:])
    if zero:
        caption = caption.rstrip(".") + f"; {ZERO_ACCURACY_NOTE}."
    caption = marked(caption, _shown(rows), EXCLUDES_NOTE + outside_reasons(boot, key))
    return Table(name=name, title=title, caption=caption, header=header,
                 rows=tuple(rows), csv_header=csv_header, csv_rows=tuple(csv_rows), heat=True,
                 rule_before_last=True, heat_range=heat_range)


def interval_table(name: str, boot: Mapping[str, Any], metrics_doc: Mapping[str, Any], key: str,
                   *, title: str, caption: str) -> Table:
    """Tables 4-6: bootstrap 2.5/97.5 percentile intervals in the matrix layout.

    The model and group axes follow the metrics document, so the interval
    table lines up with the point table. CSV: two columns per group,
    ``<group> lo`` and ``<group> hi``.
    """
    spec = METRIC_SPECS[key]
    models, groups = _axes(metrics_doc)
    cells, by_model, by_group, macro = _interval_lookup(boot, key)
    est = {(c["model"], c["group"]): c.get(key) for c in metrics_doc["cells"]}

    zero = zero_or_places(metrics_doc, key)

    def show(interval, estimate, place) -> Cell:
        return Cell(fmt_interval(interval, spec.scale, spec.digits, estimate)
                    + (ZERO_ACCURACY_MARK if place in zero else ""))

    def csv_pair(interval) -> list[str]:
        if interval is None:
            return ["", ""]
        return [csv_num(interval[0], spec.scale), csv_num(interval[1], spec.scale)]

    header = ("model",) + tuple(groups) + ("Avg.",)
    csv_header = ("model",) + tuple(f"{g} {e} ({spec.unit})" for g in groups + ["Avg."]
                                    for e in ("lo", "hi"))
    rows, csv_rows = [], []
    lines = [(m, [(cells.get((m, g)), est.get((m, g)), ("cell", m, g)) for g in groups],
              (by_model.get(m), metrics_doc["by_model"][m].get(key), ("model", m, None)))
             for m in models]
    lines.append(("Avg.", [(by_group.get(g), metrics_doc["by_group"][g].get(key), ("group", None, g))
                           for g in groups],
                  (macro, metrics_doc["macro"].get(key), ("macro", None, None))))
    for label, per_group, avg in lines:
        rows.append((Cell(label),) + tuple(show(*x) for x in per_group + [avg]))
        csv_rows.append((label,) + tuple(s for x, _, _ in per_group + [avg] for s in csv_pair(x)))
    if zero:
        caption = caption.rstrip(".") + f"; {ZERO_ACCURACY_NOTE}."
    caption = marked(caption, _shown(rows), EXCLUDES_NOTE + outside_reasons(boot, key))
    return Table(name=name, title=title, caption=caption, header=header,
                 rows=tuple(rows), csv_header=csv_header, csv_rows=tuple(csv_rows),
                 rule_before_last=True)


def simple_table(name: str, *, title: str, caption: str, header: Sequence[str],
                 rows: Sequence[Sequence[tuple[str, str | tuple[str, ...]]]],
                 csv_header: Sequence[str] | None = None, key_columns: int = 1) -> Table:
    """A plain table from rows of (display text, CSV text) pairs.

    A CSV text may be a tuple of strings: it fills several CSV columns (e.g.
    an interval's lo and hi), named by `csv_header`. The first `key_columns`
    columns identify a row (repeated in every part of a split table).
    """
    def flat(r):
        return tuple(x for _, c in r for x in (c if isinstance(c, tuple) else (c,)))

    csv_rows = tuple(flat(r) for r in rows)
    ch = tuple(header if csv_header is None else csv_header)
    if any(len(r) != len(ch) for r in csv_rows):
        raise ArgumentError(f"table {name}: CSV rows do not match the {len(ch)} CSV columns")
    return Table(name=name, title=title, caption=caption, header=tuple(header),
                 rows=tuple(tuple(Cell(d) for d, _ in r) for r in rows),
                 csv_header=ch, csv_rows=csv_rows, key_columns=key_columns)


# -- splitting a wide table ---------------------------------------------------------------

MAX_COLUMNS = 7
"""The most columns one printed part of a table holds: a wider table is split (`parts`)."""


def parts(t: Table, max_columns: int = MAX_COLUMNS) -> tuple[Table, ...]:
    """`t` as printed: itself when it has at most `max_columns` columns, else its parts.

    Each part repeats the `key_columns` identifying columns and takes an
    even share of the others, in order, so that no part is over
    `max_columns` wide and there are as few parts as that allows; every part
    holds every row. The parts' HTML shading keeps the whole table's scale.
    The CSV is never split (it is the machine form).
    """
    n, k = len(t.header), t.key_columns
    if n <= max_columns:
        return (t,)
    if not 1 <= k < max_columns:     # a table that cannot be split is a bug in its builder
        raise AssertionError(f"table {t.name}: {k} identifying columns leave no room in "
                             f"{max_columns}")
    rest = list(range(k, n))
    m = -(-len(rest) // (max_columns - k))
    sizes = [len(rest) // m + (i < len(rest) % m) for i in range(m)]
    lo, hi = _heat_span(t)
    out, at = [], 0
    for i, size in enumerate(sizes):
        cols = list(range(k)) + rest[at:at + size]
        at += size
        out.append(dataclasses.replace(
            t, header=tuple(t.header[j] for j in cols),
            rows=tuple(tuple(r[j] for j in cols) for r in t.rows),
            heat_range=(lo, hi), avg_column=t.has_avg_column and cols[-1] == n - 1,
            part=(i + 1, m)))
    return tuple(out)


def part_title(t: Table) -> str:
    """The title with "(part i of n)" for a part of a split table."""
    return t.title if t.part is None else f"{t.title} (part {t.part[0]} of {t.part[1]})"


def continued_note(first_ref: str) -> str:
    """The caption of a later part: where the columns are explained."""
    return (f"The rows of part 1 ({first_ref}) with further columns; its caption "
            f"explains them.")


# -- renderers --------------------------------------------------------------------------

def to_csv(t: Table, *, synthetic: bool) -> str:
    """RFC-4180 CSV (``\\n`` line ends); a synthetic set gets a leading ``#`` comment line.

    Read it with ``pandas.read_csv(path, comment="#")``.
    """
    return csv_text(t.csv_header, t.csv_rows, comment=SYNTHETIC_NOTE if synthetic else None)


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "Δ": r"$\Delta$", "β": r"$\beta$",
                  "θ": r"$\theta$", "≥": r"$\geq$", "†": r"\textdagger{}", "≤": r"$\leq$",
                  "‡": r"\textdaggerdbl{}", "–": "--", "·": r"$\cdot$", "|": r"$|$", "−": "$-$",
                  "×": r"$\times$", "±": r"$\pm$"}
LATEX_SYMBOLS = {
    "β_match": r"\beta_{\text{match}}", "β_sat": r"\beta_{\text{sat}}",
    "F_C(β)": r"F_C(\beta)", "F_C(1)": "F_C(1)", "F_C": "F_C", "A_full": r"A_{\text{full}}",
    "A0": "A_0", "A_0": "A_0", "A0_g": "A_{0,g}", "H_X": "H_X", "H_Y": "H_Y",
    "q_true": r"q_{\text{true}}", "ΔP(k)": r"\Delta P(k)", "|ΔOR|": r"|\Delta\mathrm{OR}|",
    "|ΔAD|": r"|\Delta\mathrm{AD}|",
}
r"""The report's symbols as LaTeX math (``$...$``; ``\text`` needs amsmath): a name with a
subscript is one symbol (`$\beta_{\text{match}}$`), never an escaped underscore after a
Greek letter (`$\beta$\_match`). Any other underscore is text (a method's name)."""
_SYMBOL_RE = re.compile(r"(?<!\w)(" + "|".join(
    re.escape(k) for k in sorted(LATEX_SYMBOLS, key=len, reverse=True)) + r")(?!\w)")
_ADJACENT_MATH = re.compile(r"(?<!\\)\$\$")


def _escape_chars(s: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in s)


def latex_escape(s: str) -> str:
    """Text for LaTeX: known symbols (`LATEX_SYMBOLS`) as math, special characters escaped."""
    out, at = [], 0
    for m in _SYMBOL_RE.finditer(s):
        out += [_escape_chars(s[at:m.start()]), f"${LATEX_SYMBOLS[m.group(1)]}$"]
        at = m.end()
    out.append(_escape_chars(s[at:]))
    # Adjacent math joins into one formula ("$|$$\Delta$" would read as display math); the
    # space keeps a control word apart from what follows ("\geq A", not "\geqA").
    return _ADJACENT_MATH.sub(" ", "".join(out))


def to_latex(t: Table, *, synthetic: bool) -> str:
    """``table`` environments with booktabs ``tabular`` s (needs ``\\usepackage{booktabs}``).

    One environment per part (`parts`): a table over `MAX_COLUMNS` wide
    becomes several, captioned "(part i of n)"; part 1 keeps the table's
    label and caption, later parts point to it. Symbols are typeset as math
    (`latex_escape`); a table that uses ``\\text`` says it needs amsmath.
    """
    label = f"tab:otbench-{t.name.replace('_', '-')}"
    tail = " Synthetic data (simulated, not model outputs)." if synthetic else ""
    body = []
    for p in parts(t):
        if p.part is None:
            body.append(_latex_env(p, latex_escape(t.caption + tail), label))
        elif p.part[0] == 1:
            body.append(_latex_env(p, latex_escape(f"{part_title(p)}. {t.caption}{tail}"), label))
        else:
            cap = (latex_escape(f"{part_title(p)}. ") + continued_note(f"Table~\\ref{{{label}}}")
                   + latex_escape(tail))
            body.append(_latex_env(p, cap, f"{label}-part{p.part[0]}"))
    text = "\n\n".join(body)
    needs = r"\usepackage{booktabs}" + (r" and \usepackage{amsmath}" if r"\text{" in text else "")
    head = [f"% otbench report table {t.name}; needs {needs}"]
    if synthetic:
        head.append(f"% {SYNTHETIC_NOTE}")
    return "\n".join(head + [text]) + "\n"


def _latex_env(t: Table, caption: str, label: str) -> str:
    align = "l" * t.key_columns + "r" * (len(t.header) - t.key_columns)
    out = [r"\begin{table}[t]", r"\centering", f"\\caption{{{caption}}}", f"\\label{{{label}}}",
           f"\\begin{{tabular}}{{{align}}}", r"\toprule",
           " & ".join(latex_escape(h) for h in t.header) + r" \\", r"\midrule"]
    for i, r in enumerate(t.rows):
        if t.rule_before_last and i == len(t.rows) - 1 and len(t.rows) > 1:
            out.append(r"\midrule")
        out.append(" & ".join(latex_escape(c.text) for c in r) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out)


def _heat_color(x: float) -> str:
    """Background for a position `x` in [0, 1]: white to a light blue (dark text stays legible)."""
    lo, hi = (255, 255, 255), (107, 174, 214)
    rgb = tuple(round(a + (b - a) * x) for a, b in zip(lo, hi))
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _heat_span(t: Table) -> tuple[float, float]:
    """The ends of the HTML shading: the body cells' range (not the Avg. row or column),
    widened to `heat_range`."""
    body = [c.value for r in t.rows[:-1 if t.rule_before_last else None]
            for c in r[t.key_columns:-1 if t.has_avg_column else None] if c.value is not None]
    lo, hi = (min(body), max(body)) if body else (0.0, 0.0)
    lo = lo if t.heat_range[0] is None else min(lo, t.heat_range[0])
    hi = hi if t.heat_range[1] is None else max(hi, t.heat_range[1])
    return lo, hi


def to_html(t: Table) -> str:
    """The table as an HTML ``<table>`` (heat shading from the model x group body cells).

    Shading spans the range of the body cells (not the Avg. row / column),
    so the averages are shaded on the same scale and never stretch it.
    """
    e = html.escape
    lo, hi = _heat_span(t)
    ident = t.name if t.part is None or t.part[0] == 1 else f"{t.name}-part{t.part[0]}"
    out = [f'<table class="tbl{" heat" if t.heat else ""}" id="{e(ident)}">',
           "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in t.header) + "</tr></thead>",
           "<tbody>"]
    for i, r in enumerate(t.rows):
        cls = ' class="avg"' if t.rule_before_last and i == len(t.rows) - 1 else ""
        tds = [f"<th>{e(r[0].text)}</th>"]
        for j, c in enumerate(r[1:], start=1):
            style = ""
            if t.heat and c.value is not None:
                x = 0.5 if hi <= lo else min(1.0, max(0.0, (c.value - lo) / (hi - lo)))
                style = f' style="background:{_heat_color(x)}"'
            avg = ' class="avg"' if t.has_avg_column and j == len(r) - 1 else ""
            sub = f'<br><span class="ci">{e(c.sub)}</span>' if c.sub else ""
            tds.append(f"<td{avg}{style}>{e(c.text)}{sub}</td>")
        out.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)
