"""Render a report from `simulate("small")` and screenshot its index.html in headless Chromium.

Steps, each timed:
1. simulate the small set and save it (a directory, so the report's cache
   and file paths are exercised);
2. the baseline: `metrics` + `frontiers` alone (what any report must compute);
3. OTBench `compare` of the built-in methods on a seeded split, written to
   ``DIR/results/otbench.json`` (skipped with a message when the OTBench
   module is not installed);
4. `write_report` cold (computes metrics and frontiers) and warm (reuses the
   JSON documents the first run wrote into ``DIR/results/``);
5. Chromium (Debian's ``chromium``) loads the page from disk with the network
   off and writes a screenshot; the script checks the PNG is a PNG of the
   window size and that the DOM it rendered holds every figure.

The bootstrap document comes from `otbench.analysis.resampling._bootstrap` (``--replicates``,
with frontiers; 0 skips it) unless one is passed with ``--bootstrap``; a
thinning document is used when passed with ``--thinning``.

    python benchmarks/report_render.py [--out /tmp/otbench-report-render] [--height 2400]
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


def chromium(args: list[str], profile: Path, timeout: float = 120.0) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("chromium not found: apt-get install -y chromium")
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "otbench-report-render")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=2400)
    ap.add_argument("--bootstrap", type=Path, default=None)
    ap.add_argument("--thinning", type=Path, default=None)
    ap.add_argument("--replicates", type=int, default=200,
                    help="bootstrap replicates (with frontiers) when no --bootstrap is given")
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: 8 bootstrap replicates")
    a = ap.parse_args()
    if a.smoke:
        a.replicates = 8

    from otbench.analysis import frontiers, metrics, save, simulate
    from otbench.analysis.report._figures import png_size
    from otbench.analysis.report._write import write_report

    if a.out.exists():
        shutil.rmtree(a.out)
    a.out.mkdir(parents=True)
    times = {}
    t = time.perf_counter()
    ms = simulate("small", 0)
    set_dir = a.out / "set"
    save(ms, set_dir)
    times["simulate+save"] = time.perf_counter() - t

    t = time.perf_counter()
    metrics(ms)
    frontiers(ms)
    times["baseline metrics+frontiers"] = time.perf_counter() - t

    results = set_dir / "results"
    results.mkdir()
    try:
        from otbench.analysis.bench import assign_splits, compare, compare_json
    except ImportError as e:
        print(f"OTBench not available ({e}); Fig. 4 will be a note")
    else:
        t = time.perf_counter()
        doc = compare_json(compare(assign_splits(ms)))
        (results / "otbench.json").write_text(json.dumps(doc))
        times["otbench compare (3 built-ins)"] = time.perf_counter() - t

    if a.bootstrap is None and a.replicates > 0:
        try:
            from otbench.analysis.resampling._bootstrap import bootstrap
        except ImportError as e:
            print(f"bootstrap not available ({e}); Tables 4-6 and Fig. 5 will be notes")
        else:
            t = time.perf_counter()
            doc = bootstrap(ms, replicates=a.replicates, frontiers=True).to_json()
            (results / "bootstrap.json").write_text(json.dumps(doc))
            times[f"bootstrap ({a.replicates} replicates, frontiers)"] = time.perf_counter() - t

    report = a.out / "report"
    kw = dict(bootstrap=a.bootstrap, thinning=a.thinning)
    t = time.perf_counter()
    index = write_report(set_dir, report, **kw, progress=lambda s: print(f"  report: {s}", file=sys.stderr))
    times["report (cold)"] = time.perf_counter() - t
    for kind in ("metrics", "frontier"):
        shutil.copy(report / "data" / f"{kind}.json", results / f"{kind}.json")
    t = time.perf_counter()
    write_report(set_dir, a.out / "report-warm", **kw)
    times["report (warm: cached metrics, frontier)"] = time.perf_counter() - t
    same = all((report / p.relative_to(a.out / "report-warm")).read_bytes() == p.read_bytes()
               for p in sorted((a.out / "report-warm").rglob("*")) if p.is_file()
               and p.name not in ("report.json", "index.html"))
    print(f"cold and warm reports: figures/tables/data byte-identical: {same}")

    manifest = json.loads((report / "report.json").read_text())
    for f in manifest["figures"]:
        w, h = png_size(report / f["file"])
        assert (w, h) == (f["width"], f["height"]), (f["file"], w, h)
    print(f"{len(manifest['figures'])} figures (PNG sizes match report.json), "
          f"{len(manifest['tables'])} tables; notes: {manifest['notes']}")

    shot = a.out / "screenshot.png"
    t = time.perf_counter()
    r = chromium([f"--window-size={a.width},{a.height}", f"--screenshot={shot}", index.as_uri()],
                 a.out / "chromium-profile")
    times["chromium screenshot"] = time.perf_counter() - t
    if not shot.is_file():
        raise SystemExit(f"chromium wrote no screenshot (exit {r.returncode}):\n{r.stderr[-2000:]}")
    size = png_size(shot)
    t = time.perf_counter()
    dom = chromium(["--dump-dom", index.as_uri()], a.out / "chromium-profile-dom").stdout
    times["chromium dump-dom"] = time.perf_counter() - t
    missing = [f["file"] for f in manifest["figures"] if f'src="{f["file"]}"' not in dom]
    print(f"screenshot {shot} {size[0]}x{size[1]} px ({shot.stat().st_size:,} bytes); "
          f"DOM {len(dom):,} chars, figures missing from the DOM: {missing or 'none'}")
    if size != (a.width, a.height) or missing:
        raise SystemExit("render check failed")

    base = times["baseline metrics+frontiers"]
    print("\ntimings (s):")
    for k, v in times.items():
        print(f"  {k:42s} {v:7.2f}")
    print(f"  ratio report (cold) / baseline analysis: {times['report (cold)'] / base:.2f}")
    print(f"  ratio report (warm) / baseline analysis: "
          f"{times['report (warm: cached metrics, frontier)'] / base:.2f}")
    print(f"report: {index}")


if __name__ == "__main__":
    main()
