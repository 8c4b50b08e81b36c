"""Shared test configuration: deterministic hypothesis, strict JAX numerics."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# vLLM on the CPU starts an engine in three processes: this one, a spawned engine core and,
# from there, a spawned worker; each spawn re-imports torch and vLLM (about 30 s of a 50 s
# start on two cores, and the close waits 5 s more), and every such worker pins its one
# OpenMP thread to core 0, so two test workers' engines share one core. The suite runs vLLM's
# single-process mode instead (vLLM's own switch; the same `LLM` API, the same tokens: the
# served and in-process sets still compare equal) and one thread per test worker, read by
# torch and the BLAS at import. A later engine start in a test worker then takes about 3 s.
# Served engines (`vllm serve`) keep their engine-core process. The spawned path stays run:
# tests/test_benchmarks_online.py runs the online benchmark, whose engine loads a logits
# processor across the spawn, with vLLM's multiprocessing on.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402
from _fast_tier import (FAST_EXAMPLES, FAST_TIER, cap_examples, in_tier,  # noqa: E402
                        loaded_library_modules, repo_path, tier_line, untouched)
from _library import library_files  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Surface silent broadcasting in kernels as errors (STYLE.md).
jax.config.update("jax_numpy_rank_promotion", "raise")
# Mixed dtypes must be promoted on purpose (diffrax runs its suite the same way): an int32
# count meeting a float64 weight, or uint64 meeting int64, is an error, not a silent cast.
jax.config.update("jax_numpy_dtype_promotion", "strict")


def pytest_configure(config):
    """otbench's cache folder for the whole run, and JAX's persistent compilation cache in pytest's own cache folder (`.pytest_cache`, cleared by
    `pytest --cache-clear`), shared by the test workers and the subprocesses they start (CLIs,
    benchmarks: the environment carries it). Most of an analysis test's time is XLA compiling its
    kernels (tests/analysis/overthinking/test_metrics.py: 66 s cold, 24 s warm on two cores); an
    entry is keyed by the program, the JAX version and the flags, so a hit is the same executable.
    No size cap: JAX's capped (least-recently-used) mode fails on entries an uncapped run wrote.

    otbench's cache (`$OTBENCH_CACHE`: the converted embedded model, fingerprint memos, the
    ledger key) is one folder beside it, never the user's: the embedded model is converted once
    for the run and kept for the next (~30 s a conversion on two cores), not once per worker and
    again in the user's cache for every CLI a test starts. Workers inherit the folder the
    controlling process chose. xdist schedules no test before every worker has started, so a
    worker's `--cache-clear` cannot remove what another worker is writing."""
    if _fast(config) and "OTBENCH_HYPOTHESIS_PROFILE" not in os.environ:
        settings.load_profile("fast")
    config._otbench_loaded = set()                    # library modules the test processes loaded
    cache = getattr(config, "cache", None)            # absent under `-p no:cacheprovider`
    if not hasattr(config, "workerinput"):
        import tempfile
        os.environ["OTBENCH_CACHE"] = str(cache.mkdir("otbench-cache") if cache is not None
                                          else tempfile.mkdtemp(prefix="otbench-test-cache-"))
    if cache is None:
        return
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(cache.mkdir("jax-compilation-cache")))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs",
                      float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))


settings.register_profile(
    "otbench",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The quick tier's budget (`make test-fast`, tests/_fast_tier.py): the same settings, fewer examples.
settings.register_profile("fast", settings.get_profile("otbench"), max_examples=FAST_EXAMPLES)
settings.load_profile(os.environ.get("OTBENCH_HYPOTHESIS_PROFILE", "otbench"))


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true", default=False,
                     help="run only the quick tier (tests/_fast_tier.py; `make test-fast`)")


def _fast(config) -> bool:
    return bool(config.getoption("fast", default=False))

# The suite runs on parallel workers that take one file at a time (`make test`: pytest-xdist,
# --dist loadfile, in collection order). The files that start real engines or servers take
# minutes each; handed out first, they run beside the many short files instead of leaving one
# worker alone at the end. Measured with --durations on two cores; any order is correct.
HEAVY_FIRST = (
    "tests/test_benchmarks_online.py",
    "tests/test_benchmarks_horizon.py",
    "tests/probe/plan/test_plan_calibration_bench.py",
    "tests/test_benchmarks_probe.py",
    "tests/test_benchmarks_probe_batch.py",
    "tests/test_attacks.py",
    "tests/test_benchmarks.py",
    "tests/probe/engines/test_openai_server.py",
    "tests/probe/stp/test_probe_imported.py",
    "tests/probe/online/test_online_sidereq_vllm.py",
    "tests/probe/online/test_online_vllm.py",
    "tests/probe/engines/test_probe_engines.py",
    "tests/probe/stp/test_oneline.py",
    "tests/test_tracking.py",
    "tests/probe/online/test_online_server.py",
    "tests/probe/online/test_own_context_margin.py",
    "tests/probe/stp/test_probe_ray.py",
    "tests/test_lm_eval_logs.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(HEAVY_FIRST)}
    root = config.rootpath

    def key(item):
        rel = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        return rank.get(rel, len(rank))

    items.sort(key=key)       # stable: within a file, and among the other files, the order stays
    if _fast(config):
        _select_fast_tier(config, items, root)


def pytest_ignore_collect(collection_path, config):
    """The quick tier does not import the files it does not run (their imports alone, torch and
    vLLM among them, take a minute on two cores)."""
    if _fast(config) and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return repo_path(config.rootpath, collection_path) not in FAST_TIER or None
    return None


def _select_fast_tier(config, items, root):
    """Keep the quick tier's tests; a property that sets its own budget runs at most
    FAST_EXAMPLES examples there too (hypothesis reads the settings when the test runs)."""
    keep, drop = [], []
    for item in items:
        rel = repo_path(root, item.path)
        (keep if in_tier(rel + "::" + item.nodeid.partition("::")[2]) else drop).append(item)
    for item in keep:
        cap_examples(getattr(item, "obj", None))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist: a worker's library modules come back in its `workeroutput`."""
    node.config._otbench_loaded.update(getattr(node, "workeroutput", {}).get("otbench_modules", ()))


def pytest_sessionfinish(session, exitstatus):
    """A whole quick-tier run fails if some library module was loaded by none of its test
    processes (tests/_fast_tier.py): the tier's promise that every module is touched."""
    config = session.config
    if not _fast(config):
        return
    loaded = loaded_library_modules(sys.modules)
    if hasattr(config, "workerinput"):
        config.workeroutput["otbench_modules"] = sorted(loaded)
        return
    whole = (config.args_source == pytest.Config.ArgsSource.TESTPATHS
             and not config.option.keyword and not config.option.markexpr)
    if not whole or exitstatus != 0:
        return
    missing = untouched(set(library_files()), loaded | config._otbench_loaded)
    if missing:
        config.pluginmanager.get_plugin("terminalreporter").write_line(tier_line(missing), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
