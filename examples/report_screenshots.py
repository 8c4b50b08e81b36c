"""Look at a report as a reader would: build one, open it in headless Chromium, save screenshots.

    python examples/report_screenshots.py --out shots/               # a simulated set (SYNTHETIC)
    python examples/report_screenshots.py --set my-set --out shots/  # your set

Writes OUT/report/ (the HTML report with its figures as PNG and PDF) and
OUT/report-top.png / OUT/report-full.png (the first screen and the whole
page, rendered by Chromium exactly as a browser shows it) and OUT/trajectories.png
(the report's trajectory page, `otbench view`'s page), then checks what
a reviewer checks by eye: every figure the page shows also exists as a PDF,
and the page says SYNTHETIC when the data are simulated. Chromium is found
as `chromium`, `chromium-browser` or `google-chrome` on PATH (Debian:
`apt-get install chromium`); without one the script says so and exits 2.
"""

import argparse
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")                      # no display needed

import otbench.analysis as oa  # noqa: E402
from otbench.analysis.report import write_report  # noqa: E402
from _headless import need_browser, screenshot  # noqa: E402

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", type=Path, default=None, help="a measurement set (default: simulated)")
    ap.add_argument("--out", type=Path, default=Path("shots"))
    args = ap.parse_args()
    exe = need_browser()
    if exe is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    ms = oa.load(args.set) if args.set else oa.simulate("tiny", seed=0)
    index = write_report(ms, args.out / "report", results_dir=None, grid=101)
    html = index.read_text(encoding="utf-8")
    shown = sorted(set(re.findall(r'src="figures/([^"]+)\.png"', html)))
    missing = [f for f in shown if not (index.parent / "figures" / f"{f}.pdf").is_file()]
    if missing:
        raise SystemExit(f"figures shown without their PDF: {', '.join(missing)}")
    if ms.synthetic and "SYNTHETIC" not in html:
        raise SystemExit("a simulated set's report does not say SYNTHETIC")
    screenshot(exe, index, args.out / "report-top.png", width=1280, height=900)
    screenshot(exe, index, args.out / "report-full.png", width=1280, height=12000)
    # the trajectories of the STP-curve figures, cut by cut (`otbench view`'s page)
    screenshot(exe, index.parent / "trajectories.html", args.out / "trajectories.png",
               width=1280, height=2400)
    print(f"{len(shown)} figures shown, each also as PDF; screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
