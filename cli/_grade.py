"""`otbench grade`: grade a JSONL file of responses with the probe's grader (docs/rules.md)."""

import os

import click

from ._common import DataError, write_json
from ._numbers import Count

_KEYS = {"task", "reference", "response", "tests", "fn_name", "n_options"}


def read_requests(path: str) -> list[tuple[int, object]]:
    """(line number from 1, GradeRequest) per non-blank line; a bad line raises `DataError`."""
    from otbench.analysis.measurement import MeasurementSetError
    from otbench.probe.grading import make_request

    from otbench.files import loads_json, open_regular

    out = []
    # `open_regular`: a FIFO or device named as FILE is one line, not a hang or endless read.
    with open_regular(path, what="a JSONL file", fail=lambda why: DataError(f"{path}: {why}")) as f:
        for no, raw in enumerate(f, 1):
            where = f"{path}:{no}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{where}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                row = loads_json(line, where)
            except MeasurementSetError as e:
                raise DataError(str(e)) from None
            if not isinstance(row, dict):
                raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
            unknown = sorted(set(row) - _KEYS)
            if unknown:
                raise DataError(f"{where}: unknown key {unknown[0]!r} "
                                f"(allowed: {', '.join(sorted(_KEYS))})")
            for key in ("task", "response"):
                if key not in row:
                    raise DataError(f"{where}: missing key {key!r}")
            if row["task"] != "code" and "reference" not in row:
                raise DataError(f"{where}: missing key 'reference'")
            if row["task"] == "code" and "tests" not in row:
                raise DataError(f"{where}: missing key 'tests' (code responses need tests)")
            try:
                req = make_request(row["task"], row.get("reference", ""), row["response"],
                                   tests=row.get("tests"), fn_name=row.get("fn_name"),
                                   n_options=row.get("n_options", 4))
            except ValueError as e:
                raise DataError(f"{where}: {e}") from None
            out.append((no, req))
    if not out:
        raise DataError(f"{path}: no responses to grade")
    return out


@click.command("grade")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "json_out", type=click.Path(dir_okay=False),
              help="Also write the results as JSON (schema otbench.grade/1) to this file.")
@click.option("--workers", type=Count(min=0), default=None,
              help="Grading worker processes (default: CPU count, at most 8; 0 = in-process).")
def grade_cmd(file: str, json_out: str | None, workers: int | None) -> None:
    """Grade responses in FILE (JSONL) and print correctness and status per line.

    Each line: {"task": "math"|"choice"|"code", "reference": str, "response": str,
    "tests": [{"input": str, "output": str}, ...]}. `tests` is for code only
    (stdin -> expected stdout, trailing whitespace of each line ignored);
    `reference` is unused for code. Optional: "fn_name" (functional code
    tests), "n_options" (choice, default 4). Only the text after the thinking
    is graded. Lines are numbered from 1; a bad line stops everything with
    `FILE:LINE: rule` and exit status 2. Anything but a verified correct answer
    is wrong; the status says why.
    """
    from otbench.probe.grading import Grader, Status

    reqs = read_requests(file)
    if workers is None:
        workers = min(os.cpu_count() or 1, 8, len(reqs))
    with Grader(workers) as g:
        grades = g.grade_many([r for _, r in reqs])
    width = len(str(reqs[-1][0]))
    for (no, _), gr in zip(reqs, grades):
        mark = "correct" if gr.correct else "wrong"
        click.echo(f"{no:>{width}}  {mark:<7}  {gr.status.value:<15}  {gr.detail}".rstrip())
    n_ok = sum(gr.correct for gr in grades)
    click.echo(f"{n_ok} of {len(grades)} correct")
    sandbox = [gr.detail for gr in grades if gr.status is Status.SANDBOX_ERROR]
    if sandbox:
        click.echo(f"warning: {len(sandbox)} code responses were not run: {sandbox[0]}", err=True)
    if json_out:
        write_json({"schema": "otbench.grade/1",
                    "results": [{"line": no, "correct": bool(gr.correct), "status": gr.status.value}
                                for (no, _), gr in zip(reqs, grades)]}, json_out)
