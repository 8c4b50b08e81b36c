"""Shared test configuration: deterministic hypothesis, strict JAX numerics."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Surface silent broadcasting in kernels as errors (STYLE.md).
jax.config.update("jax_numpy_rank_promotion", "raise")

settings.register_profile(
    "otbench",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("OTBENCH_HYPOTHESIS_PROFILE", "otbench"))
