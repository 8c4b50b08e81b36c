"""A notebook-style tour of the otbench Python API (each `# %%` block is one notebook cell).

    python examples/walkthrough.py --out walkthrough/            # on a simulated set
    python examples/walkthrough.py --set my-set --out walkthrough/

It loads a measurement set, reads its folder with a dataframe library,
computes the overthinking metrics, the oracle frontiers, bootstrap
intervals and an OTBench leaderboard, turns each result into a tidy table
(`to_pandas()` when pandas is installed, `to_arrow()` otherwise) and writes
a figure and CSV files (units in every header) to --out. Without --set the
data are SYNTHETIC (simulated, not model outputs) and the script says so.
"""

# %% Setup: arguments, and a dataframe library if one is installed
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")                      # no display needed
import matplotlib.pyplot as plt  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402

import otbench.analysis as oa  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--set", type=Path, default=None, help="a measurement set (default: simulated)")
parser.add_argument("--out", type=Path, default=Path("walkthrough"))
parser.add_argument("--scale", default="small", help="simulator scale without --set")
parser.add_argument("--replicates", type=int, default=1000, help="bootstrap replicates")
parser.add_argument("--theta-grid", type=int, default=11, help="OTBench θ points per method")
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

try:
    import pandas as pd
except ImportError:                        # pandas is optional: arrow tables still work
    pd = None


def table(result):
    """A result as a dataframe when pandas is there, else as a pyarrow Table."""
    return result.to_pandas() if pd is not None else result.to_arrow()


def write_csv(arrow_table, name, units):
    """CSV with the unit of every column in its header, e.g. `acc (fraction)`."""
    renamed = arrow_table.rename_columns([f"{c} ({units[c]})" if units.get(c) else c
                                          for c in arrow_table.column_names])
    pacsv.write_csv(renamed, args.out / name)
    print(f"wrote {args.out / name}")


# %% A measurement set: load one, or simulate one (and split its questions for OTBench)
if args.set is not None:
    ms = oa.load(args.set)
    set_dir = args.set
else:
    ms = oa.assign_splits(oa.simulate(args.scale, seed=0, field_signals=True, peer_signals=True))
    set_dir = args.out / "set"
    if not set_dir.exists():
        oa.save(ms, set_dir)
if ms.synthetic:
    print("SYNTHETIC DATA (simulated, not model outputs)")
print(f"{ms.num_trajectories} trajectories, {ms.num_questions} questions, {ms.num_cells} cells; "
      f"content hash {oa.content_hash(ms)[:12]}")

# %% The stored table, straight from the folder (any dataframe library reads it)
import pyarrow.dataset as ds  # noqa: E402

stored = ds.dataset(set_dir / "trajectories", format="parquet").to_table()
print(f"trajectories/ as one table: {stored.num_rows} rows, columns {stored.column_names[:6]} ...")
assert stored.num_rows == ms.num_trajectories

# %% Overthinking metrics per cell (OR, AD: fractions)
doc = oa.metrics(ms)
print(f"{'model':30} {'group':14} {'OR':>6} {'AD':>6}")
for c in doc["cells"]:
    print(f"{c['model']:30} {c['group']:14} {c['or']:6.3f} {c['ad']:6.3f}")
print(f"macro OR {doc['macro']['or']:.3f}, AD {doc['macro']['ad']:.3f}")

# %% Oracle frontiers as a tidy table, and the figure
fr = oa.frontiers(ms, grid=101)
frontier = fr.to_arrow()
write_csv(frontier, "frontiers.csv", {"beta": "fraction", "acc": "fraction", "reward": "probes"})
fig, ax = plt.subplots(figsize=(5, 3.5))
for name, f in fr.strategies.items():
    ax.plot(fr.beta, f.macro, label=name.upper())
ax.axhline(fr.a_full, color="gray", linestyle=":", label="full thinking")
ax.set_xlabel("budget β (fraction of full-thinking tokens)")
ax.set_ylabel("macro accuracy (fraction)")
ax.legend()
fig.savefig(args.out / "frontiers.png", dpi=120)
print(f"wrote {args.out / 'frontiers.png'}")

# %% Bootstrap: point estimates beside their 95 % intervals
boot = oa.bootstrap(ms, replicates=args.replicates)
intervals = table(boot)
if pd is not None:
    macro = intervals[intervals["scope"] == "macro"].set_index("metric")
    for m in ("or", "ad"):
        row = macro.loc[m]
        print(f"macro {m.upper()}: {row['estimate']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]")
write_csv(boot.to_arrow(), "bootstrap.csv",
          {"estimate": "fraction or tokens", "lo": "fraction or tokens",
           "hi": "fraction or tokens", "defined": "replicates"})

# %% OTBench: the built-ins and a plug-in from a file, ranked per strategy
plugin = str(Path(__file__).resolve().parents[1] / "artifacts" / "otbench" / "patient_brake.py")
# bench_compare runs every built-in whose signals the set records (the field methods need
# answer signals: `simulate(..., field_signals=True)` or a probe run that records them;
# dynasor-cot and deer their own probes: `peer_signals=True` or `probe.field_probes`).
results = [*oa.bench_compare(ms, theta_grid=args.theta_grid),
           oa.bench_evaluate(ms, f"{plugin}:PatientBrake", theta_grid=args.theta_grid)]
board = oa.leaderboard(results, ms)          # with 95% rank and gap-behind-best intervals
print(board.format(), end="")
(args.out / "leaderboard.md").write_text(board.to_markdown(), encoding="utf-8")
(args.out / "leaderboard.csv").write_text(board.to_csv(), encoding="utf-8")
points = results[0].to_arrow()
write_csv(points, "bench-points.csv", {"theta": "θ", "cost": "tokens", "rel_cost": "fraction",
                                       "acc": "fraction", "frontier_acc": "fraction",
                                       "gap": "fraction"})
print(f"wrote {args.out / 'leaderboard.md'}, {args.out / 'leaderboard.csv'}")
