"""The quick tier (`make test-fast`, `pytest --fast`): the tests it runs and its coverage rule.

A chosen tier, not a filter: no engine start, no server, no benchmark smoke, and property
tests under a small example budget, yet every library module is imported by some test of
the tier. tests/conftest.py selects the tests below and, at the end of a whole-tier run,
fails the run if a library module was never loaded in any of its test processes (the
module names each process had in `sys.modules`; a module only a subprocess loaded does not
count). tests/test_fast_tier.py checks the rule itself and that every entry still names a
test.

An entry is a test file and either `None` (every test in it) or the names of the tests to
run (the test function, or `Class::test`, without parameters: every parametrization runs).
"""

from pathlib import Path

# Each hypothesis property runs at most this many examples in the tier (the profile "fast" in
# tests/conftest.py, and a cap on the properties that set their own budget).
FAST_EXAMPLES = 10

FAST_TIER: dict[str, tuple[str, ...] | None] = {
    "tests/analysis/core/test_random.py": None,
    "tests/analysis/frontier/test_host_dp.py": None,
    "tests/analysis/frontier/test_cpu_kernels.py": None,
    "tests/analysis/measurement/test_bad_sets.py": None,
    "tests/analysis/measurement/test_libm.py": None,
    "tests/analysis/measurement/test_segment.py": None,
    "tests/analysis/measurement/test_tidy.py": None,
    "tests/analysis/measurement/test_dataframe_readers.py": None,
    "tests/analysis/overthinking/test_accuracy_reason.py": None,
    "tests/analysis/overthinking/test_edge_flags.py": None,
    "tests/analysis/overthinking/test_metrics_result.py": None,
    "tests/analysis/horizon/test_horizon_exact.py": None,
    "tests/analysis/horizon/test_horizon_nested.py": None,
    "tests/analysis/bench/test_areas_floor.py": None,
    "tests/analysis/bench/test_leaderboard_intervals.py": None,
    "tests/analysis/bench/test_otbench_methods.py": None,
    "tests/analysis/report/test_report_tables.py": None,
    "tests/analysis/resampling/test_checkpoint_guard.py": None,
    "tests/files/test_atomic.py": None,
    "tests/files/test_csv.py": None,
    "tests/files/test_json.py": None,
    "tests/files/test_output_rule.py": None,
    "tests/files/test_read_regular.py": None,
    "tests/files/test_safe_replace.py": None,
    "tests/probe/config/test_artifacts.py": None,
    "tests/probe/config/test_seeds.py": None,
    "tests/probe/data/test_datasets.py": None,
    "tests/probe/data/test_hostile_benchmark_files.py": None,
    "tests/probe/grading/test_field_signals.py": None,
    "tests/probe/grading/test_frames.py": None,
    "tests/probe/grading/test_grading_choice.py": None,
    "tests/probe/grading/test_grading_math.py": None,
    "tests/probe/grading/test_hostile_answers.py": None,
    "tests/probe/tokens/test_probe_ids.py": None,
    "tests/probe/tokens/test_segment_vocab.py": None,
    "tests/probe/stp/test_compact_ids.py": None,
    "tests/probe/stp/test_probe_stream.py": (
        "test_qwen_split_at_the_marker", "test_thinking_limit_is_applied_as_a_separate_request_would",
        "test_harmony_keeps_every_analysis_message", "test_generic_family_reply_is_the_trajectory",
        "test_streaming_tables_equal_the_in_memory_ones", "test_a_failed_parquet_write_is_raised_not_hung",
        "test_open_grader_keeps_one_pool_and_grades_the_same"),
    "tests/probe/stp/test_background_worker.py": None,
    "tests/probe/online/test_certify_interval.py": None,
    "tests/probe/online/test_online_certify.py": None,
    "tests/probe/online/test_online_own_probes.py": None,
    "tests/probe/online/test_online_sidereq.py": None,
    "tests/cli/test_special_files.py": None,
    "tests/test_cli_errors.py": None,
    "tests/test_layout.py": None,
    "tests/test_layout_method_names.py": None,
}


def tier_key(nodeid: str) -> tuple[str, str]:
    """`tests/x.py::C::test_y[3]` -> (`tests/x.py`, `C::test_y`)."""
    path, _, rest = nodeid.partition("::")
    return path, rest.split("[", 1)[0]


def in_tier(nodeid: str, tier: dict[str, tuple[str, ...] | None] = FAST_TIER) -> bool:
    path, name = tier_key(nodeid)
    if path not in tier:
        return False
    names = tier[path]
    return names is None or name in names


def cap_examples(fn, limit: int = FAST_EXAMPLES) -> bool:
    """Run the hypothesis property `fn` at most `limit` examples (its own settings otherwise
    kept); hypothesis reads them when the test runs. False for anything else, or already within."""
    from hypothesis import settings

    own = getattr(fn, "_hypothesis_internal_use_settings", None)
    if own is None or own.max_examples <= limit:
        return False
    fn._hypothesis_internal_use_settings = settings(own, max_examples=limit)
    return True


def untouched(library: set[str], loaded: set[str]) -> list[str]:
    """The library modules no test process of the tier loaded, sorted."""
    return sorted(library - loaded)


def loaded_library_modules(modules) -> set[str]:
    return {m for m in modules if m == "otbench" or m.startswith("otbench.")}


def tier_line(missing: list[str]) -> str:
    return (f"quick tier: {len(missing)} library module(s) no test of the tier imported "
            f"(add a test to FAST_TIER in tests/_fast_tier.py): {', '.join(missing)}")


def repo_path(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else ""
