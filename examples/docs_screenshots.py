"""Look at the documentation site as a reader would: build it, open it in headless Chromium.

    python examples/docs_screenshots.py --out shots/
    python examples/docs_screenshots.py --site site/ --out shots/   # a site already built

Builds the site in strict mode (`mkdocs build --strict`, offline, as `make docs`
does) into OUT/site/, then saves screenshots rendered by Chromium exactly as a
browser shows the pages: OUT/docs-home.png (the front page's first screen),
OUT/docs-guide.png (the first screen of a guide), OUT/docs-rules.png (the
rules, whose formulas are MathML written at build time) and
OUT/docs-cli.png (the generated command-line reference). Chromium is found as
`chromium`, `chromium-browser` or `google-chrome` on PATH (Debian: `apt-get
install chromium`); without one the script says so and exits 2.
"""

import argparse
import subprocess
import sys
from pathlib import Path

from _headless import need_browser, screenshot

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"docs-home.png": "index.html", "docs-guide.png": "guides/own-measurements.html",
         "docs-rules.png": "rules.html", "docs-cli.png": "reference/cli.html"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("shots"))
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--site", type=Path, default=None, help="a built site (default: build one into OUT/site)")
    args = ap.parse_args()
    exe = need_browser()
    if exe is None:
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    site = (args.site or args.out / "site").resolve()
    if args.site is None:
        r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"the site does not build in strict mode:\n{r.stderr[-3000:]}")
    for png, page in PAGES.items():
        screenshot(exe, site / page, args.out / png, width=args.width, height=args.height)
    print(f"site in {site}; screenshots of {len(PAGES)} pages in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
