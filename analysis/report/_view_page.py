"""The trajectory view's page: one self-contained HTML file (inline CSS, one small inline script).

Every string that comes from the set -- thinking text, forced answers,
question text, model, group and question ids, signal names -- goes through
`html.escape` before it reaches the page, and the page's Content-Security-Policy
lets only its own script run (by hash) and loads nothing (``default-src
'none'``): a model's ``<script>`` or ``onerror=`` is shown as text, and would
stay inert even if it were not. The curves are inline SVG drawn here in the
report's style (`_style`: its font and strategy colours), so nothing is fetched.
"""

import base64
import hashlib
import html
import math
from collections.abc import Sequence

from otbench.analysis.measurement import SPLITS, MeasurementSet

from ._html import CSS
from ._style import RC, STRATEGY_COLORS
from ._view_data import Stops, Texts

SCRIPT = """document.documentElement.dataset.view="ready";
var f=document.getElementById("filter");
f.addEventListener("input",function(){var q=f.value.toLowerCase();
document.querySelectorAll("#index li.t").forEach(function(li){
li.hidden=q!==""&&li.textContent.toLowerCase().indexOf(q)<0;});});"""
"""The page's only script: a filter over the index (and a mark that scripts ran, which the
headless-browser test reads to prove an injected script would have had the chance)."""
SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
CSP = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{SCRIPT_HASH}'; "
       "img-src 'none'; base-uri 'none'; form-action 'none'")
VIEW_CSS = """
.traj{border-top:3px solid #ccc;margin-top:30px}.q{white-space:pre-wrap;background:#f7f7f7;
  padding:6px 10px;font-size:13.5px;max-height:14em;overflow:auto}
.step{white-space:pre-wrap;word-break:break-word;font-family:"DejaVu Sans Mono",monospace;
  font-size:12.5px;margin:0;padding:4px 8px;border-left:3px solid #e3e3e3}
.cut{background:#eef4fb;border-left:3px solid #1f77b4;padding:3px 8px;margin:2px 0;font-size:12.5px}
.cut .k{font-weight:bold}.v{display:inline-block;margin:1px 3px;padding:0 4px;border-radius:3px;
  font-size:12px;white-space:pre-wrap;word-break:break-word}.ok{background:#d8f0d8}
.no{background:#f7dcdc}
.sig{color:#555}.stop{font-weight:bold;color:#fff;border-radius:3px;padding:0 4px;margin-left:4px}
#index ul{margin:2px 0 6px 0}#index li{font-size:13px}svg text{font-size:11px}
"""


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _num(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x:.4g}"


def anchor(ms: MeasurementSet, r: int) -> str:
    """The trajectory's anchor id: its row in the set (names may hold any character)."""
    return f"t{r}"


def _label(ms: MeasurementSet, r: int) -> tuple[str, str, str, int]:
    return (ms.models[ms.cell_model[ms.cell[r]]], ms.groups[ms.question_group[ms.question[r]]],
            ms.question_id[ms.question[r]], int(ms.trajectory[r]))


def index_html(ms: MeasurementSet, rows: Sequence[int]) -> str:
    """Model -> (group, question) -> trajectory links."""
    out = ['<section id="index"><h2>Trajectories</h2><input id="filter" type="search" '
           'placeholder="filter by model, question or trajectory" size="40">']
    last_m = last_q = None
    for r in rows:
        m, g, q, t = _label(ms, int(r))
        if m != last_m:
            out.append(("</ul></li></ul>" if last_m is not None else "") + f"<h3>{_e(m)}</h3><ul>")
            last_m, last_q = m, None
        if (g, q) != last_q:
            out.append(("</ul></li>" if last_q is not None else "") + f"<li>{_e(g)} · question "
                       f"{_e(q)}<ul>")
            last_q = (g, q)
        out.append(f'<li class="t"><a href="#{anchor(ms, int(r))}">trajectory {t}</a> '
                   f'<span class="sig">({_e(m)} · {_e(q)} · {int(ms.n[r])} steps)</span></li>')
    out.append("</ul></li></ul></section>")
    return "".join(out)


def curve_svg(ms: MeasurementSet, r: int, marks: Sequence[tuple[str, str, int]]) -> str:
    """Accuracy C(k)/P over retained tokens L(k), the cuts as dots, `marks` (label, colour, k)
    as vertical lines."""
    n, P = int(ms.n[r]), int(ms.probes[r])
    L, C = ms.L[r, : n + 1].astype(float), ms.C[r, : n + 1].astype(float)
    W, H, x0, y0, x1, y1 = 640, 210, 48, 12, 628, 176
    span = max(float(L[-1]), 1.0)
    X = lambda v: x0 + (x1 - x0) * v / span  # noqa: E731
    Y = lambda a: y1 - (y1 - y0) * a  # noqa: E731
    pts = " ".join(f"{X(a):.1f},{Y(c / P):.1f}" for a, c in zip(L, C))
    font = _e(RC["font.family"])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
           f'font-family="{font}"><title>accuracy of the forced answers at each cut</title>',
           f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" '
           'stroke="#bbb" stroke-width="0.7"/>']
    for a in (0.0, 0.5, 1.0):
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{Y(a):.1f}" y2="{Y(a):.1f}" stroke="#ddd"/>'
                   f'<text x="{x0 - 6}" y="{Y(a) + 4:.1f}" text-anchor="end">{a:.1f}</text>')
    out.append(f'<text x="{x0}" y="{H - 8}">0</text><text x="{x1}" y="{H - 8}" '
               f'text-anchor="end">{int(span):,} tokens</text>'
               f'<text x="{(x0 + x1) / 2:.0f}" y="{H - 8}" text-anchor="middle">retained thinking '
               'tokens L(k)</text>')
    for i, (name, colour, k) in enumerate(marks):
        x = X(float(L[min(k, n)]))
        side = 'x="{:.1f}"'.format(x + 3) if x < (x0 + x1) / 2 else \
            'x="{:.1f}" text-anchor="end"'.format(x - 3)        # labels stay inside the frame
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y1}" stroke="{colour}" '
                   f'stroke-dasharray="4 3" stroke-width="1.2"/><text {side} '
                   f'y="{y0 + 11 + 10 * (i % 14)}" fill="{colour}">{_e(name)}</text>')
    out.append(f'<polyline points="{pts}" fill="none" stroke="#333" stroke-width="1.4"/>')
    out += [f'<circle cx="{X(a):.1f}" cy="{Y(c / P):.1f}" r="2.2" fill="#333"><title>cut {k}: '
            f'{int(c)}/{P} correct at {int(a):,} tokens</title></circle>'
            for k, (a, c) in enumerate(zip(L, C))]
    out.append("</svg>")
    return "".join(out)


def _colour(s: Stops) -> str:
    return STRATEGY_COLORS.get(s.strategy, "#7f7f7f")


def stops_html(stops: Sequence[Stops], i: int, ms: MeasurementSet, r: int) -> str:
    """A table: each method's stop step (and its L, C/P) at each of its θs."""
    if not stops:
        return '<p class="sig">No method runs on this set (see the notes above).</p>'
    P = int(ms.probes[r])
    head = ("<tr><th>method</th><th>strategy</th><th>stop step k at θ (L(k) tokens, C(k)/P)</th>"
            "</tr>")
    body = []
    for s in stops:
        cells = " · ".join(
            f'θ={t:.4g}: <b data-method="{_e(s.name)}" data-theta="{t!r}">k={int(s.k[j, i])}</b> '
            f"({int(ms.L[r, s.k[j, i]]):,}, {int(ms.C[r, s.k[j, i]])}/{P})"
            for j, t in enumerate(s.thetas))
        body.append(f'<tr><th><span class="stop" style="background:{_colour(s)}">'
                    f"{_e(s.name)}</span></th><td>{_e(s.strategy)}</td><td "
                    f'style="text-align:left;white-space:normal">{cells}</td></tr>')
    return f'<table class="tbl">{head}{"".join(body)}</table>'


def _verdicts(texts: Texts, r: int, k: int, C: int, P: int) -> str:
    got = sorted(texts.answers.get(r, {}).get(k, []))
    if not got:
        return f'<span class="v {"ok" if C else "no"}">{C}/{P} correct</span>'
    return "".join(f'<span class="v {"ok" if ok else "no"}" title="answer {j}: {_e(status)}">'
                   f'{"✓" if ok else "✗"} {j}{": " + _e(text) if text is not None else ""}</span>'
                   for j, ok, status, text in got)


def trajectory_html(ms: MeasurementSet, r: int, i: int, texts: Texts, stops: Sequence[Stops],
                    mid: Sequence[int]) -> str:
    """One trajectory: header, question, curve, stops table, then its text cut by cut."""
    m, g, q, t = _label(ms, r)
    n, P = int(ms.n[r]), int(ms.probes[r])
    split = SPLITS[ms.split[r]] if ms.split[r] >= 0 else "none"
    marks = [(s.name, _colour(s), int(s.k[j, i])) for s, j in zip(stops, mid)]
    out = [f'<section class="traj" id="{anchor(ms, r)}"><h2>{_e(m)} · {_e(g)} · question '
           f'{_e(q)} · trajectory {t}</h2><table class="meta"><tr><th>steps n</th><td>{n}</td>'
           f"<th>thinking tokens L(n)</th><td>{int(ms.L[r, n]):,}</td><th>answers per cut P</th>"
           f"<td>{P}</td><th>thinking ended</th>"
           f"<td>{'naturally' if ms.finished[r] else 'at the limit'}"
           f"</td><th>original answer</th><td>{'correct' if ms.y[r] else 'wrong'}</td>"
           f"<th>split</th><td>{_e(split)}</td></tr></table>"]
    qt = ms.question_text[ms.question[r]]
    if qt:
        out.append(f'<div class="q">{_e(qt)}</div>')
    out.append(curve_svg(ms, r, marks))
    out.append(stops_html(stops, i, ms, r))
    steps = texts.steps.get(r)
    names = sorted(ms.signals)
    at = {k: [s.name for s, j in zip(stops, mid) if int(s.k[j, i]) == k] for k in range(n + 1)}
    for k in range(n + 1):
        if k > 0:
            body = steps[k - 1] if steps is not None else \
                f"(step {k}: {int(ms.L[r, k] - ms.L[r, k - 1]):,} tokens; no text to show)"
            out.append(f'<pre class="step">{_e(body)}</pre>')
        C = int(ms.C[r, k])
        sig = " ".join(f"{_e(s)}={_num(float(ms.signals[s][r, k]))}" for s in names)
        here = "".join(f'<span class="stop" style="background:{_colour(s)}">{_e(s.name)}</span>'
                       for s in stops if s.name in at[k])
        out.append(f'<div class="cut" id="{anchor(ms, r)}-k{k}" data-k="{k}"><span class="k">cut '
                   f"{k}</span> · {int(ms.L[r, k]):,} tokens · {_verdicts(texts, r, k, C, P)}"
                   + (f' · <span class="sig">{sig}</span>' if sig else "") + here + "</div>")
    out.append('<p><a href="#index">back to the index</a></p></section>')
    return "".join(out)


def page(*, title: str, synthetic: bool, meta: Sequence[tuple[str, str]], notes: Sequence[str],
         ms: MeasurementSet, rows: Sequence[int], texts: Texts, stops: Sequence[Stops]) -> str:
    """The whole page (a pure function of its inputs: no dates, no absolute paths added)."""
    from ._tables import SYNTHETIC_NOTE

    mid = [len(s.thetas) // 2 for s in stops]
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(title)}</title>", f"<style>{CSS}{VIEW_CSS}</style>", "</head>", "<body>",
           "<main>", f"<h1>{_e(title)}</h1>"]
    if synthetic:
        out.append(f'<div class="synthetic">{_e(SYNTHETIC_NOTE)}: every trajectory on this page '
                   "comes from a simulator, not from a model.</div>")
    out.append('<table class="meta">' + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
                                                for k, v in meta) + "</table>")
    out += [f'<div class="note">{_e(x)}</div>' for x in notes]
    legend = ", ".join(f"{s.name}: θ={s.thetas[j]:.4g}" for s, j in zip(stops, mid))
    if legend:
        out.append(f"<p>Marked on the curves and the cuts: each method's stop at the middle θ of "
                   f"those shown ({_e(legend)}).</p>")
    out.append(index_html(ms, rows))
    out += [trajectory_html(ms, int(r), i, texts, stops, mid) for i, r in enumerate(rows)]
    out += [f"<script>{SCRIPT}</script>", "</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"
