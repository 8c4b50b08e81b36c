"""Memory and time of the resampling calls, estimated from their arguments.

Each model is linear in the argument a user types and was measured on the
simulated sets (peak resident growth, `resource.getrusage`), then rounded
up; `otbench.resources.check_budget` refuses a call that does not fit
before its first allocation, naming the largest value that does.
"""

from otbench.analysis.frontier import state_bytes

from otbench.resources import check_budget

DRAW_CELL_BYTES = 96
"""Bytes per (draw, level, cell) of trajectory thinning: the int64 cell sums and their
float64 copies of two metrics; measured 64 B on 4 cells, 55 on 12
(`thinning(ms, probes=[], draws=100_000)`), rounded up."""
DRAW_LEVEL_BYTES = 64
"""Bytes per (draw, level): the macro values and the model and group means."""
DRAW_ROW_OPS = 10
"""Element operations per (draw, level, trajectory) of the selection kernel (measured
about 8 ns each on one core on the small simulated set)."""

REPLICATE_CELL_BYTES = 600
"""Bytes per (replicate, cell) of the bootstrap: the int64 sums of five metrics, the count,
and the float64 summaries and percentiles of the result; measured 367 B on 4 cells and
497 on 12 (`bootstrap(ms, replicates=40_000, batch=1_000).to_json()`), rounded up."""
BATCH_ROW_BYTES = 32
"""Bytes per (replicate in flight, trajectory) of the replicate kernel: its draw indices and
weights; measured 4-11 B (and a 26 B allocation refused by JAX), rounded up."""
BATCH_BYTES = 256
REPLICATE_ROW_OPS = 20
"""Element operations per (replicate, trajectory): the two-stage draw and five metric sums."""


def check_draws_budget(cells: int, levels: int, rows: int, draws: int) -> None:
    """Refuse, before any allocation, `draws` whose draw tables or selection work do not fit."""
    check_budget(f"trajectory thinning of {cells} cells at {levels} levels", "`draws`", draws,
                 per_unit=levels * (DRAW_CELL_BYTES * cells + DRAW_LEVEL_BYTES),
                 per_unit_ops=levels * rows * DRAW_ROW_OPS, unit="draw")


def check_bootstrap_budget(ms, replicates: int, batch: int, frontiers: bool, grid: int,
                           strategies: int = 3) -> None:
    """Refuse, before any allocation, `replicates` and `batch` whose arrays do not fit.

    The stored replicates take `replicates * per replicate` bytes (with frontiers also the
    `[strategy, cell, grid]` rewards); a batch in flight takes `batch * per replicate in
    flight` (the kernel's draws, with frontiers the DP state of the largest cell). The batch
    is checked alone first, then each argument with the other's share as the fixed part, so
    the message names the largest value of the argument that broke the budget.
    """
    cells, rows = ms.num_cells, ms.num_trajectories
    per_rep = cells * (REPLICATE_CELL_BYTES + (16 * (strategies * (grid + 1) + 3) if frontiers else 0))
    per_batch = BATCH_ROW_BYTES * rows + BATCH_BYTES + (
        strategies * state_bytes(ms)[0] if frontiers else 0)
    what = f"bootstrap of {cells} cells, {rows:,} trajectories" + (
        f", frontiers at {grid} budgets" if frontiers else "")
    check_budget(what, "`batch`", batch, per_unit=per_batch, unit="replicate in flight",
                 advice="results never depend on the batch")
    check_budget(what, "`replicates`", replicates, per_unit=per_rep, fixed=per_batch * batch,
                 per_unit_ops=REPLICATE_ROW_OPS * rows, unit="replicate")
    check_budget(what, "`batch`", batch, per_unit=per_batch, fixed=per_rep * replicates,
                 unit="replicate in flight")
