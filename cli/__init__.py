"""The `otbench` command line: thin click commands over otbench.analysis / otbench.probe."""

import importlib

import click

from otbench import __version__

from ._common import GuardedGroup
from ._outputs import guard_outputs

# Each command lives in its own private module and is registered here; the
# modules import their libraries lazily so `otbench --help` stays fast.
_COMMANDS = {
    "_data": ("import_cmd", "export_cmd", "validate_cmd"),
    "_simulate": ("simulate_cmd",),
    "_metrics": ("metrics_cmd",),
    "_frontier": ("frontier_cmd",),
    "_effort": ("effort_cmd",),
    "_grade": ("grade_cmd",),
    "_bench": ("split_cmd", "bench_cmd"),
    "_report": ("report_cmd",),
    "_view": ("view_cmd",),
    "_probe": ("probe_group",),
    "_bootstrap": ("bootstrap_cmd",),
    "_thinning": ("thinning_cmd", "sweep_cmd"),
    "_horizon": ("horizon_group",),
    "_demo": ("demo_cmd",),
    "_plan": ("plan_cmd",),
    "_online": ("online_group",),
    "_audit": ("audit_cmd",),
}


@click.group(cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]})
# The version of the code that runs (otbench/__init__.py), the one provenance records; the
# installed metadata of an editable checkout can be older.
@click.version_option(__version__, prog_name="otbench")
@click.option("-v", "--verbose", is_flag=True,
              help="Show third-party warnings and library log messages (hidden by default).")
def main(verbose: bool) -> None:
    """otbench: measure overthinking in reasoning models and the oracle
    frontiers of termination strategies (see README.md)."""
    from ._common import configure_output

    configure_output(verbose)


for _mod, _names in _COMMANDS.items():
    _m = importlib.import_module(f"{__name__}.{_mod}")
    for _name in _names:
        main.add_command(getattr(_m, _name))

guard_outputs(main)      # one output rule for every command (outputs never on inputs)
