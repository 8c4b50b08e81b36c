"""Run the CLI in-process and check the one-line error contract."""

import json

from _sets import build_set
from click.testing import CliRunner
from otbench.cli import main


def cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result, *needles: str) -> str:
    """Assert exit 2 with the error as one line (the last on stderr; progress lines of long
    commands such as `report:` come before it) containing every needle; return it."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.output and lines, result.output
    assert all(ln.startswith("report: ") for ln in lines[:-1]), lines
    err = lines[-1]
    for n in needles:
        assert n in err, (n, err)
    return err


def small_set(synthetic=False):
    return build_set([
        ("m", "g", "q0", 0, 2, [0, 5, 9], [0, 1, 2], 1),
        ("m", "g", "q0", 1, 2, [0, 4], [0, 0], 0),
        ("m", "g", "q1", 0, 2, [0, 3, 8], [0, 2, 2], 1),
        ("m", "g", "q1", 1, 2, [0, 6], [1, 1], 0),
    ], synthetic=synthetic)


def write_jsonl(path, ms_or_recs):
    from otbench.analysis.measurement import export_jsonl
    if isinstance(ms_or_recs, list):
        path.write_text("".join(json.dumps(r) + "\n" for r in ms_or_recs))
    else:
        export_jsonl(ms_or_recs, path)
    return path
