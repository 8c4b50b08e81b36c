"""The report's effort table: `results/effort.json` (`otbench effort`) beside the set, when it is the set's."""

import csv
import json
from pathlib import Path

from otbench.analysis.effort import effort_map, render
from otbench.analysis.measurement import content_hash, save, simulate
from otbench.analysis.report import write_report
from otbench.analysis.report._effort import read_effort


def test_the_effort_table_shows_the_map(tmp_path: Path):
    d = tmp_path / "set"
    ms = simulate("tiny", 0)
    save(ms, d)
    em = effort_map(ms, "low=3,high=1", replicates=30, seed=2, oracle=False)
    (d / "results").mkdir()
    (d / "results" / "effort.json").write_text(render(em, "json"))
    index = write_report(d, tmp_path / "r", grid=11)
    man = json.loads((tmp_path / "r" / "report.json").read_text())
    name = next(t["name"] for t in man["tables"] if t["name"].endswith("_effort"))
    rows = list(csv.reader(ln for ln in (tmp_path / "r" / "tables" / f"{name}.csv").open()
                           if not ln.startswith("#")))
    assert rows[0][:5] == ["model", "group (benchmark)", "level (name)", "delta (pp)", "budget (tokens)"]
    assert all("(" in h for h in rows[0][1:])              # every number names its unit
    body = {(r[0], r[1], r[2]): r for r in rows[1:]}
    assert len(body) == 2 * len(em.cells)
    for c in em.cells:
        for x in c.levels:
            got = body[(c.model, c.group, x.level)][4]
            assert got == ("" if x.budget is None else str(x.budget))
    assert "Effort levels" in index.read_text()


def test_another_sets_map_is_a_note(tmp_path: Path):
    ms = simulate("tiny", 0)
    (tmp_path / "results").mkdir()
    doc = json.loads(render(effort_map(ms, "low=3", replicates=10, seed=0, oracle=False), "json"))
    (tmp_path / "results" / "effort.json").write_text(json.dumps({**doc, "content_hash": "0" * 64}))
    got, why = read_effort(tmp_path, content_hash(ms))
    assert got is None and "another set" in why
    (tmp_path / "results" / "effort.json").write_text("{not json")
    assert read_effort(tmp_path, content_hash(ms))[0] is None
    assert read_effort(tmp_path / "nowhere", content_hash(ms)) == (None, None)


def test_a_result_beside_the_set_is_read_through_the_guarded_reader(tmp_path):
    """The effort and horizon sections share one reader: absent is no section, a FIFO or a file
    over the bound is a one-line note, never a wait or a whole read."""
    import os

    from otbench.analysis.report._horizon import read_document
    from otbench.analysis.report._inputs import result_beside

    (tmp_path / "results").mkdir()
    assert result_beside(tmp_path, "horizon.json") == (None, None)
    os.mkfifo(tmp_path / "results" / "horizon.json")
    assert read_document(tmp_path) == (None, None)        # not a regular file: nothing to show
    (tmp_path / "results" / "horizon.json").unlink()
    (tmp_path / "results" / "horizon.json").write_text('{"schema": "x", "pad": "' + "a" * 100 + '"}')
    doc, note = result_beside(tmp_path, "horizon.json", limit=50)
    assert doc is None and note.startswith("horizon.json: ") and note.endswith("; skipped.")
    assert read_document(tmp_path)[1] == "horizon.json: not an otbench.horizon/1 document with results; skipped."
