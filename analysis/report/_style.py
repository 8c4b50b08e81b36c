"""The report's figure style and writer: paper-column sizes, fixed fonts, PNG + vector files.

Every figure is drawn on a bare `matplotlib.figure.Figure` with an Agg
canvas -- never through pyplot, so no global backend is switched and a
user's interactive session is untouched -- inside `figure_style()`, which
starts from matplotlib's built-in defaults (not the user's matplotlibrc) and
fixes the font to the DejaVu Sans that ships with matplotlib.

Sizes fit a paper: a figure is `COLUMN_IN` (one column) or at most
`TEXT_IN` (the text width of a two-column page) wide, drawn at its printed
size, so a PDF included at its natural width keeps the fonts of `RC`
(7-9.5 pt, never below `MIN_FONT_PT`).

Files: the PNG (for the HTML page) always; PDF and SVG on request
(`FORMATS`). PNGs are saved at a fixed size (`size_px`: inches x `DPI`, no
tight bounding box) without the "Software" metadata entry; PDFs embed their
fonts as TrueType (``pdf.fonttype`` 42, no Type 3 fonts) and carry no
creation date or producer; SVGs draw text as paths (no font needed to view
them) with a fixed id salt. The same inputs give byte-identical files.
"""

import contextlib
import dataclasses
import struct
import textwrap
from collections.abc import Iterable
from pathlib import Path

from otbench.errors import OtbenchError
from otbench.errors import ArgumentError

DPI = 144
SNAP = 8
"""Figure sizes are snapped to 1/8 inch: with `DPI` 144, inches x DPI is then an
exact integer in binary floating point, so the PNG size is exactly `size_px`
(Agg truncates a fractional pixel size, which would make it off by one)."""
COLUMN_IN = 3.5
"""Width of one column of a two-column paper (inches)."""
TEXT_IN = 7.0
"""Width of the full text (both columns) of a two-column paper: the widest figure (inches)."""
MIN_FONT_PT = 6.0
"""The smallest font any figure uses (points, at the printed size)."""
RC = {
    "font.family": "DejaVu Sans", "mathtext.fontset": "dejavusans",
    "font.size": 8.0, "axes.titlesize": 8.5, "axes.labelsize": 8.0, "legend.fontsize": 7.0,
    "xtick.labelsize": 7.0, "ytick.labelsize": 7.0, "figure.titlesize": 9.5,
    "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
    "axes.spines.top": False, "axes.spines.right": False, "axes.linewidth": 0.7,
    "lines.linewidth": 1.2, "lines.markersize": 4.0,
    "legend.frameon": True, "legend.framealpha": 0.9,
    "savefig.dpi": DPI, "figure.dpi": DPI,
    "figure.constrained_layout.use": True,
    "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "path",
    "svg.hashsalt": "otbench", "path.simplify": False,
}
SYNTHETIC_MARK = "SYNTHETIC DATA"
STRATEGY_COLORS = {"dr": "#1f77b4", "fb": "#ff7f0e", "dee": "#2ca02c"}
STRATEGY_NAMES = {"dr": "DR (dynamic routing)", "fb": "FB (fixed budget)",
                  "dee": "DEE (dynamic early exit)"}
FORMATS = ("png", "pdf", "svg")
DEFAULT_FORMATS = ("png", "pdf")
"""The PNG is always written (the HTML page shows it); PDF beside it by default."""
_METADATA = {"png": {"Software": None},
             "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
             "svg": {"Creator": None, "Date": None}}


class FigureFormatError(OtbenchError, ValueError):
    """An unknown figure format was asked for."""


def figure_formats(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """The formats to write, in `FORMATS` order, PNG always included.

    `spec`: "png,pdf,svg"-style text or an iterable of names; None gives
    `DEFAULT_FORMATS`.
    """
    if spec is None:
        return DEFAULT_FORMATS
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip().lower() for n in names if n.strip()]
    bad = [n for n in names if n not in FORMATS]
    if bad:
        raise FigureFormatError(f"figure format {bad[0]!r} is not one of {', '.join(FORMATS)}")
    return tuple(f for f in FORMATS if f in names or f == "png")


@contextlib.contextmanager
def figure_style():
    """matplotlib's built-in defaults plus `RC`, restored on exit."""
    import matplotlib
    import matplotlib.style

    with matplotlib.style.context("default"), matplotlib.rc_context(RC):
        yield


@dataclasses.dataclass(frozen=True)
class FigureInfo:
    """One written figure (recorded in ``report.json`` and shown in the HTML)."""

    name: str            # file stem: figures/<name>.<format>
    title: str
    caption: str         # one line: what it shows, from how many trajectories
    trajectories: int
    width: int           # PNG pixels
    height: int
    formats: tuple[str, ...] = ("png",)

    @property
    def file(self) -> str:
        """The PNG (the page shows it)."""
        return f"figures/{self.name}.png"

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(f"figures/{self.name}.{f}" for f in self.formats)

    @property
    def inches(self) -> tuple[float, float]:
        """The printed size (inches)."""
        return self.width / DPI, self.height / DPI


def snap(figsize: tuple[float, float]) -> tuple[float, float]:
    """`figsize` rounded to 1/`SNAP` inch (at least one step)."""
    return tuple(max(1, round(x * SNAP)) / SNAP for x in figsize)


def size_px(figsize: tuple[float, float]) -> tuple[int, int]:
    """PNG size in pixels of a figure of `figsize` inches (snapped) at `DPI`."""
    w, h = snap(figsize)
    return int(w * DPI), int(h * DPI)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG file's IHDR chunk."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ArgumentError(f"{path}: not a PNG file")
    return struct.unpack(">II", head[16:24])


def new_figure(figsize: tuple[float, float]):
    """A pyplot-free Figure with an Agg canvas, size snapped (call inside `figure_style`).

    A width over `TEXT_IN` is a bug in the figure's layout, not a data problem.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    size = snap(figsize)
    if size[0] > TEXT_IN:
        raise AssertionError(f"figure width {size[0]} in is over the text width {TEXT_IN} in")
    fig = Figure(figsize=size, dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save(fig, out_dir: Path, name: str, *, title: str, caption: str, trajectories: int,
         synthetic: bool, formats: Iterable[str] = ("png",)) -> FigureInfo:
    """Title, synthetic watermark, fixed-size deterministic files; returns the record."""
    formats = figure_formats(formats)
    if synthetic:
        title = f"{title} [{SYNTHETIC_MARK}]"
        # Across the canvas, faint, outside the layout: visible on every crop.
        fig.text(0.5, 0.5, f"{SYNTHETIC_MARK}\nsimulated, not model outputs", ha="center",
                 va="center", rotation=20, fontsize=20, color="#c0392b", alpha=0.12,
                 zorder=100, in_layout=False)
    # Wrapped to the figure's width (about 10 bold 9.5-pt characters per inch), so a
    # long title on a narrow figure is never cut at the edge.
    fig.suptitle(textwrap.fill(title, width=max(20, int(fig.get_size_inches()[0] * 10))),
                 fontweight="bold")
    folder = Path(out_dir) / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    w, h = size_px(tuple(fig.get_size_inches()))
    for f in formats:
        meta = dict(_METADATA[f])
        if f != "png":
            meta["Title"] = title
        path = folder / f"{name}.{f}"
        # No "Software" / producer / date entries (they name versions and times):
        # the bytes depend only on the drawing.
        fig.savefig(path, format=f, dpi=DPI, metadata=meta)
    png = folder / f"{name}.png"
    if png_size(png) != (w, h):    # a bug in the sizing, never a data problem
        raise AssertionError(f"{png}: PNG is {png_size(png)}, expected {(w, h)}")
    return FigureInfo(name=name, title=title, caption=caption, trajectories=int(trajectories),
                      width=w, height=h, formats=formats)
