"""The report page: one self-contained ``index.html`` (inline CSS, no script, no network).

Figures are PNG files beside the page (``figures/``, with their PDF / SVG
twins linked under each), referenced by relative paths, so the folder can be zipped, served or opened from disk as is. The
page is a pure function of its sections: no dates, no absolute paths.
"""

import dataclasses
import html
from collections.abc import Mapping, Sequence
from typing import Any

from ._figures import FigureInfo
from ._numbering import number_of
from ._tables import SYNTHETIC_NOTE, Table, continued_note, parts, to_html

CSS = """
body{font-family:"DejaVu Sans",Verdana,sans-serif;margin:0;color:#1b1b1b;background:#fafafa;
  line-height:1.45;font-size:15px}
main{max-width:1180px;margin:0 auto;padding:18px 26px 60px;background:#fff}
h1{font-size:26px;margin:6px 0 4px}h2{font-size:20px;margin:34px 0 8px;border-bottom:2px solid #ddd;
  padding-bottom:4px}h3{font-size:16px;margin:20px 0 6px}
.synthetic{background:#c0392b;color:#fff;font-weight:bold;padding:10px 14px;border-radius:4px;
  margin:10px 0;font-size:16px;letter-spacing:.3px}
.meta{border-collapse:collapse;font-size:13px;margin:8px 0}.meta td,.meta th{padding:2px 10px 2px 0;
  text-align:left;vertical-align:top}.meta th{color:#555;font-weight:normal}
figure{margin:18px 0 22px}figure img{max-width:100%;height:auto;border:1px solid #e3e3e3}
figcaption{font-size:13.5px;color:#333;margin-top:4px}
.tbl{border-collapse:collapse;font-size:13px;margin:6px 0 2px;font-variant-numeric:tabular-nums}
.tbl th,.tbl td{border:1px solid #d9d9d9;padding:3px 8px;text-align:right;white-space:nowrap}
.tbl thead th{background:#f0f0f0;text-align:center}.tbl tbody th{text-align:left;background:#f7f7f7}
.tbl tr.avg td,.tbl tr.avg th,.tbl td.avg{font-weight:bold}.tbl tr.avg td,.tbl tr.avg th{border-top:2px solid #888}
.tbl .ci{font-weight:normal;font-size:11px;color:#444}
.tcap{font-size:13.5px;color:#333;margin:10px 0 2px}.files{font-size:12px;color:#666;margin-bottom:14px}
.note{background:#fff8e1;border-left:4px solid #f0ad4e;padding:6px 10px;margin:8px 0;font-size:13.5px}
.scroll{overflow-x:auto}code{font-size:13px}nav a{margin-right:12px;font-size:13px}
"""


@dataclasses.dataclass
class Section:
    """One section of the page: blocks in order."""

    id: str
    title: str
    intro: str = ""
    blocks: list[tuple[str, Any]] = dataclasses.field(default_factory=list)

    def figure(self, f: FigureInfo | None) -> None:
        if f is not None:
            self.blocks.append(("figure", f))

    def table(self, t: Table) -> None:
        self.blocks.append(("table", t))

    def note(self, text: str) -> None:
        self.blocks.append(("note", text))

    def text(self, text: str) -> None:
        self.blocks.append(("text", text))

    def link(self, href: str, text: str, after: str = "") -> None:
        """A paragraph: a link to a page beside the report (relative `href`), then `after`."""
        self.blocks.append(("link", (href, text, after)))


def render(*, title: str, synthetic: bool, meta: Sequence[tuple[str, str]],
           sections: Sequence[Section], footer: Mapping[str, str]) -> str:
    """The whole page; figures and tables carry their fixed numbers (`_numbering`)."""
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{e(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>", "<main>",
           f"<h1>{e(title)}</h1>"]
    if synthetic:
        out.append(f'<div class="synthetic">{e(SYNTHETIC_NOTE)}: every number, table and figure '
                   "in this report comes from a simulator, not from model measurements.</div>")
    out.append('<table class="meta">' + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>"
                                                for k, v in meta) + "</table>")
    out.append("<nav>" + "".join(f'<a href="#{e(s.id)}">{e(s.title)}</a>' for s in sections)
               + "</nav>")
    for s in sections:
        out.append(f'<section id="{e(s.id)}"><h2>{e(s.title)}</h2>')
        if s.intro:
            out.append(f"<p>{e(s.intro)}</p>")
        for kind, item in s.blocks:
            if kind == "figure":
                nfig = number_of(item.name)[1]
                # Shown at the pixel size: the PNGs are drawn at their printed size
                # (paper-column widths, 7-9.5 pt fonts) at 144 dpi, so text lands at
                # about the page's text size and stays sharp on HiDPI screens.
                w, h = item.width, item.height
                out.append(f'<figure id="{e(item.name)}"><img src="{e(item.file)}" '
                           f'width="{w}" height="{h}" alt="{e(item.title)}">'
                           f"<figcaption><b>Figure {nfig}.</b> {e(item.caption)}</figcaption>"
                           '<div class="files">files: ' + " · ".join(
                               f'<a href="{e(f)}">{e(f.rsplit("/", 1)[1])}</a>'
                               for f in item.files) + "</div></figure>")
            elif kind == "table":
                ntab = number_of(item.name)[1]
                for part in parts(item):    # a table over MAX_COLUMNS wide: its parts
                    n = "" if part.part is None else f" (part {part.part[0]} of {part.part[1]})"
                    cap = item.caption if part.part is None or part.part[0] == 1 else \
                        continued_note(f"Table {ntab}, part 1")
                    out.append(f'<p class="tcap"><b>Table {ntab}{n}. {e(item.title)}.</b> '
                               f"{e(cap)}</p>")
                    out.append(f'<div class="scroll">{to_html(part)}</div>')
                out.append(f'<div class="files">files: <a href="tables/{e(item.name)}.csv">'
                           f'{e(item.name)}.csv</a> · <a href="tables/{e(item.name)}.tex">'
                           f"{e(item.name)}.tex</a></div>")
            elif kind == "link":
                href, text, after = item
                out.append(f'<p><a href="{e(href)}">{e(text)}</a>{e(after)}</p>')
            elif kind == "note":
                out.append(f'<div class="note">{e(item)}</div>')
            else:
                out.append(f"<p>{e(item)}</p>")
        out.append("</section>")
    out.append('<h2 id="about">About this report</h2><table class="meta">'
               + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in footer.items())
               + "</table>")
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"
