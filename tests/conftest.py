"""Shared test configuration: deterministic hypothesis, strict JAX numerics."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Surface silent broadcasting in kernels as errors (STYLE.md).
jax.config.update("jax_numpy_rank_promotion", "raise")
# Mixed dtypes must be promoted on purpose (diffrax runs its suite the same way): an int32
# count meeting a float64 weight, or uint64 meeting int64, is an error, not a silent cast.
jax.config.update("jax_numpy_dtype_promotion", "strict")

settings.register_profile(
    "otbench",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("OTBENCH_HYPOTHESIS_PROFILE", "otbench"))


@pytest.fixture
def cli():
    """Run the `otbench` CLI in-process: `cli("metrics", path)` -> click `Result` (stderr apart)."""
    from click.testing import CliRunner

    from otbench.cli import main

    runner = CliRunner()
    return lambda *args: runner.invoke(main, [str(a) for a in args])


@pytest.fixture(scope="session")
def tiny_set_dir(tmp_path_factory):
    """A saved synthetic tiny set (seed 0) shared by the session's tests; treat it as read-only."""
    from otbench.analysis.measurement import save, simulate

    path = tmp_path_factory.mktemp("tiny") / "set"
    save(simulate("tiny", seed=0), path)
    return path


@pytest.fixture(autouse=True)
def _restore_library_log_levels():
    """`otbench` quiets library loggers process-wide (cli/_common.configure_output); in-process
    CLI tests must not leave them quiet for the tests that follow (e.g. jax.log_compiles)."""
    import logging

    names = ("vllm", "transformers", "torch", "ray", "jax", "absl", "orbax", "numba", "urllib3",
             "filelock", "datasets", "huggingface_hub")
    levels = {n: logging.getLogger(n).level for n in names}
    yield
    for n, level in levels.items():
        logging.getLogger(n).setLevel(level)
