"""Headless-Chromium screenshots, shared by the example scripts that look at otbench's pages.

A script in this folder imports it as `_headless` (Python puts a script's own
folder first on `sys.path`). Chromium is found as `chromium`,
`chromium-browser` or `google-chrome` on PATH.
"""

import shutil
import subprocess
import sys
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str | None:
    """The first headless-capable browser on PATH, or None."""
    return next((b for b in map(shutil.which, BROWSERS) if b), None)


def need_browser() -> str | None:
    """`browser()`, or None after saying on stderr that none was found and how to install one."""
    exe = browser()
    if exe is None:
        print(f"no headless browser found ({', '.join(BROWSERS)}); install one, e.g. "
              "apt-get install chromium", file=sys.stderr)
    return exe


def screenshot(exe: str, page: Path, png: Path, *, width: int, height: int) -> None:
    """One headless screenshot of `page` at `width` x `height` CSS pixels."""
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri()]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    if r.returncode != 0 or not png.is_file():
        raise SystemExit(f"{exe}: no screenshot of {page} ({r.stderr.strip()[-300:]})")
