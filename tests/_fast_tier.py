"""The quick tier (`make test-fast`, `pytest --fast`): the tests it runs and its coverage rule.

A chosen tier, not a filter: no engine start, no server, no benchmark smoke, and property
tests under a small example budget, yet every library module is imported by some test of
the tier. tests/conftest.py selects the tests below and, at the end of a whole-tier run,
fails the run if a library module was never loaded in any of its test processes (the
module names each process had in `sys.modules`; a module only a subprocess loaded does not
count). The exceptions are named below with their reasons: child programs, which no test
process can import, and modules whose every test starts an engine today (pending).
tests/test_fast_tier.py checks the rule itself and that every entry still names a test.

An entry is a test file and either `None` (every test in it) or the names of the tests to
run (the test function, or `Class::test`, without parameters: every parametrization runs).
"""

from collections.abc import Iterable
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
    "tests/test_layout_method_names.py": None,
    "tests/test_layout_graph.py": None,
    "tests/test_fast_tier.py": None,
    "tests/test_entry_points.py": (
        "test_an_installed_method_is_listed_and_resolved_like_a_registered_one",
        "test_a_server_loads_an_installed_method_only_when_listed",
        "test_an_installed_grader_joins_the_grader_registry",
        "test_a_bad_entry_point_is_one_line_naming_the_distribution",
        "test_two_distributions_may_not_declare_one_name_with_two_targets"),
    "tests/probe/grading/test_deepconf.py": ("test_vllm_top_means_read_both_logprob_forms",
                                             "test_openai_top_means"),
    "tests/probe/engines/test_openai_client.py": (
        "test_base_url_forms", "test_generation_body_sends_every_sampling_field",
        "test_logprob_body_and_signal", "test_completions_strip_the_stop_id_like_the_in_process_engine",
        "test_the_engine_refuses_without_base_url_or_key", "test_probe_text_covers_the_hard_cases"),
    "tests/probe/online/test_online_v2.py": (
        "test_no_device_read_without_a_live_control", "test_one_read_per_step_and_none_once_the_control_is_done",
        "test_a_boundary_stop_forces_the_thinking_end_and_the_public_class_runs_v2"),
    "tests/probe/plan/test_plan.py": ("test_offline_hub_data_fails_fast_in_one_line",),
    "tests/analysis/horizon/test_audit_log.py": ("test_audit_of_an_inspect_mock_log_counts_the_length_limit",),
    "tests/analysis/measurement/test_hub.py": ("test_the_folder_is_a_set_with_the_original_hash",),
    "tests/probe/online/test_certify_cap.py": ("test_the_transformers_engine_refuses_a_budget",),
    "tests/probe/stp/test_model_fingerprint.py": None,
}


# Library modules no process of the tier can load, each with the reason; the coverage rule
# leaves them out, and fails if one of them was loaded after all (then remove it here).
# Child programs are started by name, never imported (tests/test_fast_tier.py checks both).
CHILD_PROGRAMS = {
    "otbench.probe.grading._deadline_child": "started as `python -m` by grading/_deadline.py",
    "otbench.probe.grading._sandbox_harness": "a file the code sandbox executes (grading/_sandbox.py)",
}
# Pending: a module whose every test starts an engine today; a tier test is still owed.
PENDING = {
    "otbench.probe.horizon._stp": "its tests read an engine's vocabulary (the hf_engine fixture)",
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


def untouched(library: set[str], loaded: set[str],
              exempt: Iterable[str] = (*CHILD_PROGRAMS, *PENDING)) -> list[str]:
    """The library modules no test process of the tier loaded, sorted; an exempt module that
    was loaded is listed too (its entry is stale)."""
    exempt = set(exempt)
    return sorted((library - loaded - exempt) | (exempt & loaded))


def loaded_library_modules(modules) -> set[str]:
    return {m for m in modules if m == "otbench" or m.startswith("otbench.")}


def tier_line(missing: list[str]) -> str:
    return (f"quick tier: {len(missing)} library module(s) no test of the tier imported, or "
            f"listed as unreachable yet loaded (tests/_fast_tier.py): {', '.join(missing)}")


def repo_path(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else ""
