"""Headless-Chromium screenshots, shared by the example scripts that look at otbench's pages.

A script in this folder imports it as `_headless` (Python puts a script's own
folder first on `sys.path`). Chromium is found as `chromium`,
`chromium-browser` or `google-chrome` on PATH.
"""

import shutil
import subprocess
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str | None:
    """The first headless-capable browser on PATH, or None."""
    return next((b for b in map(shutil.which, BROWSERS) if b), None)


def screenshot(exe: str, page: Path, png: Path, *, width: int, height: int) -> None:
    """One headless screenshot of `page` at `width` x `height` CSS pixels."""
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri()]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    if r.returncode != 0 or not png.is_file():
        raise SystemExit(f"{exe}: no screenshot of {page} ({r.stderr.strip()[-300:]})")
