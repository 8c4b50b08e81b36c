"""The one output rule for every command: outputs never on inputs, nothing replaced that
otbench did not write without `--overwrite` (`otbench.files.output_rules`)."""

import click

from ._common import data_errors

OUTPUT_OPTIONS = frozenset({"out", "out_dir", "json_out", "pareto_out", "board_out",
                            "write_file", "write_job", "checkpoint_dir", "journal", "hub_dir"})
"""The parameter names of the commands' outputs; every other path parameter is an input."""
_STATE_OPTIONS = frozenset({"checkpoint_dir", "journal"})   # a run's own state, resumed from


def guard_outputs(group: click.Group) -> None:
    """The one output rule for every command of `group` (`otbench.files.output_rules`).

    Each command with an output option gets `--overwrite` (if it has none),
    and runs with its path arguments protected as inputs: no output lands on
    or inside an input, and no existing file otbench did not write is
    replaced without `--overwrite`, and no two outputs of one command are the same
    file. File outputs are checked before the work
    starts, so a refusal costs nothing; the writers check again when they write.
    """
    import functools

    for cmd in list(group.commands.values()):
        if isinstance(cmd, click.Group):
            guard_outputs(cmd)
            continue
        outs = [p for p in cmd.params if p.name in OUTPUT_OPTIONS]
        if not outs or getattr(cmd.callback, "_otbench_guarded", False):
            continue
        added = "overwrite" not in {p.name for p in cmd.params}
        if added:
            cmd.params.append(click.Option(
                ["--overwrite"], is_flag=True,
                help="Replace existing output files that otbench did not write (a folder output "
                     "keeps its other files); outputs never land on an input."))

        @functools.wraps(cmd.callback)
        def run(*args, _cb=cmd.callback, _added=added, **kwargs):
            from otbench.files import check_output, output_rules, refuse_input, refuse_same_output

            ctx = click.get_current_context()
            overwrite = bool(kwargs.pop("overwrite") if _added else kwargs.get("overwrite"))
            inputs, outputs = [], []
            for p in ctx.command.params:
                if not isinstance(p.type, click.Path) or ctx.params.get(p.name) is None:
                    continue
                values = ctx.params[p.name]
                values = list(values) if isinstance(values, (tuple, list)) else [values]
                (outputs if p.name in OUTPUT_OPTIONS else inputs).extend(
                    (p, v) for v in values if v is not None)
            inputs = [v for _, v in inputs]
            with data_errors():
                refuse_same_output(*(v for _, v in outputs))
                for p, v in outputs:
                    refuse_input(v, *inputs)
                    if p.name not in _STATE_OPTIONS and not p.type.dir_okay:
                        check_output(v, *inputs, overwrite=overwrite)
                with output_rules(inputs=inputs, overwrite=overwrite):
                    return _cb(*args, **kwargs)

        run._otbench_guarded = True
        cmd.callback = run
