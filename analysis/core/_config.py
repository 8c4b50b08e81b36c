"""The one place that configures JAX for otbench.

otbench's kernels count in 64-bit integers: uint64 counter-based random
streams, int64 fixed-point bootstrap sums, int64 token budgets and rewards
of the frontier DP. They need JAX's x64 mode, which is a process-wide
switch. It is turned on here, and only here, when the first JAX-using
subpackage of `otbench.analysis` is imported (`overthinking`, `frontier`,
`resampling`, `bench`, `horizon`, `report`). Importing `otbench`,
`otbench.analysis`, `otbench.analysis.measurement` or `otbench.probe` leaves
JAX unimported and its settings untouched (tests pin this).

Why global rather than scoped to each entry point: results leave otbench as
JAX arrays of int64/uint64 dtype and are also fed back in (frontier
replicates, bootstrap state); a per-call scope would hand users 64-bit arrays
that their own x32 code silently truncates, and every internal helper called
directly would need the scope too. The reports guide says so (docs/guides/reports.md, "JAX settings").
"""

import jax

jax.config.update("jax_enable_x64", True)


def use_cpu_only() -> None:
    """Restrict this process to JAX's CPU backend (worker processes of the frontier pipeline)."""
    jax.config.update("jax_platforms", "cpu")
