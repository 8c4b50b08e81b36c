"""The attack corpus of issue 24: every case runs through the CLI in its own temporary folder.

Each case is one command line against a workspace holding a small measurement
set `s/`, a user's files (`thesis.tex`, `notes/`), links, a FIFO, a
tokenizer folder `tok/`, a horizon-run-like folder `run/`, a grading file
`g.jsonl`, a split file `f.json` and a job file `job.toml`. A case is
classified as

* **traceback**: an exception escaped the CLI (or a `Traceback` was printed);
* **data loss**: an entry that was in the workspace before is gone or
  changed (the entries the case means to rewrite excepted), or something
  appeared inside an input (`s/`'s members, `tok/`, `run/`);
* **silent acceptance**: a case that must be refused exited 0;
* **wrong outcome**: refused where it must succeed, or refused without the
  one line naming the rule;
* **clean**: everything else.

`python tests/test_attacks.py` runs the whole corpus and prints the counts
per class (`--item N`: only the cases of item or issue N; `--light`: without the memory cases;
the memory cases too otherwise, each in a subprocess under a 4 GiB address
limit and a 120 s timeout); under pytest every case is a test and
`test_zz_counts` prints the counts of the cases that ran (the memory cases in
their subprocess too). A case that is known to fail goes in `OPEN` with what
fails (`xfail(strict=True)`: a fix turns it into a failure to unmark); `OPEN`
is empty: every class of issue 24 gives one line or succeeds cleanly.

The cases of issue 39 (`item=39`) add six classes, each in its own section: escapes
(credentials sent to an address read from a set, recording servers on 127.0.0.1; a
`pandas.py` in the working directory, run as the console script), outputs through aliases
(descriptors redirected by a shell, hard links, `/dev/shm`), forged proofs of authorship
(ledgers, manifests), a hostile server (`tests/_served.py`), signal values out of range and
edited tables, and the resource budget with one-line usage errors.

The cases of issue 55 (`item=55`) add data loss (temporaries of otbench's own writers and
their look-alikes, a result the user edited), denial of service (the files read beside an
input, `audit-log --replicates`, a tracker that cannot take the run), its tracebacks (a hostile
server's `/v1/models`, `/metrics`, `stop_reason` and `/version`; a non-UTF-8 `--write-job` value;
an output path 1,100 names deep; a tiny plan target; corrupt Parquet logs; plug-ins raising a
`BaseException` at import) and its silently wrong outcomes (outputs onto outputs, a plug-in ending
the process at import, `--json` into stdin's pipe, `audit-log --out` into a user's folder, an
edited pilot, an empty `--device`).
"""

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import stat
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _bad_input import small_set  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from otbench.analysis.measurement import save  # noqa: E402
from otbench.cli import main  # noqa: E402
from otbench.files import LEDGER  # noqa: E402

CLASSES = ("clean", "traceback", "data loss", "silent acceptance", "wrong outcome")


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    item: int                      # the item of issue 24 (1-7), or 39 / 55: the classes of that issue
    argv: tuple[str, ...]          # relative to the workspace
    expect: str = "refuse"         # "refuse" (exit 2, one line) or "ok" (exit 0)
    needle: str = ""               # in the one-line error of a refusal
    setup: Callable[[Path], None] | None = None
    changes: tuple[str, ...] = ()  # workspace entries the case means to rewrite
    keeps: tuple[str, ...] = ()    # ... and entries inside them that must stay as they are
    check: Callable[[Path, str], bool] | None = None   # extra condition on (workspace, output)
    heavy: bool = False            # unbounded memory on an unfixed branch: subprocess only
    env: tuple[tuple[str, str], ...] = ()   # environment of the command (e.g. an API key)
    sub: bool = False              # run as the `otbench` console script (a fresh interpreter)
    fds: tuple[tuple[int, str, str], ...] = ()  # sub: (descriptor, workspace file, open mode);
    #                                            (0, text, "pipe"): a pipe carrying text on stdin


# -- the workspace ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_base(tmp_path_factory.mktemp("attack-base"))


def make_base(root: Path) -> Path:
    from otbench.analysis.bench import assign_splits, write_split_file

    w = root / "w"
    w.mkdir()
    ms = small_set()
    save(ms, w / "s")
    (w / "thesis.tex").write_text("\\documentclass{article} my thesis\n")
    (w / "notes").mkdir()
    (w / "notes" / "todo.txt").write_text("my notes\n")
    (w / "link-to-thesis").symlink_to("thesis.tex")
    (w / "dangling").symlink_to("nowhere-at-all")
    (w / "link-to-fifo").symlink_to("fifo")
    (w / "tok").mkdir()
    (w / "tok" / "tokenizer.json").write_text('{"version": "1.0"}\n')
    (w / "run").mkdir()
    (w / "run" / "manifest.json").write_text('{"schema": "otbench.horizon_run/1"}\n')
    (w / "run" / "readouts.parquet").write_bytes(b"PAR1 not really\n")
    (w / "g.jsonl").write_text('{"task": "math", "reference": "2", "response": "\\\\boxed{2}"}\n')
    write_split_file(assign_splits(ms, seed=0, ratios=(0.5, 0.25, 0.25)), w / "f.json")
    (w / "job.toml").write_text("# a job file\n")
    from otbench.analysis.measurement import export_jsonl

    export_jsonl(ms, w / "x.jsonl")
    return w


def _copy(base: Path, tmp: Path) -> Path:
    """The workspace of one case: a copy of `base` plus its FIFO (copytree does not copy one)."""
    w = tmp / "w"
    shutil.copytree(base, w, symlinks=True)
    os.mkfifo(w / "fifo")
    return w


def snapshot(w: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(w):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(w).as_posix()
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISFIFO(st.st_mode):
                out[rel] = ("fifo",)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


INPUT_TREES = ("s/manifest.json", "s/trajectories", "tok", "run")


def classify(case: Case, w: Path, before: dict, result) -> tuple[str, str]:
    """(class, detail) of one finished case."""
    out = (result.output or "") + (getattr(result, "stderr", "") or "")
    exc = result.exception
    if (exc is not None and not isinstance(exc, SystemExit)) or "Traceback" in out:
        return "traceback", f"{type(exc).__name__}: {exc}"
    after = snapshot(w)
    for rel, what in before.items():
        if rel.rsplit("/", 1)[-1] == LEDGER:
            continue                          # otbench's own record of what it wrote
        if rel not in case.keeps and any(rel == c or rel.startswith(c + "/") for c in case.changes):
            continue
        if after.get(rel) != what:
            return "data loss", f"{rel}: {what[0]} {'changed' if rel in after else 'gone'}"
    for rel in after:
        if rel not in before and any(rel.startswith(t + "/") for t in INPUT_TREES):
            return "data loss", f"{rel}: appeared inside an input"
    code = result.exit_code
    lines = [ln for ln in (result.stderr or "").strip().splitlines()
             if not ln.startswith(("report: ", "SYNTHETIC DATA"))]
    if case.expect == "refuse":
        if code == 0:
            return "silent acceptance", "exit 0"
        # one line: ours, or click's usage error (its `Error:` line ends the message)
        if code != 2 or not lines or case.needle not in lines[-1] or (
                len(lines) > 1 and not lines[-1].startswith("Error: ")):
            return "wrong outcome", f"exit {code}: {lines[-3:]}"
        # an attack on an option or command the CLI does not have tests nothing: click's own
        # refusal would hold any needle that names the option
        if case.needle and any(m in lines[-1] for m in ("No such option", "No such command")) and \
                not any(m in case.needle for m in ("No such option", "No such command")):
            return "wrong outcome", f"the attack names what the CLI lacks: {lines[-1]}"
    else:
        if code != 0:
            return "wrong outcome", f"exit {code}: {lines[-3:]}"
    if case.check is not None and not case.check(w, out):
        return "wrong outcome", "its check failed"
    return "clean", ""


def run_case(case: Case, base: Path, tmp: Path) -> tuple[str, str]:
    w = _copy(base, tmp)
    cwd = os.getcwd()
    os.chdir(w)
    reader = None
    try:
        if case.setup is not None:
            case.setup(w)
        if any("reader" in a for a in case.argv) or case.id.endswith("-fifo-reader"):
            reader = os.open(w / "fifo", os.O_RDONLY | os.O_NONBLOCK)
        before = snapshot(w)
        argv = [_placeholders(a.replace("reader-fifo", "fifo")) for a in case.argv]
        try:
            result = CliRunner().invoke(main, argv, color=True,   # as on a terminal: escapes kept
                                        env=dict(case.env) or None)
        except KeyboardInterrupt:
            raise
        except BaseException as e:    # noqa: BLE001 -- CliRunner passes on what is not an
            # Exception (a plug-in's BaseException subclass): a traceback of this case, not the
            # end of the corpus
            result = SimpleNamespace(output="", stderr="", exception=e, exit_code=1)
        if reader is not None:
            try:
                data = os.read(reader, 1 << 20)
            except BlockingIOError:
                data = b""
            (w / ".fifo-data").write_bytes(data)
        return classify(case, w, before, result)
    finally:
        if reader is not None:
            os.close(reader)
        os.chdir(cwd)


# -- the cases --------------------------------------------------------------------------------

def _write(rel: str, text: str):
    def setup(w: Path) -> None:
        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        (w / rel).write_text(text)
    return setup


def _in_place_json(w: Path, out: str) -> bool:
    data = (w / ".fifo-data").read_bytes()
    return stat.S_ISFIFO(os.lstat(w / "fifo").st_mode) and json.loads(data).get("schema", "") \
        .startswith("otbench.")


FILE_OUTPUTS = [
    ("metrics", ("metrics", "s"), "--json"),
    ("frontier-json", ("frontier", "s", "--grid", "11"), "--json"),
    ("frontier-pareto", ("frontier", "s", "--grid", "11"), "--pareto"),
    ("thinning", ("thinning", "s"), "--json"),
    ("bootstrap", ("bootstrap", "s", "--replicates", "10"), "--json"),
    ("bench-run", ("bench", "run", "s", "--method", "thinkbrake-onectx"), "--json"),
    ("bench-compare", ("bench", "compare", "s"), "--json"),
    ("export", ("export", "s"), "--out"),
    ("grade", ("grade", "g.jsonl"), "--json"),
    ("resegment", ("probe", "resegment", "s"), "--json"),
    ("horizon-analyze", ("horizon", "analyze", "run"), "--json"),
    ("audit-tokenizer", ("probe", "audit-tokenizer", "tok"), "--json"),
    ("split-write-file", ("split", "s", "--out", "s2"), "--write-file"),
    ("view", ("view", "s"), "--out"),
]
TARGETS = [
    ("user-file", "thesis.tex", "otbench did not write it"),
    ("link-to-user-file", "link-to-thesis", "otbench did not write it"),
    ("set-manifest", "s/manifest.json", "refusing to write onto an input"),
    ("inside-set", "s/trajectories/new/m.json", "refusing to write onto an input"),
    ("fifo-no-reader", "fifo", "FIFO that no process reads"),
    ("a-folder", "notes", "notes"),
    ("dangling-link", "dangling", "symbolic link to a missing file"),
]

CASES: list[Case] = []
for cname, argv, opt in FILE_OUTPUTS:
    for tname, target, needle in TARGETS:
        CASES.append(Case(f"{cname}-onto-{tname}", 2 if tname != "fifo-no-reader" else 1,
                          (*argv, opt, target), needle=needle))

CASES += [
    # outputs onto their own inputs (item 2)
    Case("grade-json-onto-its-input", 2, ("grade", "g.jsonl", "--json", "g.jsonl"),
         needle="refusing to write onto an input"),
    Case("grade-json-onto-its-input-overwrite", 2,
         ("grade", "g.jsonl", "--json", "g.jsonl", "--overwrite"),
         needle="refusing to write onto an input"),
    Case("audit-json-into-the-tokenizer", 2,
         ("probe", "audit-tokenizer", "tok", "--json", "tok/tokenizer.json", "--overwrite"),
         needle="input"),
    Case("view-twice", 2, ("view", "s", "--out", "v.html"), expect="ok",
         setup=lambda w: CliRunner().invoke(main, ["view", "s", "--out", "v.html"]),
         changes=("v.html",)),
    Case("view-out-into-its-tokenizer", 2,
         ("view", "s", "--tokenizer", "tok", "--out", "tok/tokenizer.json", "--overwrite"),
         needle="input"),
    Case("horizon-json-onto-the-runs-readouts", 2,
         ("horizon", "analyze", "run", "--json", "run/readouts.parquet", "--overwrite"),
         needle="input"),
    Case("split-write-file-onto-from-file", 2,
         ("split", "s", "--from-file", "f.json", "--write-file", "f.json", "--out", "s2"),
         needle="refusing to write onto an input"),
    Case("metrics-json-onto-a-link-to-the-manifest", 2,
         ("metrics", "s", "--json", "lm", "--overwrite"),
         setup=lambda w: (w / "lm").symlink_to("s/manifest.json"), needle="input"),
    Case("metrics-json-onto-a-horizon-runs-manifest", 2,
         ("metrics", "s", "--json", "run2/manifest.json"),
         setup=_write("run2/manifest.json", '{"schema": "otbench.horizon-run/1"}\n'),
         needle="otbench did not write it"),
    Case("export-out-onto-the-set", 2, ("export", "s", "--out", "s"), needle="is a directory"),
    # folder outputs inside or onto inputs (item 2)
    Case("bootstrap-checkpoint-dir-inside-the-set", 2,
         ("bootstrap", "s", "--replicates", "10", "--checkpoint-dir", "s/trajectories/ck"),
         needle="refusing to write onto an input"),
    Case("bootstrap-checkpoint-dir-a-users-folder", 2,
         ("bootstrap", "s", "--replicates", "10", "--checkpoint-dir", "notes"),
         needle="is not a checkpoint folder"),
    Case("sweep-checkpoint-dir-inside-the-set", 2,
         ("sweep", "s", "--replicates", "10", "--checkpoint-dir", "s/trajectories/ck"),
         needle="refusing to write onto an input"),
    Case("sweep-out-inside-the-set", 2, ("sweep", "s", "--out", "s/trajectories/new"),
         needle="refusing to write onto an input"),
    Case("sweep-out-onto-a-users-sweep-json", 2, ("sweep", "s", "--out", "notes"),
         setup=_write("notes/sweep.json", "mine\n"), needle="holds files otbench did not write ('sweep.json'"),
    Case("sweep-out-into-a-users-folder", 2, ("sweep", "s", "--out", "notes"),
         setup=_write("notes/chapter1.tex", "mine\n"), needle="holds files otbench did not write ('chapter1.tex'"),
    Case("compare-leaderboard-inside-the-set", 2,
         ("bench", "compare", "s", "--leaderboard", "s/trajectories/lb"),
         needle="refusing to write onto an input"),
    Case("compare-leaderboard-onto-a-users-md", 2,
         ("bench", "compare", "s", "--leaderboard", "notes"),
         setup=_write("notes/leaderboard.md", "mine\n"), needle="otbench did not write it"),
    Case("probe-run-out-inside-the-set", 2,
         ("probe", "run", "--config", "job.toml", "--out", "s/trajectories/x"),
         needle="refusing to write onto an input"),
    Case("probe-run-out-holding-its-config", 2,
         ("probe", "run", "--config", "job.toml", "--out", ".", "--overwrite"),
         needle="refusing to write onto an input"),
    Case("horizon-run-out-inside-the-set", 2,
         ("horizon", "run", "--config", "job.toml", "--out", "s/trajectories/x"),
         needle="refusing to write onto an input"),
    Case("import-out-inside-the-set", 2, ("import", "x.jsonl", "--out", "s/trajectories/x"),
         needle="refusing to write onto an input"),
    Case("import-out-onto-its-input", 2, ("import", "x.jsonl", "--out", "x.jsonl"),
         needle="is a file"),
    Case("import-out-holding-its-input", 2, ("import", "x.jsonl", "--out", ".", "--overwrite"),
         needle="refusing to write onto an input"),
    Case("simulate-out-inside-the-set", 2, ("simulate", "--out", "s/trajectories/x"),
         needle="refusing to write onto an input"),
    Case("split-out-inside-the-set", 2, ("split", "s", "--out", "s/trajectories/x"),
         needle="refusing to write onto an input"),
    Case("demo-out-inside-the-set", 2, ("demo", "--out", "s/trajectories"),
         needle="refusing to write onto an input"),
    # report: item 1
    Case("report-out-holding-the-set", 1, ("report", "s", "--out", ".", "--overwrite"),
         setup=_write("report.json", "{}\n"), needle="refusing to write onto an input"),
    Case("report-out-onto-the-set", 1, ("report", "s", "--out", "s"),
         needle="refusing to write onto an input"),
    Case("report-out-inside-the-set", 1, ("report", "s", "--out", "s/trajectories/r"),
         needle="refusing to write onto an input"),
    Case("report-out-a-users-folder-with-report-json", 1, ("report", "s", "--out", "notes"),
         setup=_write("notes/report.json", "{}\n"), needle="otbench did not write it"),
    Case("report-out-a-users-folder", 1, ("report", "s", "--out", "notes"),
         needle="otbench did not write it"),
    Case("report-out-a-link-to-a-folder", 1, ("report", "s", "--out", "ln"),
         setup=lambda w: (w / "ln").symlink_to("notes"), needle="is not a folder"),
    Case("report-out-a-file", 1, ("report", "s", "--out", "thesis.tex"), needle="is a file"),
    Case("report-bootstrap-input-inside-out", 1,
         ("report", "s", "--out", "rep", "--bootstrap", "rep/b.json", "--overwrite"),
         setup=_write("rep/b.json", '{"schema": "otbench.bootstrap/1"}\n'),
         needle="refusing to write onto an input"),
    # special files: written in place, never renamed over (item 1)
    Case("metrics-json-into-a-fifo-reader", 1, ("metrics", "s", "--json", "reader-fifo"),
         expect="ok", check=_in_place_json),
    Case("metrics-json-through-a-link-to-a-fifo-reader", 1,
         ("metrics", "s", "--json", "link-to-fifo"), expect="ok",
         setup=lambda w: None, check=_in_place_json),
    Case("grade-json-into-a-fifo-reader", 1, ("grade", "g.jsonl", "--json", "reader-fifo",
                                              "--workers", "0"), expect="ok",
         check=_in_place_json),
    # what must still work, and lose nothing (items 1, 2)
    Case("metrics-json-onto-a-user-file-with-overwrite", 2,
         ("metrics", "s", "--json", "thesis.tex", "--overwrite"), expect="ok",
         changes=("thesis.tex",)),
    Case("metrics-twice-replaces-its-own-result", 2, ("metrics", "s"), expect="ok",
         setup=lambda w: CliRunner().invoke(main, ["metrics", "s"]),
         changes=("s/results",)),
    Case("metrics-json-beside-the-set", 2, ("metrics", "s", "--json", "s/results/m.json"),
         expect="ok"),
    Case("export-twice", 2, ("export", "s", "--out", "out.jsonl"), expect="ok",
         setup=lambda w: CliRunner().invoke(main, ["export", "s", "--out", "out.jsonl"]),
         changes=("out.jsonl",)),
    Case("export-onto-a-user-jsonl-edited-after-export", 2, ("export", "s", "--out", "out.jsonl"),
         setup=lambda w: (CliRunner().invoke(main, ["export", "s", "--out", "out.jsonl"]),
                          (w / "out.jsonl").write_text("my edit\n")),
         needle="otbench did not write it"),
    Case("import-keeps-a-user-folder-named-like-a-temporary", 2,
         ("import", "x.jsonl", "--out", "set"), expect="ok",
         setup=_write(".set.tmp-999999-mythings/notes.txt", "mine\n")),
    Case("split-in-place-still-works", 2, ("split", "s"), expect="ok",
         changes=("s",)),
    Case("report-rewrites-an-earlier-report-keeping-notes", 1,
         ("report", "s", "--out", "rep", "--grid", "11"), expect="ok",
         setup=lambda w: (CliRunner().invoke(main, ["report", "s", "--out", "rep", "--grid", "11"]),
                          (w / "rep" / "my-notes.txt").write_text("mine\n")),
         changes=("rep",), keeps=("rep/my-notes.txt",)),
]


def _edit_checkpoint(w: Path) -> None:
    """A checkpointed run, then its last step dropped and the step before renamed over it, its
    `done` moved along (item 5: consistent edits the checksum must cover)."""
    CliRunner().invoke(main, ["bootstrap", "s", "--replicates", "6", "--batch", "2",
                              "--checkpoint-every", "1", "--checkpoint-dir", "ck"])
    ck = w / "ck"
    steps = sorted(int(p.name) for p in ck.iterdir() if p.is_dir() and p.name.isdigit())
    low, high = steps[-2], steps[-1]
    shutil.rmtree(ck / str(high))
    (ck / str(low)).rename(ck / str(high))
    for meta in (ck / str(high)).rglob("metadata"):
        if meta.is_file() and meta.parent.name == "meta":
            doc = json.loads(meta.read_text())
            doc["done"] = high
            meta.write_text(json.dumps(doc))


CASES += [
    Case("bootstrap-resume-of-a-consistently-edited-checkpoint", 5,
         ("bootstrap", "s", "--replicates", "6", "--batch", "2", "--checkpoint-every", "1",
          "--checkpoint-dir", "ck", "--resume"), setup=_edit_checkpoint,
         needle="does not match its checksum", changes=("ck",)),
]

# -- items 3, 4, 5 and 7: memory bounds, tracebacks, silent acceptance, contradictions --------

PLUGIN_FIT_RAISES = '''
from otbench.analysis.bench import ThetaMethod
class Bad:
    name = "bad"
    strategy = "dee"
    def fit(self, *a, **k):
        raise RuntimeError("boom")
'''


def _manifest_edit(key, value):
    def setup(w: Path) -> None:
        m = w / "s" / "manifest.json"
        doc = json.loads(m.read_text())
        doc[key] = value
        m.write_text(json.dumps(doc))
    return setup


CASES += [
    Case("frontier-grid-3e7", 3, ("frontier", "s", "--grid", "30000000"), heavy=True),
    Case("report-grid-3e7", 3, ("report", "s", "--out", "rep", "--grid", "30000000"), heavy=True),
    Case("thinning-draws-2e8", 3, ("thinning", "s", "--draws", "200000000"),
         heavy=True),
    Case("bench-run-theta-grid-2e6", 3,
         ("bench", "run", "s", "--method", "thinkbrake-onectx", "--theta-grid", "2000000"), heavy=True),
    Case("bootstrap-replicates-2e6-batch-2e6", 3,
         ("bootstrap", "s", "--replicates", "2000000", "--batch", "2000000"),
         heavy=True),
    Case("metrics-provenance-a-list", 4, ("metrics", "s"),
         setup=_manifest_edit("provenance", [1, 2])),
    Case("metrics-provenance-a-string", 4, ("metrics", "s"),
         setup=_manifest_edit("provenance", "x")),
    Case("bench-run-method-path-escape", 4, ("bench", "run", "s", "--method", "../../x:Y")),
    Case("bench-run-plugin-fit-raises", 4, ("bench", "run", "s", "--method", "badplug:Bad"),
         setup=_write("badplug.py", PLUGIN_FIT_RAISES)),
    Case("report-bootstrap-frontiers-wrong-shape", 4,
         ("report", "s", "--out", "rep", "--bootstrap", "b.json"),
         setup=_write("b.json", json.dumps({"schema": "otbench.bootstrap/1",
                                            "frontiers": [1, 2, 3]}))),
    Case("report-thinning-probes-wrong-shape", 4,
         ("report", "s", "--out", "rep", "--thinning", "t.json"),
         setup=_write("t.json", json.dumps({"schema": "otbench.thinning/1", "probes": [1]}))),
    Case("grade-empty-file", 4, ("grade", "empty.jsonl"), setup=_write("empty.jsonl", "")),
    Case("bench-run-method-builtins-exit", 5, ("bench", "run", "s", "--method", "builtins:exit")),
    Case("import-duplicate-json-keys", 5, ("import", "dup.jsonl", "--out", "o"),
         setup=_write("dup.jsonl", '{"model": "m", "model": "n"}\n')),
    Case("import-question-id-a-path", 5, ("import", "qp.jsonl", "--out", "o"),
         setup=_write("qp.jsonl", json.dumps({"model": "m", "group": "g",
                                              "question": "../../etc/x", "trajectory": 0,
                                              "probes": 2, "L": [0, 3], "C": [0, 1],
                                              "y": 1}) + "\n")),
    Case("import-keeps-the-records-own-trajectory", 5, ("import", "tr.jsonl", "--out", "o"),
         expect="ok", changes=("o",),
         setup=_write("tr.jsonl", json.dumps({"model": "m", "group": "g", "question": "q",
                                              "trajectory": 7, "probes": 2, "L": [0, 3],
                                              "C": [0, 1], "y": 1}) + "\n"),
         check=lambda w, out: __import__("otbench.analysis", fromlist=["load"]).load(
             w / "o").trajectory.tolist() == [7]),
    Case("audit-tokenizer-of-a-broken-tokenizer", 4, ("probe", "audit-tokenizer", "tok")),
    Case("import-refuses-a-model-name-with-escapes", 5, ("import", "esc.jsonl", "--out", "esc"),
         setup=_write("esc.jsonl", json.dumps(
             {"model": "\u001b[31mred", "group": "g", "question": "q", "trajectory": 0,
              "probes": 2, "L": [0, 3], "C": [0, 1], "y": 1}) + "\n"),
         check=lambda w, out: "\x1b" not in out),
    Case("import-onto-an-existing-set-names-the-option-in-cli-words", 7,
         ("import", "x.jsonl", "--out", "s"), needle="--overwrite",
         check=lambda w, out: "overwrite=True" not in out),
    Case("split-default-file-is-accepted", 7,
         ("split", "s", "--from-file", str(Path(__file__).parents[1] / "artifacts" / "otbench"
                                           / "split-default.json"), "--out", "s2"),
         expect="ok"),
]


# -- issue 39, class 1: escapes (credentials, code from the working directory) -----------------
#
# `ss/` records a served engine at the recording server SERVERS["recorded"] (127.0.0.1) with its
# key in $OTB_ATTACK_KEY; SERVERS["user"] is the server a user names. `{user}` in an argument is
# the user's server's address.

SERVERS: dict = {}
KEY = "sk-attack-0123456789"
KEY_ENV = (("OTB_ATTACK_KEY", KEY), ("OTB_CRLF_KEY", "sk-se\r\ncret-tail"))


def _servers() -> dict:
    if not SERVERS:
        from _served import Recorder

        SERVERS.update(recorded=Recorder(), user=Recorder(), hostile=_hostile())
    return SERVERS


def _placeholders(arg: str) -> str:
    if "{port}" in arg:                 # the silent server's port (cwd: the case's workspace)
        return arg.replace("{port}", Path(".port").read_text())
    if "{hostile}" in arg:
        return arg.replace("{hostile}", _servers()["hostile"].url)
    return arg.replace("{user}", _servers()["user"].url) if "{user}" in arg else arg


def _served_set(edit=None, timeout_s=None):
    def setup(w: Path) -> None:
        from _served import served_set, tokenizer_folder

        srv = _servers()
        for r in (srv["recorded"], srv["user"]):
            r.requests.clear()
        served_set(w / "ss", srv["recorded"].url, tokenizer_folder(w / "tok2"), key_env="OTB_ATTACK_KEY",
                   timeout_s=timeout_s)
        if edit is not None:
            m = w / "ss" / "manifest.json"
            doc = json.loads(m.read_text())
            edit(doc)
            m.write_text(json.dumps(doc))
    return setup


def _no_key_to_the_recorded(contacted: bool | None = None):
    """No request with a credential reached the recorded address (and it was, or was not, contacted)."""
    def check(w: Path, out: str) -> bool:
        rec = _servers()["recorded"]
        return rec.credentialed() == [] and (contacted is None or bool(rec.requests) == contacted) \
            and KEY not in out and "cret-tail" not in out
    return check


def _key_only_to_the_user(w: Path, out: str) -> bool:
    srv = _servers()
    return srv["recorded"].requests == [] and bool(srv["user"].credentialed()) and all(
        r["headers"]["authorization"] == f"Bearer {KEY}" for r in srv["user"].credentialed())


def _edit_address(doc: dict) -> None:
    doc["provenance"]["engine"]["config"]["base_url"] = "http://127.0.0.1:9"


def _edit_address_and_drop_the_hash(doc: dict) -> None:
    _edit_address(doc)
    doc.pop("provenance_hash")


SHADOW = "open('SHADOWED', 'w').write('ran')\nraise SystemExit('shadowed')\n"


def _split_and_write(rel: str, text: str):
    def setup(w: Path) -> None:
        CliRunner().invoke(main, ["split", "s", "--ratios", "0.5,0,0.5"])
        _write(rel, text)(w)
    return setup

CASES += [
    Case("escape-certify-sends-nothing-to-a-recorded-address", 39,
         ("online", "certify", "ss", "--theta", "0"), env=KEY_ENV, setup=_served_set(),
         needle="never sent a key", check=_no_key_to_the_recorded(contacted=False)),
    Case("escape-online-run-sends-nothing-to-a-recorded-address", 39,
         ("online", "run", "ss", "--theta", "0"), env=KEY_ENV, setup=_served_set(),
         needle="never sent a key", check=_no_key_to_the_recorded(contacted=False)),
    Case("escape-side-request-certify-sends-nothing-to-a-recorded-address", 39,
         ("online", "certify", "ss", "--theta", "0", "--method", "deer"), env=KEY_ENV,
         setup=_served_set(), needle="never sent a key",
         check=_no_key_to_the_recorded(contacted=False)),
    Case("escape-certify-recorded-address-by-consent-gets-no-key", 39,
         ("online", "certify", "ss", "--theta", "0", "--base-url", "recorded"), env=KEY_ENV,
         setup=_served_set(), needle="cannot serve STP exactly",
         check=_no_key_to_the_recorded(contacted=True)),
    Case("escape-certify-recorded-address-with-a-key-variable", 39,
         ("online", "certify", "ss", "--theta", "0", "--base-url", "recorded", "--api-key-env",
          "OTB_ATTACK_KEY"), env=KEY_ENV, setup=_served_set(), needle="never sent a key",
         check=_no_key_to_the_recorded(contacted=False)),
    Case("escape-certify-key-goes-only-to-the-users-server", 39,
         ("online", "certify", "ss", "--theta", "0", "--base-url", "{user}", "--api-key-env",
          "OTB_ATTACK_KEY"), env=KEY_ENV, setup=_served_set(), needle="cannot serve STP exactly",
         check=_key_only_to_the_user),
    Case("escape-certify-an-edited-address-is-refused", 39,
         ("online", "certify", "ss", "--theta", "0", "--base-url", "recorded"), env=KEY_ENV,
         setup=_served_set(_edit_address), needle="provenance_hash",
         check=_no_key_to_the_recorded(contacted=False)),
    Case("escape-validate-flags-an-edited-address", 39, ("validate", "ss"),
         setup=_served_set(_edit_address), needle="provenance does not match its provenance_hash"),
    Case("escape-validate-flags-an-edited-address-without-its-hash", 39, ("validate", "ss"),
         setup=_served_set(_edit_address_and_drop_the_hash), needle="no provenance_hash binds it"),
    Case("escape-validate-passes-the-unedited-served-set", 39, ("validate", "ss"), expect="ok",
         setup=_served_set()),
    Case("escape-api-key-with-cr-lf-is-one-line-unshown", 39,
         ("online", "certify", "ss", "--theta", "0", "--base-url", "{user}", "--api-key-env",
          "OTB_CRLF_KEY"), env=KEY_ENV, setup=_served_set(), needle="(the key is not shown)",
         check=_no_key_to_the_recorded(contacted=False)),
    Case("escape-base-url-with-cr-lf", 39,
         ("online", "certify", "ss", "--theta", "0", "--base-url",
          "http://127.0.0.1:9/\r\nX-Injected: 1"), env=KEY_ENV, setup=_served_set(),
         needle="control character", check=_no_key_to_the_recorded(contacted=False)),
    Case("escape-bench-run-pandas-py-in-the-working-directory", 39,
         ("bench", "run", "s", "--method", "budget-forcing", "--json", "b.json"), expect="ok", sub=True,
         setup=_split_and_write("pandas.py", SHADOW), check=lambda w, out: not (w / "SHADOWED").exists()),
    Case("escape-bench-compare-pandas-py-in-the-working-directory", 39,
         ("bench", "compare", "s", "--json", "c.json"), expect="ok", sub=True,
         setup=_split_and_write("pandas.py", SHADOW), check=lambda w, out: not (w / "SHADOWED").exists()),
    Case("escape-bench-run-plugin-in-the-working-directory-still-imports", 39,
         ("bench", "run", "s", "--method", "myplug:Brake", "--json", "p.json"), expect="ok", sub=True,
         setup=_split_and_write("myplug.py", "from otbench.analysis.bench import load_method\n"
                                   "Brake = lambda: load_method('budget-forcing')\n")),
]


# -- issue 39, class 2: outputs through aliases of user files ----------------------------------

SHM = Path("/dev/shm") / f"otbench-attack-{os.getpid()}"


def _shm_user_file(w: Path) -> None:
    SHM.write_text("my scratch notes\n")


def _shm_kept(w: Path, out: str) -> bool:
    try:
        return SHM.read_text() == "my scratch notes\n"
    finally:
        SHM.unlink(missing_ok=True)


def _link(src: str, dst: str, hard: bool = True):
    def setup(w: Path) -> None:
        os.link(w / src, w / dst) if hard else (w / dst).symlink_to(src)
    return setup


def _appended(w: Path, out: str) -> bool:
    text = (w / "log").read_text()
    return text.startswith("old log line\n") and "otbench.metrics/" in text


THESIS_IN = ((0, "thesis.tex", "r"),)

CASES += [
    Case("alias-json-dev-stdin-redirected-from-a-user-file", 39,
         ("metrics", "s", "--json", "/dev/stdin"), sub=True, fds=THESIS_IN,
         needle="open for reading"),
    Case("alias-json-proc-self-fd-0-redirected-from-a-user-file", 39,
         ("metrics", "s", "--json", "/proc/self/fd/0"), sub=True, fds=THESIS_IN,
         needle="open for reading"),
    Case("alias-json-dev-fd-3-read-from-a-user-file", 39,
         ("metrics", "s", "--json", "/dev/fd/3", "--overwrite"), sub=True,
         fds=((3, "thesis.tex", "r"),), needle="open for reading"),
    Case("alias-json-dev-fd-3-read-write-on-a-user-file", 39,
         ("metrics", "s", "--json", "/dev/fd/3", "--overwrite"), sub=True,
         fds=((3, "thesis.tex", "r+"),), needle="open for reading and writing"),
    Case("alias-json-a-link-to-dev-stdin", 39, ("bootstrap", "s", "--replicates", "10", "--json",
                                                "in"), sub=True, fds=THESIS_IN,
         setup=lambda w: (w / "in").symlink_to("/dev/stdin"), needle="open for reading"),
    Case("alias-grade-json-dev-stdin-from-its-own-input", 39,
         ("grade", "g.jsonl", "--json", "/dev/stdin", "--workers", "0"), sub=True,
         fds=((0, "g.jsonl", "r"),), needle="refusing to write onto"),
    Case("alias-json-dev-stdout-appended-to-a-log", 39, ("metrics", "s", "--json", "/dev/stdout"),
         expect="ok", sub=True, fds=((1, "log", "a"),), changes=("log",),
         setup=_write("log", "old log line\n"), check=_appended),
    Case("alias-json-dev-stdout-to-a-fresh-file", 39, ("metrics", "s", "--json", "/dev/stdout"),
         expect="ok", sub=True, fds=((1, "fresh.txt", "w"),),
         check=lambda w, out: "otbench.metrics/" in (w / "fresh.txt").read_text()),
    Case("alias-hard-link-of-the-sets-manifest", 39,
         ("metrics", "s", "--json", "hl", "--overwrite"), setup=_link("s/manifest.json", "hl"),
         needle="hard link of the input"),
    Case("alias-hard-link-of-a-trajectory-file", 39,
         ("frontier", "s", "--grid", "11", "--json", "hl", "--overwrite"),
         setup=lambda w: os.link(next((w / "s" / "trajectories").rglob("*.parquet")), w / "hl"),
         needle="hard link of the input"),
    Case("alias-hard-link-of-the-grading-input", 39,
         ("grade", "g.jsonl", "--json", "hl", "--overwrite", "--workers", "0"),
         setup=_link("g.jsonl", "hl"), needle="refusing to write onto an input"),
    Case("alias-hard-link-of-the-tokenizer", 39,
         ("probe", "audit-tokenizer", "tok", "--json", "hl", "--overwrite"),
         setup=_link("tok/tokenizer.json", "hl"), needle="input"),
    Case("alias-dev-shm-user-file-is-a-plain-file", 39, ("metrics", "s", "--json", str(SHM)),
         setup=_shm_user_file, check=_shm_kept, needle="otbench did not write it"),
]


# -- issue 39, class 3: forged proofs of authorship ----------------------------------------------

def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _plant_ledger(folder: str, *, version: int = 2, whole: bool = True, extra: dict | None = None):
    """A ledger written by another hand beside a user's files, claiming them (with their sha256)."""
    def setup(w: Path) -> None:
        d = w / folder
        files = {p.name: _sha(p) for p in d.iterdir() if p.is_file() and p.name != LEDGER}
        doc = {"schema": f"otbench.written/{version}", "folder": whole, "files": {**files, **(extra or {})},
               "mac": "0" * 64}
        (d / LEDGER).write_text(json.dumps(doc))
    return setup


def _copy_a_real_ledger(w: Path) -> None:
    """otbench's own ledger of `out/`, copied with the file it records into the user's `notes/`
    (the file's bytes are what the ledger lists; only the folder differs)."""
    CliRunner().invoke(main, ["export", "s", "--out", "out/x.jsonl"])
    shutil.copy2(w / "out" / "x.jsonl", w / "notes" / "x.jsonl")
    shutil.copy2(w / "out" / LEDGER, w / "notes" / LEDGER)


def _forged_manifest(folder: str, tables: dict):
    """A user's folder holding a measurement-set manifest that claims the user's files."""
    def setup(w: Path) -> None:
        d = w / folder
        (d / "trajectories").mkdir(parents=True, exist_ok=True)
        (d / "trajectories" / "mine.parquet").write_bytes(b"PAR1 my own table\n")
        (d / "docs").mkdir(exist_ok=True)
        (d / "docs" / "part-0.parquet").write_bytes(b"PAR1 my docs\n")
        doc = {"schema": "otbench.measurement_set/1", "synthetic": False, "content_hash": "0",
               "files": [{"path": "trajectories/mine.parquet", "rows": 1, "sha256": "0" * 64}],
               "tables": tables}
        (d / "manifest.json").write_text(json.dumps(doc))
    return setup


def _readme_in_a_table_folder(w: Path) -> None:
    _served_set()(w)
    (w / "ss" / "tokens" / "README.md").write_text("what these tokens are\n")


CASES += [
    Case("ledger-planted-beside-a-user-file", 39, ("metrics", "s", "--json", "notes/todo.txt"),
         setup=_plant_ledger("notes", whole=False), needle="otbench did not write it"),
    Case("ledger-planted-old-schema-beside-a-user-file", 39,
         ("metrics", "s", "--json", "notes/todo.txt"), setup=_plant_ledger("notes", version=1),
         needle="otbench did not write it"),
    Case("ledger-copied-from-an-otbench-folder", 39, ("export", "s", "--out", "notes/x.jsonl"),
         setup=_copy_a_real_ledger, needle="otbench did not write it"),
    Case("ledger-forged-folder-lets-report-delete-notes", 39, ("report", "s", "--out", "notes",
                                                               "--grid", "11"),
         setup=_plant_ledger("notes"), needle="otbench did not write it"),
    Case("ledger-entry-outside-its-folder", 39, ("report", "s", "--out", "notes", "--grid", "11"),
         setup=_plant_ledger("notes", extra={"../thesis.tex": "0" * 64}),
         needle="otbench did not write it"),
    Case("ledger-own-export-is-rewritten", 39, ("export", "s", "--out", "out/x.jsonl"),
         expect="ok", changes=("out/x.jsonl",),
         setup=lambda w: CliRunner().invoke(main, ["export", "s", "--out", "out/x.jsonl"])),
    Case("ledger-own-report-is-rewritten", 39, ("report", "s", "--out", "rep", "--grid", "11"),
         expect="ok", changes=("rep",),
         setup=lambda w: CliRunner().invoke(main, ["report", "s", "--out", "rep", "--grid", "11"])),
    Case("schema-superscript-digit-is-not-otbenchs", 39, ("metrics", "s", "--json", "mine.json"),
         setup=_write("mine.json", json.dumps({"schema": "otbench.metrics/\u00b2"})),
         needle="otbench did not write it"),
    Case("schema-arabic-indic-digit-is-not-otbenchs", 39, ("metrics", "s", "--json", "mine.json"),
         setup=_write("mine.json", json.dumps({"schema": "otbench.metrics/\u0661"})),
         needle="otbench did not write it"),
    Case("import-overwrite-onto-a-forged-manifest-keeps-the-users-files", 39,
         ("import", "x.jsonl", "--out", "notes", "--overwrite"), expect="ok", changes=("notes",),
         setup=_forged_manifest("notes", {"docs": {"path": "docs/part-0.parquet", "rows": 1,
                                                    "sha256": "0" * 64}}),
         keeps=("notes/todo.txt", "notes/trajectories/mine.parquet", "notes/docs/part-0.parquet")),
    Case("import-overwrite-a-table-entry-naming-a-users-file", 39,
         ("import", "x.jsonl", "--out", "notes", "--overwrite"), expect="ok", changes=("notes",),
         setup=_forged_manifest("notes", {"todo.txt": {"path": "todo.txt", "rows": 1,
                                                        "sha256": "0" * 64}}),
         keeps=("notes/todo.txt", "notes/trajectories/mine.parquet", "notes/docs/part-0.parquet")),
    Case("import-overwrite-keeps-a-readme-in-a-table-folder", 39,
         ("import", "x.jsonl", "--out", "ss", "--overwrite"), expect="ok", changes=("ss",),
         setup=_readme_in_a_table_folder, keeps=("ss/tokens/README.md",)),
]


# -- issue 39, class 4: a hostile or broken server -----------------------------------------------
#
# `online certify ss --base-url {hostile}/MODE`: the served engine's start checks talk to a server
# that misbehaves as MODE says (tests/_served.py `Hostile`); every one ends in one line, exit 2,
# within the set's request_timeout_s of 2 s (retry_s 0), and nothing is recorded.

def _choice(**kw):
    c = {"index": 0, "token_ids": [2], "finish_reason": "length", "text": "",
         "logprobs": {"top_logprobs": [{"token_id:0": -1.0, "token_id:2": -0.5}],
                      "token_logprobs": [-0.5]}}
    c.update(kw)
    return c


def _lp(v):
    return {"top_logprobs": [{"token_id:0": v, "token_id:2": -0.5}], "token_logprobs": [-0.5]}


ANSWERS = {
    "positive-logprob": [_choice(logprobs=_lp(20.1))],
    "null-logprob": [_choice(logprobs=_lp(None))],
    "nan-logprob": [_choice(logprobs=_lp(float("nan")))],
    "string-ids": [_choice(token_ids=["2"])],
    "float-ids": [_choice(token_ids=[2.0])],
    "bool-ids": [_choice(token_ids=[True])],
    "negative-ids": [_choice(token_ids=[-1])],
    "ids-outside-the-vocabulary": [_choice(token_ids=[10 ** 6])],
    "duplicate-indices": [_choice(), _choice()],
    "mixed-type-indices": [_choice(), _choice(index="1")],
    "non-objects": [1, 2, 3],
    "more-tokens-than-max-tokens": [_choice(token_ids=[2] * 50)],
}


def _hostile():
    import tempfile

    from _served import Hostile, tokenizer_folder
    from transformers import AutoTokenizer

    folder = tokenizer_folder(Path(tempfile.mkdtemp(prefix="otb-hostile-")) / "tok")
    return Hostile(AutoTokenizer.from_pretrained(str(folder)), {**ANSWERS, **ANSWERS_55},
                   models=MODELS_55, metrics=METRICS_55, paths=PATHS_55)


TRANSPORT = [("huge", "MiB"), ("endless", ""), ("drip", "no complete answer within"),
             ("deep", "not JSON"), ("redirect", "redirects are refused")]
CASES += [
    Case(f"server-{mode}", 39, ("online", "certify", "ss", "--theta", "0", "--base-url",
                                 "{hostile}/" + mode), setup=_served_set(timeout_s=2.0),
         needle=needle) for mode, needle in TRANSPORT
] + [
    Case(f"server-{mode}", 39, ("online", "certify", "ss", "--theta", "0", "--base-url",
                                 "{hostile}/" + mode), setup=_served_set(timeout_s=2.0),
         needle="cannot serve STP exactly") for mode in ANSWERS
]


# -- issue 39, class 5: inputs accepted out of range ---------------------------------------------

def _signal_record(name: str, values: list) -> str:
    rec = {"model": "m", "group": "g", "question": "q", "trajectory": 0, "probes": 2,
           "L": [0, 3], "C": [0, 1], "y": 1, "signals": {name: values}}
    return json.dumps(rec) + "\n"


def _table_edit(how: str):
    """The served set `ss/` with its tokens table truncated, or swapped for another's bytes."""
    def setup(w: Path) -> None:
        _served_set()(w)
        t = w / "ss" / "tokens" / "part-0.parquet"
        if how == "truncate":
            t.write_bytes(t.read_bytes()[:-40])
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pq.read_table(t)
            pq.write_table(table.set_column(table.column_names.index("seed_think"), "seed_think",
                                            pa.array([7] * table.num_rows)), t)
    return setup


OUT_OF_RANGE = [("answer_conf", [0.5, 20.1]), ("answer_conf", [-0.1, 0.5]),
                ("answer_tokens", [3, -1]), ("answer_tokens", [2.5, 3]),
                ("hesitation", [0, 2]), ("hesitation", [0.5, 1]),
                ("logp_end", [-1.0, 0.25]), ("logp_other", [1e-3, -2.0]),
                ("answer", [-2, 0])]
CASES += [
    Case(f"import-{name}-{'-'.join(map(str, vals))}-out-of-range", 39,
         ("import", "sig.jsonl", "--out", "o"), setup=_write("sig.jsonl", _signal_record(name, vals)),
         needle="is outside its range")
    for name, vals in OUT_OF_RANGE
] + [
    Case("import-in-range-signals-still-import", 39, ("import", "sig.jsonl", "--out", "o"),
         expect="ok", setup=_write("sig.jsonl", _signal_record("answer_conf", [0.0, 1.0]))),
    Case("validate-a-truncated-tokens-table", 39, ("validate", "ss"), setup=_table_edit("truncate"),
         needle="sha256 does not match"),
    Case("validate-a-swapped-tokens-table", 39, ("validate", "ss"), setup=_table_edit("swap"),
         needle="sha256 does not match"),
    Case("report-a-swapped-tokens-table", 39, ("report", "ss", "--out", "rep", "--grid", "11"),
         setup=_table_edit("swap"), needle="sha256 does not match"),
]


# -- issue 39, class 6: the resource budget on every size-driving option; one-line usage errors ---

def _horizon_run(w: Path) -> None:
    from _horizon_helpers import random_run, write

    write(random_run(0), w / "hr")


def _one_usage_line(w: Path, out: str) -> bool:
    lines = list(dict.fromkeys(ln for ln in out.strip().splitlines() if ln.strip()))  # out+err
    return len(lines) == 1 and lines[0].startswith("Error: ") and "--help" in lines[0]


CASES += [
    Case("budget-horizon-replicates-2e9", 39, ("horizon", "analyze", "hr", "--replicates",
                                               "2000000000"), setup=_horizon_run,
         needle="replicates"),
    Case("budget-horizon-small-still-runs", 39, ("horizon", "analyze", "hr", "--replicates", "50",
                                                 "--json", "h.json"), setup=_horizon_run,
         expect="ok"),
    Case("budget-bootstrap-batch-beyond-its-replicates-allocates-nothing-more", 39,
         ("bootstrap", "s", "--replicates", "10", "--batch", "1000000000000", "--json", "b.json"),
         expect="ok"),
    Case("budget-probe-run-workers-100000", 39,
         ("probe", "run", "--model", "transformers", "--model-args",
          "pretrained=smollm2-135m-instruct", "--tasks", "math500", "--limit", "1", "--R", "1",
          "--P", "1", "--out", "o", "--workers", "100000"), needle="`--workers` = 100,000"),
] + [
    Case(f"usage-{name}-is-one-line", 39, argv, check=_one_usage_line)
    for name, argv in [("missing-argument", ("metrics",)), ("unknown-option", ("metrics", "s", "--nope")),
                       ("bad-integer", ("bootstrap", "s", "--replicates", "2e9")),
                       ("unknown-command", ("nosuch",)), ("group-option", ("--bogus",)),
                       ("nested-command", ("probe", "run", "--workers", "x")),
                       ("bad-choice", ("online", "certify", "s", "--theta", "0",
                                       "--offline-signal", "x"))]
]


# -- issue 39: numbers of every numeric option, and special files as inputs ---------------------
# click's `int` / `float` read "１２" (full-width) as 12, a 400-digit integer whole (a float
# overflow deep inside the command: a traceback) and "9" * 400 as inf; "²" is refused, but the
# lists parsed by hand took full-width digits too. Each option is given all three.
_BIG, _SUP, _WIDE = "9" * 400, "\u00b2", "\uff11\uff12"
_INT_RULES = {_BIG: "has 400 digits; at most 18 are accepted", _SUP: "is not an integer (ASCII",
              _WIDE: "is not an integer (ASCII"}
_SEED_RULES = {**_INT_RULES, _BIG: "has 400 digits; at most 20 are accepted"}
_REAL_RULES = {_BIG: "is not a finite number (beyond float64", _SUP: "is not a number (ASCII",
               _WIDE: "is not a number (ASCII"}
_NUMERIC = [       # (command line before the option, option, rules)
    (("audit-log", "g.jsonl"), "--replicates", _INT_RULES),
    (("audit-log", "g.jsonl"), "--seed", _SEED_RULES),
    (("split", "s", "--out", "sp"), "--seed", _SEED_RULES),
    (("split", "s", "--out", "sp"), "--ratios", _REAL_RULES),
    (("bench", "run", "s"), "--theta-grid", _INT_RULES),
    (("bench", "run", "s", "--method", "deer"), "--thetas", _REAL_RULES),
    (("bench", "compare", "s"), "--theta-grid", _INT_RULES),
    *[(("bootstrap", "s"), o, _INT_RULES)
      for o in ("--replicates", "--grid", "--batch", "--workers", "--checkpoint-every")],
    (("bootstrap", "s"), "--seed", _SEED_RULES),
    (("demo", "--out", "dm"), "--questions", _INT_RULES),
    (("grade", "g.jsonl"), "--workers", _INT_RULES),
    (("horizon", "analyze", "run"), "--replicates", _INT_RULES),
    (("horizon", "analyze", "run"), "--seed", _SEED_RULES),
    (("horizon", "analyze", "run"), "--horizons", _INT_RULES),
    (("plan", "job.toml"), "--max-num-seqs", _INT_RULES),
    *[(("probe", "run", "--out", "pr"), o, _INT_RULES)
      for o in ("--R", "--P", "--b", "--workers", "--limit")],
    *[(("probe", "run", "--out", "pr"), o, _REAL_RULES) for o in ("--worker-cpus", "--worker-gpus")],
    (("probe", "audit-tokenizer", "tok"), "--top", _INT_RULES),
    (("probe", "resegment", "s"), "--b", _INT_RULES),
    (("report", "s", "--out", "rep"), "--grid", _INT_RULES),
    (("simulate", "--out", "sim"), "--seed", _SEED_RULES),
    *[((cmd, "s", *out), o, _INT_RULES) for cmd, out in (("thinning", ()), ("sweep", ("--out", "sw")))
      for o in ("--draws", "--probes", "--trajectories")],
    *[((cmd, "s", *out), "--seed", _SEED_RULES)
      for cmd, out in (("thinning", ()), ("sweep", ("--out", "sw")))],
    *[(("sweep", "s", "--out", "sw"), o, _INT_RULES)
      for o in ("--replicates", "--grid", "--batch", "--workers", "--checkpoint-every")],
    (("frontier", "s"), "--grid", _INT_RULES),
    *[(("online", cmd, "s", *theta), o, rules) for cmd in ("run", "certify")
      for theta, o, rules in (((), "--theta", _REAL_RULES), (("--theta", "1"), "--trajectories", _INT_RULES))],
]


def _names_rule(rule: str):
    return lambda w, out: rule in out


def _command(argv: tuple[str, ...]) -> str:
    """`bench-compare` of ("bench", "compare", "s"): the command's words, without its arguments."""
    subs = {"run", "compare", "analyze", "audit-tokenizer", "resegment", "certify"}
    return "-".join(argv[:1] + tuple(a for a in argv[1:2] if a in subs))


CASES += [
    Case(f"number-{_command(argv)}{opt}-{'400-digits' if v == _BIG else 'superscript' if v == _SUP else 'full-width'}",
         39, (*argv, opt, v), needle=f"'{opt}'", check=_names_rule(rule))
    for argv, opt, rules in _NUMERIC for v, rule in rules.items()
] + [
    # (`--thetas 1,inf` stays an FB method's "no cap": tests/cli/test_new_user.py)
    Case("number-frontier-grid-budgets-still-read", 39,
         ("frontier", "s", "--grid", "0,0.5,1", "--json", "fr.json"), expect="ok"),
]

# A FIFO (no writer: a plain `open` waits forever) or `/dev/zero` (endless) named as an input
# file is one line naming it. Run as the console script: on a branch that hangs, the case
# ends at the subprocess's timeout instead of stopping the corpus.
_SPECIAL_INPUTS = [
    ("split-from-file", ("split", "s", "--from-file", "{}", "--out", "sp"), "a JSON document"),
    ("report-thinning", ("report", "s", "--out", "rep", "--thinning", "{}"), "a JSON document"),
    ("grade", ("grade", "{}"), "a JSONL file"),
    ("plan", ("plan", "{}"), "a job file"),
    ("probe-run-config", ("probe", "run", "--config", "{}", "--out", "pr"), "a job file"),
    ("horizon-run-config", ("horizon", "run", "--config", "{}", "--out", "hr"), "a job file"),
    ("audit-log", ("audit-log", "{}"), "an evaluation log"),
    ("bench-run-stops", ("bench", "run", "s", "--stops", "{}"), "a stops file"),
]
CASES += [
    Case(f"input-{name}-{'a-fifo' if path == 'fifo' else 'dev-zero'}", 39,
         tuple(a.replace("{}", path) for a in argv), sub=True,
         needle=f"not a regular file (a FIFO, device or folder is not {what}")
    for name, argv, what in _SPECIAL_INPUTS for path in ("fifo", "/dev/zero")
] + [Case("input-import-dev-zero", 39, ("import", "/dev/zero", "--out", "o"), sub=True,
          needle="not a regular file (a FIFO, device or folder is not a JSONL file")]

# -- issue 39: the remaining cases: worker and checkpoint counts, question counts, a set's table
# that is a FIFO, output paths too long to write, usage errors of groups and option values ------
_HUGE = "999999999999999999"          # 18 digits: every `Count` takes it; the rules must not


def _special_table(rel: str, setup=None, device: bool = False):
    """The workspace with the table at `rel` replaced by a FIFO (no writer: a plain open waits
    forever), or with `device`, by a link to /dev/zero (endless); `setup` writes it first."""
    def edit(w: Path) -> None:
        if setup is not None:
            setup(w)
        (w / rel).unlink()
        if device:
            (w / rel).symlink_to("/dev/zero")
        else:
            os.mkfifo(w / rel)
    return edit


_SET_TABLE = "s/trajectories/m/g/part-0.parquet"
_NOT_A_TABLE = "not a regular file (a FIFO, device or folder is not a Parquet table)"
_LONG = "/".join(["abcdefghijklmn"] * 300)          # 4,499 bytes: over PATH_MAX (4,096)
_NAME = "n" * 250                                    # a name NAME_MAX (255) takes, its temporary not
_DEEP = "/".join(["a"] * 300)                        # 300 names, 599 bytes: a path the system writes

CASES += [
    *[Case(f"budget-{cmd}-{opt[2:]}-18-digits", 39, (cmd, "s", *extra, "--replicates", "10", opt,
                                                     _HUGE), needle=needle)
      for cmd, extra in (("bootstrap", ()), ("sweep", ("--out", "sw")))
      for opt, needle in (("--workers", "`--workers` = 999,999,999,999,999,999 worker processes; "
                                        "at most 4,096"),
                          ("--checkpoint-every", "`--checkpoint-every` must be at most 1,000,000"))],
    Case("budget-bootstrap-frontiers-workers-18-digits", 39,
         ("bootstrap", "s", "--replicates", "10", "--frontiers", "--grid", "11", "--workers", _HUGE),
         needle="at most 4,096"),
    Case("budget-bootstrap-workers-and-checkpoint-every-at-their-bounds-still-run", 39,
         ("bootstrap", "s", "--replicates", "10", "--workers", "4096", "--checkpoint-every",
          "1000000", "--checkpoint-dir", "ck", "--json", "b.json"), expect="ok"),
    Case("budget-grade-workers-18-digits", 39, ("grade", "g.jsonl", "--workers", _HUGE),
         needle="`--workers` = 999,999,999,999,999,999 worker processes"),
    Case("budget-probe-run-ray-workers-18-digits", 39,
         ("probe", "run", "--model", "transformers", "--model-args",
          "pretrained=smollm2-135m-instruct", "--tasks", "math500", "--limit", "1", "--R", "1",
          "--P", "1", "--out", "o", "--workers", _HUGE, "--ray-address", "auto"),
         needle="at most 4,096"),
    # 10**18 seeded questions were drawn one by one until the memory was gone (a hang first)
    Case("budget-demo-questions-18-digits", 39, ("demo", "--out", "dm", "--questions", _HUGE),
         sub=True, needle="`--questions` = 999,999,999,999,999,999 needs"),
    Case("budget-plan-embedded-n-18-digits", 39, ("plan", "big.toml"), sub=True,
         setup=_write("big.toml", '[model]\nname = "smollm2-135m-instruct"\n[engine]\n'
                                  'kind = "transformers"\n[data]\nsources = [{ embedded = '
                                  f'"arithmetic", n = {_HUGE} }}]\n[probe]\nR = 1\nP = 1\n'),
         needle="`n` = 999,999,999,999,999,999 needs"),
    # a set's table that is a FIFO or a device was "listed in the manifest but missing"
    *[Case(f"input-set-table-{cmd}-{'dev-zero' if dev else 'a-fifo'}", 39, (cmd, "s"), sub=True,
           setup=_special_table(_SET_TABLE, device=dev), needle=f"part-0.parquet: {_NOT_A_TABLE}")
      for cmd in ("validate", "metrics") for dev in (False, True)],
    Case("input-set-tokens-table-a-fifo", 39, ("validate", "ss"), sub=True,
         setup=_special_table("ss/tokens/part-0.parquet", _served_set()),
         needle=f"part-0.parquet: table 'tokens': {_NOT_A_TABLE}"),
    Case("input-horizon-readouts-a-fifo", 39, ("horizon", "analyze", "hr"), sub=True,
         setup=_special_table("hr/readouts.parquet", _horizon_run),
         needle=f"readouts.parquet: {_NOT_A_TABLE}"),
    # output paths the system cannot write: refused before the work, not "file name too long"
    # from the middle of it (a checkpoint folder's was a tensorstore traceback)
    *[Case(f"output-path-too-long-{name}", 39, argv, needle="too long an output path (")
      for name, argv in (("metrics-json", ("metrics", "s", "--json", _LONG + "/m.json")),
                         ("export-out", ("export", "s", "--out", _LONG + "/e.jsonl")),
                         ("report-out", ("report", "s", "--out", _LONG, "--grid", "11")),
                         ("import-out", ("import", "x.jsonl", "--out", _LONG)),
                         ("bootstrap-checkpoint-dir", ("bootstrap", "s", "--replicates", "10",
                                                       "--checkpoint-dir", _LONG)))],
    Case("output-name-too-long-for-its-temporary", 39, ("import", "x.jsonl", "--out", _NAME),
         needle="too long a name in the output path"),
    Case("output-deep-path-the-system-writes-still-writes", 39,
         ("metrics", "s", "--json", _DEEP + "/m.json"), expect="ok",
         check=lambda w, out: (w / _DEEP / "m.json").is_file()),
] + [
    # a group given no command: click's whole help was folded into the one line
    Case(f"usage-{name}-is-one-line", 39, argv, check=lambda w, out, c=commands: _one_usage_line(
        w, out) and f"Missing command: give one of {c}" in out and "Options:" not in out)
    for name, argv, commands in [("no-command", (), "audit-log, bench, bootstrap"),
                                 ("group-no-command", ("probe",), "audit-tokenizer, resegment"),
                                 ("nested-group-no-command", ("bench",), "compare, list, run")]
] + [
    Case(f"usage-{name}-is-one-line", 39, argv, check=_one_usage_line)
    for name, argv in [("option-missing-its-value", ("metrics", "s", "--json")),
                       ("nested-option-missing-its-value", ("probe", "run", "--workers"))]
]


# -- the engine's own cap and the lm-eval length reading (issue 42): refused before any engine or
# tokenizer work ------------------------------------------------------------------------------

def _lm_eval_log(w: Path) -> None:
    (w / "lm").mkdir()
    (w / "lm" / "samples_t_2026-01-01T00-00-00.000000.jsonl").write_text(json.dumps({
        "doc_id": 0, "doc": {"question_id": "q0"}, "target": "2", "resps": [["2"]], "filtered_resps": ["2"],
        "filter": "none", "metrics": ["exact_match"], "exact_match": 1.0,
        "arguments": {"gen_args_0": {"arg_0": "Q", "arg_1": {"max_gen_toks": 4}}}}) + "\n")
    (w / "no-tokenizer").mkdir()


CASES += [
    Case("engine-budget-on-a-set-without-a-probe-run", 39,
         ("online", "certify", "s", "--method", "engine-budget", "--theta", "8"),
         needle="online replay needs a probe run"),
    Case("engine-budget-is-not-run", 39, ("online", "run", "s", "--method", "engine-budget", "--theta", "8"),
         needle="the engine's own cap is certified, not run"),
    Case("reasoning-strings-of-another-method", 39,
         ("online", "certify", "s", "--method", "thinkbrake-onectx", "--theta", "0.5", "--reasoning-start", "x"),
         needle="apply to --method engine-budget only"),
    Case("audit-log-tokenizer-folder-without-one", 39,
         ("audit-log", "lm/samples_t_2026-01-01T00-00-00.000000.jsonl", "--tokenizer", "no-tokenizer"),
         setup=_lm_eval_log, needle="no tokenizer could be read there"),
    Case("audit-log-tokenizer-for-a-format-that-records-its-stops", 39,
         ("audit-log", "lm/samples_t_2026-01-01T00-00-00.000000.jsonl", "--format", "chat", "--tokenizer",
          "no-tokenizer"), setup=_lm_eval_log, needle="--tokenizer applies to lm-eval logs"),
]


# -- issue 55: data loss (temporaries, edited results) and denial of service (an input's side
# files, the budget of --replicates, trackers checked before the work) -------------------------

_TINY_JOB = """
[model]
path = "{model}"
family = "qwen3-thinking"
id = "tiny"
[engine]
kind = "transformers"
dtype = "float32"
max_model_len = 256
[data]
source = "sums"
n = 1
[probe]
R = 1
P = 1
b = 8
thinking_limit = 16
answer_limit = 4
[grader]
kind = "minimal"
"""
_LIVE = f".o.tmp-1-{'a' * 32}"                  # pid 1 always runs: a live writer's temporary
_DEAD = f".o.tmp-4194305-{'b' * 32}"            # above any pid_max: a killed writer's
_MARK_TEXT = "otbench temporary\n"


def _resume_beside_temporaries(w: Path) -> None:
    """A probe run to resume beside a user's look-alikes of its temporaries (no otbench
    marker), a live writer's marked temporary and a killed writer's."""
    from otbench.probe.engines._tiny import build_tiny_model

    model = build_tiny_model(w / "tiny", seed=0)
    (w / "job55.toml").write_text(_TINY_JOB.format(model=model))
    (w / ".o.tmp-999999-mythings").write_text("the user's\n")
    (w / ".o.tmp-1-notes").mkdir()
    (w / ".o.tmp-1-notes" / "n.txt").write_text("the user's\n")
    for name in (_LIVE, _DEAD):
        (w / name).mkdir()
        (w / name / "part-0.parquet").write_bytes(b"being written\n")
        (w / (name + ".otbench")).write_text(_MARK_TEXT)


def _tiny_job(R: int, n: int):
    def setup(w: Path) -> None:
        from otbench.probe.engines._tiny import build_tiny_model

        model = build_tiny_model(w / "tiny", seed=0)
        (w / "job55.toml").write_text(_TINY_JOB.format(model=model).replace(
            "R = 1\n", f"R = {R}\n").replace("n = 1\n", f"n = {n}\n"))
    return setup


def _dead_removed(w: Path, out: str) -> bool:
    return not os.path.lexists(w / _DEAD) and not os.path.lexists(w / (_DEAD + ".otbench")) \
        and (w / "o" / "manifest.json").is_file()


def _edited_result(argv: tuple[str, ...]):
    """`argv --json r.json` run once (otbench's, in the ledger), then edited by the user:
    a key added, the schema untouched."""
    def setup(w: Path) -> None:
        r = CliRunner().invoke(main, [*argv, "--json", "r.json"])
        assert r.exit_code == 0, r.output
        doc = json.loads((w / "r.json").read_text())
        doc["my_note"] = "checked by hand"
        (w / "r.json").write_text(json.dumps(doc, indent=1))
    return setup


def _set_beside_lookalikes(w: Path) -> None:
    """A set of otbench's (s2) holding a user's look-alike of its manifest's temporary and a
    live writer's marked one: replacing the set keeps both."""
    r = CliRunner().invoke(main, ["import", "x.jsonl", "--out", "s2"])
    assert r.exit_code == 0, r.output
    (w / "s2" / ".manifest.json.tmp-7-notes").write_text("the user's\n")
    live = f".manifest.json.tmp-1-{'c' * 32}"
    (w / "s2" / live).write_text("{}")
    (w / "s2" / (live + ".otbench")).write_text(_MARK_TEXT)


_LM = "lm/samples_t_2026-01-01T00-00-00.000000.jsonl"
_RES = "lm/results_2026-01-01T00-00-00.000000.json"


def _results_beside(kind: str):
    """The lm-eval log with its `results_*.json` (read for the model folder) made hostile."""
    def setup(w: Path) -> None:
        _lm_eval_log(w)
        p = w / _RES
        if kind == "fifo":
            os.mkfifo(p)                          # no writer: a plain open waits forever
        elif kind == "dev-zero":
            p.symlink_to("/dev/zero")             # endless
        elif kind == "deep":
            p.write_text("[" * 200_000 + "]" * 200_000)
        else:                                     # 2 GiB of sparse zeros: no disk, all reads
            with open(p, "wb") as f:
                f.truncate(1 << 31)
    return setup


def _eval_bomb(w: Path) -> None:
    """An inspect-ai `.eval` log whose sample member inflates to 3 GB (2.9 MB on disk).

    The deflate stream is one fully flushed block of 16 MiB of spaces repeated (a full flush
    resets the window, so each block decodes alone): a true bomb, built without deflating
    3 GB here. Its CRC is not the data's: a reader that gets that far has read 3 GB.
    """
    import struct
    import zlib

    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = co.compress(b" " * (1 << 24)) + co.flush(zlib.Z_FULL_FLUSH)
    n = 179
    data = block * n + b"\x03\x00"               # then an empty final block
    members = [(b"header.json", 0, b"{}", 2, zlib.crc32(b"{}")),
               (b"samples/1_epoch_1.json", 8, data, n << 24, 0)]
    out, central = bytearray(), bytearray()
    for name, method, body, size, crc in members:
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc,
                               len(body), size, len(name), 0, 0, 0, 0, 0, len(out)) + name
        out += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(body),
                           size, len(name), 0) + name + body
    out += central + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members),
                                 len(central), len(out), 0)
    (w / "bomb.eval").write_bytes(bytes(out))


def _chat_log(w: Path) -> None:
    rows = [{"id": f"q{i}", "correct": True,
             "messages": [{"role": "user", "content": f"{i}+1?"},
                          {"role": "assistant", "content": f"<think>x</think>{i + 1}"}]}
            for i in range(3)]
    (w / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


CASES += [
    # `probe run --resume` removed every `.OUT.tmp-*` beside OUT, marked or not, live or not
    Case("temporaries-resume-keeps-a-users-and-a-live-writers", 55,
         ("probe", "run", "--config", "job55.toml", "--out", "o", "--resume", "--no-progress"),
         expect="ok", setup=_resume_beside_temporaries, changes=(_DEAD, _DEAD + ".otbench"),
         check=_dead_removed),
    # replacing a set dropped every `.manifest.json.tmp-*` in it with the old set
    Case("temporaries-set-replace-keeps-look-alikes", 55,
         ("import", "x.jsonl", "--out", "s2", "--overwrite"), expect="ok",
         setup=_set_beside_lookalikes, changes=("s2",),
         keeps=("s2/.manifest.json.tmp-7-notes", f"s2/.manifest.json.tmp-1-{'c' * 32}",
                f"s2/.manifest.json.tmp-1-{'c' * 32}.otbench")),
    # an edited result still named otbench's schema, so the next --json replaced it
    *[Case(f"ledger-edited-result-{name}-is-the-users", 55, (*argv, "--json", "r.json"),
           setup=_edited_result(argv), needle="otbench did not write it (or it was changed since)")
      for name, argv in (("metrics", ("metrics", "s")),
                         ("frontier", ("frontier", "s", "--grid", "11")))],
    Case("ledger-edited-result-replaced-with-overwrite", 55,
         ("metrics", "s", "--json", "r.json", "--overwrite"), expect="ok",
         setup=_edited_result(("metrics", "s")), changes=("r.json",)),
    # the results file beside an lm-eval log was read with no check at all
    *[Case(f"audit-log-results-beside-the-log-{kind}", 55, ("audit-log", _LM), sub=True,
           setup=_results_beside(kind), needle=needle)
      for kind, needle in (
          ("fifo", f"{_RES}: not a regular file (a FIFO, device or folder is not an lm-eval"),
          ("dev-zero", f"{_RES}: not a regular file (a FIFO, device or folder is not an lm-eval"),
          ("deep", f"{_RES}: not accepted JSON (nested deeper than"),
          ("2-gib", f"{_RES}: larger than 268435456 bytes"))],
    Case("audit-log-eval-member-inflating-to-3-gb", 55, ("audit-log", "bomb.eval"), sub=True,
         setup=_eval_bomb, needle="'samples/1_epoch_1.json' unpacks to 3,003,121,664 bytes"),
    # --replicates sized the bootstrap with no budget: std::bad_alloc (an abort, exit -6)
    Case("budget-audit-log-replicates-2e9", 55, ("audit-log", "chat.jsonl", "--replicates",
                                                 "2000000000"), sub=True, setup=_chat_log,
         needle="`--replicates` = 2,000,000,000 needs"),
    # R x questions units were keyed one by one after the engine was ready (6.5e9 here)
    Case("budget-probe-run-r-times-questions", 55,
         ("probe", "run", "--config", "job55.toml", "--out", "o", "--no-progress"), sub=True,
         setup=_tiny_job(R=65535, n=100_000), needle="`--R` = 65,535 needs about"),
    Case("budget-audit-log-small-still-runs", 55, ("audit-log", "chat.jsonl", "--replicates", "50"),
         setup=_chat_log, expect="ok"),
]


def _silent_server(w: Path) -> None:
    """A tracking server that accepts connections and never answers (its socket stays open in
    this process, which the command runs in)."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    _SILENT.append(srv)
    (w / ".port").write_text(str(srv.getsockname()[1]))


_SILENT: list = []


# The tracker cases need MLflow itself (`pip install 'otbench[track]'`; not in the test
# extra, whose pins it conflicts with): where it is missing, `--log mlflow` is refused as not
# installed before anything else, which other tests check.
if __import__("importlib").util.find_spec("wandb") is not None:
    CASES.append(    # W&B online with its server down: the run's work was done, then lost
        Case("tracker-wandb-online-server-down", 55,
             ("bench", "compare", "s", "--theta-grid", "5", "--json", "bc.json", "--log", "wandb"),
             env=(("WANDB_MODE", "online"), ("WANDB_BASE_URL", "http://127.0.0.1:9")),
             needle="wandb server http://127.0.0.1:9: cannot be used",
             check=lambda w, out: not (w / "bc.json").exists()))
if __import__("importlib").util.find_spec("mlflow") is not None:
    CASES += [
        # a server that never answers: the command did all its work, then hung in the log call
        Case("tracker-mlflow-server-never-answers", 55,
             ("bench", "compare", "s", "--theta-grid", "5", "--json", "bc.json", "--log", "mlflow",
              "--log-args", "tracking_uri=http://127.0.0.1:{port}"), setup=_silent_server,
             needle="no answer within 10 s; nothing was run",
             check=lambda w, out: not (w / "bc.json").exists()),
        Case("tracker-mlflow-nothing-listening", 55,
             ("bench", "compare", "s", "--theta-grid", "5", "--json", "bc.json", "--log", "mlflow",
              "--log-args", "tracking_uri=http://127.0.0.1:9"),
             needle="nothing was run", check=lambda w, out: not (w / "bc.json").exists()),
        # the default store (a SQLite file, whose SQLAlchemy mlflow-skinny leaves out) or a
        # store path that cannot be written failed only once the work was done
        Case("tracker-mlflow-store-unusable", 55,
             ("bench", "compare", "s", "--theta-grid", "5", "--json", "bc.json", "--log", "mlflow",
              "--log-args", "tracking_uri=file:thesis.tex/mlruns"),
             needle="cannot be used", check=lambda w, out: not (w / "bc.json").exists()),
    ]
    if __import__("importlib").util.find_spec("sqlalchemy") is None:
        CASES.append(    # MLflow's default store (`sqlite:///mlflow.db`) without SQLAlchemy
            Case("tracker-mlflow-default-store-without-its-backend", 55,
                 ("bench", "compare", "s", "--theta-grid", "5", "--json", "bc.json", "--log",
                  "mlflow"), env=(("MLFLOW_TRACKING_URI", ""),), needle="cannot be used",
                 check=lambda w, out: not (w / "bc.json").exists()))


# -- issue 55: tracebacks and silently wrong outcomes of the fifth attack run --------------------
#
# Tracebacks: a served `/v1/models` whose `data` holds a non-object, a `/metrics` counter out of
# range, a `stop_reason` beyond the vocabulary; a non-UTF-8 `--model-args` value with
# `--write-job`; an output path 1,100 names deep (refused by its string: nothing is created); a
# precision target so small its squared ratio overflows; a corrupt Parquet evaluation log; a
# plug-in raising a `BaseException` subclass at import. Silently wrong: an output onto another
# output of the same command; a plug-in ending the process at import (exit 0, no output); a
# `--json` into the command's own stdin pipe; `audit-log --out` into a user's folder; an edited
# pilot; an empty `--device`.

def _stop_reason_beyond_the_vocabulary(req: dict) -> list:
    """Answers that pass the start checks' token-id and log-probability reads, and end every
    sample with a stop_reason of 2**40 (a token id no vocabulary has)."""
    if "logprob_token_ids" in req:               # a one-token read: the ids it asks, and 2
        top = {f"token_id:{t}": -1.0 for t in req["logprob_token_ids"]}
        top["token_id:2"] = -0.5
        return [_choice(logprobs={"top_logprobs": [top], "token_logprobs": [-0.5]})]
    return [_choice(index=j, finish_reason="stop", stop_reason=2 ** 40, logprobs=None)
            for j in range(int(req.get("n", 1)))]


def _consistent(req: dict) -> list:
    """Answers every start check takes: the asked ids' log-probabilities, and samples of one
    repeated token that end at max_tokens (the same for every seed)."""
    if "logprob_token_ids" in req:
        return _stop_reason_beyond_the_vocabulary(req)
    return [_choice(index=j, token_ids=[2] * int(req.get("max_tokens", 1)), logprobs=None)
            for j in range(int(req.get("n", 1)))]


ANSWERS_55 = {"stop-reason-2-40": _stop_reason_beyond_the_vocabulary, "version-an-object": _consistent}
PATHS_55 = {"version-an-object": {"/version": {"version": {"nested": ["not", "a", "version"]}}}}
MODELS_55 = {"models-non-object": {"data": [7, {"id": "m"}]},
             "models-id-a-list": {"data": [{"id": ["m"]}]}}
METRICS_55 = {"metrics-5e400": "vllm:prefix_cache_queries_total 5e400\n",
              "metrics-nan": "vllm:prefix_cache_hits_total NaN\n",
              "metrics-negative": "vllm:prefix_cache_queries_total{model_name=\"m\"} -3\n"}

PLAN_JOB = ('[model]\nname = "qwen3-4b-thinking-2507"\n[engine]\nkind = "vllm"\nmax_model_len = 65536\n'
            '[data]\nsource = "sums"\nn = 4\n[probe]\nR = 4\nP = 8\nb = 256\nthinking_limit = 32768\n'
            'answer_limit = 4096\n')
_TINY_TARGET = "OR:0." + "0" * 160 + "1pp"             # 1e-161 pp: its ratio squared is beyond a float
_DEEP_1100 = "/".join(["a"] * 1100) + "/m.json"         # 2,206 bytes: under PATH_MAX, 1,100 names


def _corrupt_parquet_log(w: Path) -> None:
    (w / "det").mkdir()
    (w / "det" / "details_t_2026-01-01T00-00-00.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")


def _split(w: Path) -> None:
    CliRunner().invoke(main, ["split", "s", "--ratios", "0.5,0,0.5"])


def _lm_eval_log_and(edit):
    def setup(w: Path) -> None:
        _lm_eval_log(w)
        edit(w)
    return setup


_LM_LOG = "lm/samples_t_2026-01-01T00-00-00.000000.jsonl"
_NOT_UTF8 = "http://127.0.0.1:9/\udcff"                   # the byte 0xff, as Python reads argv

CASES += [
    # tracebacks: the served engine's answers (`online certify` runs its start checks)
    *[Case(f"server-{mode}", 55, ("online", "certify", "ss", "--theta", "0", "--base-url",
                                  "{hostile}/" + mode), setup=_served_set(timeout_s=2.0), needle=needle)
      for mode, needle in (("models-non-object", "model entry 0 is int '7', not an object"),
                           ("models-id-a-list", "model entry 0's id is \"['m']\", not a non-empty string"),
                           ("metrics-5e400", "prefix_cache_queries is '5e400', not a whole number"),
                           ("metrics-nan", "prefix_cache_hits is 'NaN', not a whole number"),
                           ("metrics-negative", "prefix_cache_queries is '-3', not a whole number"),
                           ("stop-reason-2-40", "stop_reason 1099511627776 is not a token id"),
                           ("version-an-object", "/version: the server's version is \"{'nested'"))],
    Case("write-job-model-args-not-utf-8", 55,
         ("probe", "run", "--model", "openai", "--model-args",
          f"pretrained=smollm2-135m-instruct,base_url={_NOT_UTF8}", "--tasks", "math500",
          "--write-job", "j.toml"), sub=True, needle="engine.base_url = 'http://127.0.0.1:9/\\udcff' is not valid UTF-8",
         check=lambda w, out: not (w / "j.toml").exists()),
    Case("output-path-1100-names-deep", 55, ("metrics", "s", "--json", _DEEP_1100),
         needle="too deep an output path (", check=lambda w, out: not (w / "a").exists()),
    Case("plan-target-1e-161pp-is-out-of-reach-not-an-overflow", 55,
         ("plan", "pj.toml", "--pilot", "s", "--questions", "g=10", "--target", _TINY_TARGET),
         expect="ok", setup=_write("pj.toml", PLAN_JOB),
         check=lambda w, out: "no candidate meets it with up to 10,000 times the questions" in out),
    Case("audit-log-a-corrupt-parquet-log", 55,
         ("audit-log", "det/details_t_2026-01-01T00-00-00.parquet"), setup=_corrupt_parquet_log,
         needle="not a readable Parquet table"),
    Case("audit-log-a-corrupt-parquet-log-named-lighteval", 55,
         ("audit-log", "det/details_t_2026-01-01T00-00-00.parquet", "--format", "lighteval"),
         setup=_corrupt_parquet_log, needle="not a readable Parquet table"),
    Case("plugin-raises-a-baseexception-subclass-at-import", 55,
         ("bench", "run", "s", "--method", "otb55_bexc:Bad"),
         setup=_split_and_write("otb55_bexc.py", "class Stop(BaseException):\n    pass\nraise Stop('at import')\n"),
         needle="importing module 'otb55_bexc' failed (Stop: at import)"),
    Case("plugin-file-raises-a-baseexception-subclass-at-import", 55,
         ("bench", "run", "s", "--method", "./otb55_bexc_file.py:Bad"),
         setup=_split_and_write("otb55_bexc_file.py", "raise GeneratorExit('at import')\n"),
         needle="failed (GeneratorExit: at import)"),
    # silently wrong: outputs onto outputs, into the command's own input
    Case("bench-compare-json-onto-its-own-leaderboard", 55,
         ("bench", "compare", "s", "--method", "budget-forcing", "--json", "s/results/leaderboard.json"),
         setup=_split, needle="refusing to write one output over another"),
    Case("bench-compare-json-onto-its-leaderboard-folders-md", 55,
         ("bench", "compare", "s", "--method", "budget-forcing", "--leaderboard", "lb", "--json",
          "lb/leaderboard.md"), setup=_split, needle="refusing to write one output over another"),
    Case("bench-compare-json-onto-a-methods-own-result", 55,
         ("bench", "compare", "s", "--method", "budget-forcing", "--json",
          "s/results/bench-budget-forcing.json"),
         setup=_split, needle="refusing to write one output over another"),
    Case("bench-compare-json-beside-its-leaderboard-still-writes", 55,
         ("bench", "compare", "s", "--method", "budget-forcing", "--json", "c.json"), setup=_split,
         expect="ok", check=lambda w, out: (w / "c.json").is_file()
         and (w / "s" / "results" / "leaderboard.json").is_file()),
    Case("frontier-json-and-pareto-the-same-file", 55,
         ("frontier", "s", "--grid", "11", "--json", "fp.json", "--pareto", "fp.json"),
         needle="refusing to write one output over another"),
    Case("frontier-json-and-pareto-through-a-link", 55,
         ("frontier", "s", "--grid", "11", "--json", "fp.json", "--pareto", "lfp"),
         setup=lambda w: (w / "lfp").symlink_to("fp.json"),
         needle="refusing to write one output over another"),
    Case("plugin-os-exit-0-at-import", 55, ("bench", "run", "s", "--method", "otb55_exit:Bad"),
         sub=True, setup=_split_and_write("otb55_exit.py", "import os\nos._exit(0)\n"),
         needle="did not return: the process ended during the import (exit status 0)"),
    Case("plugin-file-kills-itself-at-import", 55, ("bench", "run", "s", "--method", "./otb55_kill.py:Bad"),
         sub=True, setup=_split_and_write("otb55_kill.py",
                                          "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"),
         needle="did not return: the process ended during the import (killed by signal 9)"),
    Case("json-dev-fd-0-a-pipe-on-stdin", 55, ("metrics", "s", "--json", "/dev/fd/0"), sub=True,
         fds=((0, "what feeds the command\n", "pipe"),), needle="open for reading (the command's input"),
    Case("json-dev-stdin-a-pipe-on-stdin", 55, ("metrics", "s", "--json", "/dev/stdin"), sub=True,
         fds=((0, "what feeds the command\n", "pipe"),), needle="open for reading (the command's input"),
    # audit-log --out: the folder rule of every folder output
    Case("audit-log-out-into-a-non-empty-user-folder", 55,
         ("audit-log", _LM_LOG, "--out", "notes", "--replicates", "10"), setup=_lm_eval_log,
         needle="exists and otbench did not write it (no otbench record in it)",
         check=lambda w, out: "`--overwrite`" in out and sorted(os.listdir(w / "notes")) == ["todo.txt"]),
    Case("audit-log-out-overwrite-writes-into-it-keeping-its-files", 55,
         ("audit-log", _LM_LOG, "--out", "notes", "--replicates", "10", "--overwrite"), expect="ok",
         setup=_lm_eval_log, changes=("notes",), keeps=("notes/todo.txt",),
         check=lambda w, out: (w / "notes" / "audit.json").is_file()),
    Case("audit-log-out-rewrites-its-own-audit-keeping-notes", 55,
         ("audit-log", _LM_LOG, "--out", "au", "--replicates", "10"), expect="ok",
         setup=_lm_eval_log_and(lambda w: (CliRunner().invoke(main, ["audit-log", _LM_LOG, "--out", "au",
                                                                     "--replicates", "10"]),
                                           (w / "au" / "mine.txt").write_text("mine\n"))),
         changes=("au",), keeps=("au/mine.txt",)),
    # plan: an edited pilot, an empty device
    Case("plan-pilot-with-an-edited-content-hash", 55,
         ("plan", "pj.toml", "--pilot", "s", "--questions", "g=10"),
         setup=lambda w: (_write("pj.toml", PLAN_JOB)(w), _manifest_edit("content_hash", "0" * 64)(w)),
         needle="content hash does not match the trajectories"),
    Case("plan-device-empty", 55, ("plan", "pj.toml", "--device", "", "--questions", "g=10"),
         setup=_write("pj.toml", PLAN_JOB), needle="--device '': one of h200"),
]


def _mark(case: Case):
    if case.id in OPEN:
        return pytest.param(case, id=case.id, marks=pytest.mark.xfail(
            strict=True, reason=f"item {case.item}: {OPEN[case.id]}"))
    return pytest.param(case, id=case.id)


OPEN: dict[str, str] = {        # case id -> what still fails (none: every class is fixed)
}

RESULTS: dict[str, tuple[str, str]] = {}


@pytest.mark.parametrize("case", [_mark(c) for c in CASES])
def test_attack(case: Case, base, tmp_path):
    # A memory case runs in a subprocess under a 4 GiB address-space limit: a regression
    # is a refused allocation there, not a machine out of memory.
    got = (_heavy if case.heavy else _sub if case.sub else run_case)(case, base, tmp_path)
    RESULTS[case.id] = got
    assert got[0] == "clean", got


def test_zz_counts(capsys):
    """The counts of the cases that ran (pytest runs this file's tests in order)."""
    assert len(CASES) >= 100
    counts = Counter(cls for cls, _ in RESULTS.values())
    with capsys.disabled():
        print(f"\nattack corpus: {len(RESULTS)} of {len(CASES)} cases ran: "
              + ", ".join(f"{counts.get(c, 0)} {c}" for c in CLASSES))
    mine = [c.id for c in CASES if c.id in RESULTS and c.id not in OPEN]
    assert all(RESULTS[i][0] == "clean" for i in mine), [(i, RESULTS[i]) for i in mine
                                                          if RESULTS[i][0] != "clean"]


def _sub(case: Case, base: Path, tmp: Path) -> tuple[str, str]:
    """A case run as the `otbench` console script in the workspace (a fresh interpreter: what
    it imports is decided there, not by the test's already-imported modules)."""
    import subprocess

    w = _copy(base, tmp)
    cwd = os.getcwd()
    os.chdir(w)
    try:
        if case.setup is not None:
            case.setup(w)
    finally:
        os.chdir(cwd)
    before = snapshot(w)
    exe = Path(sys.executable).parent / "otbench"
    env = {**os.environ, **dict(case.env)}
    env.pop("PYTHONPATH", None)
    # the redirects as a shell makes them (`0<`, `1>>`, `3<>`, ...), then the console script
    op = {"r": "<", "r+": "<>", "a": ">>", "w": ">"}
    redirs = " ".join(f"{n}{op[mode]}{shlex.quote(str(w / rel))}" for n, rel, mode in case.fds
                      if mode != "pipe")
    # (0, TEXT, "pipe"): stdin is a pipe that carries TEXT, then its end
    piped = next((rel for n, rel, mode in case.fds if n == 0 and mode == "pipe"), None)
    stdin = {} if piped is not None else {
        "stdin": None if any(n == 0 for n, _, _ in case.fds) else subprocess.DEVNULL}
    try:
        p = subprocess.run(["bash", "-c", f'exec "$0" "$@" {redirs}', str(exe), *case.argv],
                           cwd=w, text=True, timeout=300, env=env, stderr=subprocess.PIPE,
                           input=piped, **stdin,
                           stdout=None if any(n == 1 for n, _, _ in case.fds) else subprocess.PIPE)
    except subprocess.TimeoutExpired:
        return "wrong outcome", "ran past 300 s"
    result = SimpleNamespace(output=p.stdout or "", stderr=p.stderr, exception=None,
                             exit_code=p.returncode)
    return classify(case, w, before, result)


def _heavy(case: Case, base: Path, tmp: Path) -> tuple[str, str]:
    """A memory case in a subprocess: 4 GiB of address space, 120 s."""
    import resource
    import subprocess

    w = _copy(base, tmp)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    try:
        exe = Path(sys.executable).parent / "otbench"
        p = subprocess.run([str(exe), *case.argv], cwd=w,
                           capture_output=True, text=True, timeout=120, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return "wrong outcome", "ran past 120 s (denial of service)"
    if "Traceback" in p.stderr or p.returncode not in (0, 2):
        return "traceback", p.stderr.strip().splitlines()[-1:] and p.stderr.strip().splitlines()[-1]
    return ("clean", "") if p.returncode == 2 else ("silent acceptance", "exit 0")


if __name__ == "__main__":
    import tempfile

    light = "--light" in sys.argv[1:]        # leave out the memory cases (minutes each if open)
    # `--item N`: only the cases of item (or issue) N
    item = int(sys.argv[sys.argv.index("--item") + 1]) if "--item" in sys.argv[1:] else None
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "base").mkdir()
        b = make_base(Path(d) / "base")
        counts, bad = Counter(), []
        for k, c in enumerate(CASES):
            if (light and c.heavy) or (item is not None and c.item != item):
                continue
            t = Path(d) / f"case{k}"
            t.mkdir()
            cls, detail = (_heavy if c.heavy else _sub if c.sub else run_case)(c, b, t)
            counts[cls] += 1
            if cls != "clean":
                bad.append(f"  item {c.item} {c.id}: {cls} ({detail})")
        print(f"{sum(counts.values())} cases: " + ", ".join(f"{counts.get(x, 0)} {x}" for x in CLASSES))
        print("\n".join(bad))
