"""One numbering of the report's figures and tables, shared by file names, captions and hints.

Every figure and table has a fixed number: its position in the full report
(every section present), so "Figure 5" is the same figure in its file name
(``figures/fig5_frontier_bands.png``), its caption, the hint that says how
to get it when its input is missing, and ``report.json`` -- whether or not
the figures before it were drawn. The sections name their items by a key
(`FIGURES`, `TABLES`), the file name without its number.
"""

# the keys the sections use (also the file-name slugs), in page order
FIGURES = (
    "overthinking",
    "baselines",
    "local_changes",
    "frontiers",
    "frontier_bands",
    "otbench",
    "sensitivity",
    "stp_examples",
    "question_trajectories",
    "step_lengths",
    "horizon_accuracy",
    "horizon_contrast",
    "horizon_strata",
)
TABLES = (
    "or",
    "ad",
    "full_acc",
    "tokens",
    "endpoint_acc",
    "zero_step",
    "pairwise_or",
    "pairwise_ad",
    "or_ci",
    "ad_ci",
    "full_acc_ci",
    "tokens_ci",
    "endpoint_acc_ci",
    "zero_step_ci",
    "pairwise_or_ci",
    "pairwise_ad_ci",
    "local_changes",
    "frontiers",
    "otbench",
    "thinning_probes",
    "thinning_trajectories",
    "step_lengths",
    "horizon_calibration",
    "horizon_contrasts",
    "horizon_strata",
    "horizon_sensitivity",
    "horizon_diagonal",
    "horizon_lengths",
    "cost",
    "effort",
)
_FIG = {k: (i + 1, k) for i, k in enumerate(FIGURES)}
_TAB = {k: (i + 1, k) for i, k in enumerate(TABLES)}


def _entry(table: dict, key: str, what: str) -> tuple[int, str]:
    if key not in table:        # a new item must be placed in the numbering first
        raise KeyError(f"report {what} {key!r} has no number; add it to "
                       f"otbench.analysis.report._numbering")
    return table[key]


def figure_number(key: str) -> int:
    return _entry(_FIG, key, "figure")[0]


def table_number(key: str) -> int:
    return _entry(_TAB, key, "table")[0]


def figure_file(key: str) -> str:
    """The file stem: ``fig<N>_<slug>`` (``figures/<stem>.png``)."""
    n, slug = _entry(_FIG, key, "figure")
    return f"fig{n}_{slug}"


def table_file(key: str) -> str:
    """The file stem: ``table<N>_<slug>`` (``tables/<stem>.csv`` and ``.tex``)."""
    n, slug = _entry(_TAB, key, "table")
    return f"table{n}_{slug}"


def figure_label(key: str) -> str:
    return f"Figure {figure_number(key)}"


def tables_label(*keys: str) -> str:
    """"Table 4", or "Tables 9–13" for a consecutive run (in the order given)."""
    nums = [table_number(k) for k in keys]
    if len(nums) == 1:
        return f"Table {nums[0]}"
    if nums == list(range(nums[0], nums[0] + len(nums))):
        return f"Tables {nums[0]}–{nums[-1]}"
    return "Tables " + ", ".join(str(n) for n in nums)


def number_of(stem: str) -> tuple[str, int]:
    """("figure" | "table", N) from a file stem written by `figure_file` / `table_file`."""
    kind = "figure" if stem.startswith("fig") and not stem.startswith("figure") else "table"
    digits = stem[3:] if kind == "figure" else stem[5:]
    return kind, int(digits.split("_", 1)[0])
