"""`otbench view` / `write_view`: one trajectory read as a person reads it (issue 58).

A tiny simulated set is saved with `tokens` and `probes` tables built here (ids whose
decoded text is hostile markup), so the page's text, verdicts and escaping are checked
against what the tables hold; the stops against `stop_positions`, the evaluator's own.
"""

import html
import re
import shutil
import subprocess

import numpy as np
import pyarrow as pa
import pytest

HOSTILE = '</script><script>document.body.dataset.pwned="1"</script><img src=x onerror="alert(1)">'
ANSWER_BASE = 1_000_000


def decode(ids):
    """Test decoder: a probe's ids (first id >= ANSWER_BASE) read as a hostile answer, a step's
    ids as hostile text naming its id range (so each step's text is checkable)."""
    ids = list(ids)
    if not ids:
        return ""
    if ids[0] >= ANSWER_BASE:
        return f"ans{ids[0] - ANSWER_BASE}.{ids[1]} <img src=x onerror=alert(2)>"
    return f"{HOSTILE} ids {ids[0]}-{ids[-1]}"


def _tables(ms):
    keys = ("model", "group", "question", "trajectory")
    tok = {k: [] for k in (*keys, "thinking")}
    pr = {k: [] for k in (*keys, "position", "sample", "tokens", "correct", "status")}
    for r in range(ms.num_trajectories):
        m, g = ms.models[ms.cell_model[ms.cell[r]]], ms.groups[ms.question_group[ms.question[r]]]
        key = (m, g, ms.question_id[ms.question[r]], int(ms.trajectory[r]))
        n, P = int(ms.n[r]), int(ms.probes[r])
        for name, v in zip(keys, key):
            tok[name].append(v)
        tok["thinking"].append(list(range(int(ms.L[r, n]))))
        for k in range(n + 1):
            for j in range(P):
                for name, v in zip(keys, key):
                    pr[name].append(v)
                ok = j < int(ms.C[r, k])
                pr["position"].append(k)
                pr["sample"].append(j)
                pr["tokens"].append([ANSWER_BASE + k, j])
                pr["correct"].append(ok)
                pr["status"].append("ok" if ok else "wrong")
    i32 = pa.list_(pa.int32())
    t = pa.table({**{k: pa.array(tok[k]) for k in ("model", "group", "question")},
                  "trajectory": pa.array(tok["trajectory"], pa.int32()),
                  "thinking": pa.array(tok["thinking"], i32)})
    p = pa.table({**{k: pa.array(pr[k]) for k in ("model", "group", "question")},
                  **{k: pa.array(pr[k], pa.int32()) for k in ("trajectory", "position", "sample")},
                  "tokens": pa.array(pr["tokens"], i32), "correct": pa.array(pr["correct"]),
                  "status": pa.array(pr["status"])})
    return {"tokens": t, "probes": p}


@pytest.fixture(scope="module")
def text_set(tmp_path_factory):
    """A tiny simulated set with a test split and token tables (module docstring)."""
    from otbench.analysis.bench import assign_splits
    from otbench.analysis.measurement import save, simulate

    ms = assign_splits(simulate("tiny", seed=0))
    path = tmp_path_factory.mktemp("view") / "set"
    save(ms, path, extra_tables=_tables(ms))
    return path


def _sections(page: str) -> dict[str, str]:
    parts = re.split(r'(?=<section class="traj" id=")', page)
    return {re.match(r'<section class="traj" id="(t\d+)"', p).group(1): p
            for p in parts if p.startswith('<section class="traj"')}


def test_each_cut_its_text_its_verdicts_and_its_signals(text_set):
    from otbench.analysis.measurement import load
    from otbench.analysis.report import view_html

    ms = load(text_set)
    page = view_html(text_set, limit=4, decode=decode)
    secs = _sections(page)
    assert len(secs) == 4
    for anchor, sec in secs.items():
        r = int(anchor[1:])
        n, P = int(ms.n[r]), int(ms.probes[r])
        cuts = re.findall(r'<div class="cut" id="t\d+-k(\d+)" data-k="\d+">(.*?)</div>', sec)
        assert [int(k) for k, _ in cuts] == list(range(n + 1))           # every cut, in order
        for k, body in cuts:
            k = int(k)
            assert f"{int(ms.L[r, k]):,} tokens" in body
            verdicts = re.findall(r'<span class="v (ok|no)" title="answer (\d+): (\w+)">', body)
            assert len(verdicts) == P                                    # P answers per cut
            assert sum(v == "ok" for v, _, _ in verdicts) == int(ms.C[r, k])
            assert f"ans{k}.0 &lt;img" in body                           # the answer's text, escaped
            margin = float(ms.signals["margin"][r, k])
            assert f"margin={margin:.4g}" in body
        # each step's text sits between its two cuts: ids L(k-1) .. L(k)-1
        steps = re.findall(r'<pre class="step">(.*?)</pre>', sec, flags=re.S)
        assert len(steps) == n
        for k, body in enumerate(steps, start=1):
            a, b = int(ms.L[r, k - 1]), int(ms.L[r, k])
            assert html.unescape(body) == (f"{HOSTILE} ids {a}-{b - 1}" if b > a else "")
    # the index links every shown trajectory, by model and question
    for anchor in secs:
        assert f'<a href="#{anchor}">trajectory' in page


def test_method_stops_are_the_evaluators(text_set):
    from otbench.analysis.bench import stop_positions
    from otbench.analysis.measurement import load
    from otbench.analysis.report import view_html

    ms = load(text_set)
    page = view_html(text_set, limit=50)
    secs = _sections(page)
    test_rows = [int(a[1:]) for a in secs if ms.split[int(a[1:])] == 2]
    assert test_rows
    shown = re.findall(r'<section class="traj" id="t(\d+)".*?</section>', page, flags=re.S)
    assert len(shown) == len(secs)
    checked = 0
    for name in ("thinkbrake-onectx", "budget-forcing", "predictive-scheduling", "thinkswitcher"):
        for r in test_rows:
            marks = re.findall(rf'<b data-method="{name}" data-theta="([^"]+)">k=(\d+)</b>',
                               secs[f"t{r}"])
            assert len(marks) == 5, (name, r)
            for theta, k in marks[::2]:
                rows, ks, _ = stop_positions(ms, name, float(theta))
                assert int(k) == int(ks[np.flatnonzero(rows == r)[0]]), (name, r, theta)
                checked += 1
    assert checked >= 12


def test_the_middle_theta_stop_is_marked_at_its_cut(text_set):
    from otbench.analysis.report import view_html

    page = view_html(text_set, limit=3)
    for sec in _sections(page).values():
        mark = re.search(r'data-method="thinkbrake-onectx" data-theta="[^"]+">k=\d+</b>.*?'
                         r'data-theta="[^"]+">k=\d+</b>.*?data-theta="[^"]+">k=(\d+)</b>', sec)
        k = mark.group(1)
        cut = re.search(rf'<div class="cut" id="t\d+-k{k}" data-k="{k}">(.*?)</div>', sec).group(1)
        assert ">thinkbrake-onectx</span>" in cut


def test_a_set_without_token_tables_shows_counts_at_each_cut(tiny_set_dir):
    from otbench.analysis.measurement import load
    from otbench.analysis.report import view_html

    ms = load(tiny_set_dir)
    page = view_html(tiny_set_dir, limit=2)
    assert "no `tokens` table" in page and "no `probes` table" in page
    for anchor, sec in _sections(page).items():
        r = int(anchor[1:])
        cuts = re.findall(r'<div class="cut" id="t\d+-k(\d+)" data-k="\d+">(.*?)</div>', sec)
        assert len(cuts) == int(ms.n[r]) + 1
        for k, body in cuts:
            assert f">{int(ms.C[r, int(k)])}/{int(ms.probes[r])} correct</span>" in body
        assert sec.count("no text to show") == int(ms.n[r])


def test_hostile_text_is_inert(text_set):
    from otbench.analysis.report import view_html
    from otbench.analysis.report._view_page import SCRIPT

    page = view_html(text_set, limit=2, decode=decode)
    assert HOSTILE not in page and "<img" not in page
    assert page.count("<script>") == 1 and page.count("</script>") == 1   # only the page's own
    assert f"<script>{SCRIPT}</script>" in page
    assert html.escape(HOSTILE) in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    for bad in ("http://", "https://", "src=\"http", "@import", "url("):
        assert bad not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_hostile_ids_and_question_text_are_escaped(tmp_path):
    import dataclasses

    from otbench.analysis.measurement import simulate
    from otbench.analysis.report import view_html

    ms = simulate("tiny", seed=0)
    bad = tuple(HOSTILE for _ in ms.question_text)
    ms = dataclasses.replace(ms, question_text=bad, models=(HOSTILE,) + ms.models[1:])
    page = view_html(ms, limit=2)
    assert HOSTILE not in page and page.count("<script>") == 1
    assert html.escape(HOSTILE, quote=True) in page


def test_limit_filters_and_left_out_count(text_set):
    from otbench.analysis.measurement import load
    from otbench.analysis.report import DEFAULT_LIMIT, ViewError, view_html

    from otbench.cli._view import LIMIT

    assert LIMIT == DEFAULT_LIMIT
    ms = load(text_set)
    page = view_html(text_set, limit=3)
    assert f"3 of {ms.num_trajectories:,} matching trajectories ({ms.num_trajectories - 3:,} " \
           "left out by the limit of 3" in page
    models = {m for m in re.findall(r"<h3>([^<]+)</h3>", page)}
    assert len(models) == min(3, len(ms.models))                  # a capped view spreads over models
    m = ms.models[1]
    q = ms.question_id[int(ms.question[np.flatnonzero(ms.cell_model[ms.cell] == 1)[0]])]
    one = view_html(text_set, model=m, question=q, trajectory=0)
    assert len(_sections(one)) == 1 and "1 of 1 matching" in one
    with pytest.raises(ViewError, match="no model 'nope'"):
        view_html(text_set, model="nope")
    with pytest.raises(ViewError, match="`limit` must be an integer >= 1"):
        view_html(text_set, limit=0)


@pytest.mark.parametrize("args, first", [
    (("--model", "nope"), "{set}: no model 'nope' (models: "),
    (("--question", "nope"), "{set}: no question 'nope'"),
    (("--trajectory", "99"), "{set}: no trajectory matches `--trajectory` 99"),
    (("--limit", "0"), "Usage: "),
    (("--tokenizer", "{tmp}/tok"), "{tmp}/tok: no tokenizer.json there"),
])
def test_cli_bad_input_is_one_line_exit_2(cli, text_set, tmp_path, args, first):
    args = [a.format(tmp=tmp_path) for a in args]
    (tmp_path / "tok").mkdir()
    r = cli("view", text_set, "--out", tmp_path / "v.html", *args)
    assert r.exit_code == 2, r.output
    first = first.format(set=text_set, tmp=tmp_path)
    if first == "Usage: ":
        assert "Invalid value for '--limit'" in r.stderr and "Traceback" not in r.output
        return
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(first), r.stderr
    assert not (tmp_path / "v.html").exists()


def test_cli_writes_the_page_never_onto_an_input(cli, text_set, tmp_path):
    out = tmp_path / "view.html"
    r = cli("view", text_set, "--out", out, "--limit", "2")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().splitlines()[-1] == str(out)
    assert out.read_text(encoding="utf-8").count('<section class="traj"') == 2
    before = (text_set / "manifest.json").read_bytes()
    r = cli("view", text_set, "--out", text_set / "manifest.json")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert (text_set / "manifest.json").read_bytes() == before
    mine = tmp_path / "mine.html"
    mine.write_text("a user's file")
    r = cli("view", text_set, "--out", mine)
    assert r.exit_code == 2 and mine.read_text() == "a user's file", r.output


def test_row_groups_are_skipped_by_their_statistics_never_a_wanted_row(tmp_path):
    import pyarrow.parquet as pq

    from otbench.analysis.measurement import simulate
    from otbench.analysis.report._view_data import KEYS, _may_hold, _rows_of

    ms = simulate("tiny", seed=0)
    probes = _tables(ms)["probes"]
    path = tmp_path / "p.parquet"
    pq.write_table(probes, path, row_group_size=50)
    cols = probes.to_pydict()
    keys = list(zip(*(cols[k] for k in KEYS)))
    want = {keys[0]: 0, keys[len(keys) // 2]: 1, keys[-1]: 2}
    got = [(r, row["position"], row["sample"])
           for r, row in _rows_of(path, ("position", "sample"), want)]
    brute = [(want[k], cols["position"][i], cols["sample"][i]) for i, k in enumerate(keys)
             if k in want]
    assert got == brute and len(got) > 3
    pf = pq.ParquetFile(path)
    held = [_may_hold(pf.metadata.row_group(g), want) for g in range(pf.num_row_groups)]
    assert pf.num_row_groups > 10 and sum(held) < pf.num_row_groups / 2


def test_a_tokenizer_folder_reads_the_ids(cli, text_set, tmp_path):
    import hashlib

    tokenizers = pytest.importorskip("tokenizers")
    from otbench.analysis.report._view_data import tokenizer_decoder

    folder = tmp_path / "tok"
    folder.mkdir()
    vocab = {"<unk>": 0, "hello": 1, "</script><script>alert(1)</script>": 2}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tok.save(str(folder / "tokenizer.json"))
    decode, line = tokenizer_decoder(folder)
    assert decode([1, 2]) == "hello </script><script>alert(1)</script>"
    assert decode([1, 7, 9]) == "hello [2 ids outside this tokenizer's vocabulary]"
    assert line == "tokenizer tok/tokenizer.json (the set records no tokenizer hash)"
    mine = hashlib.sha256(tok.to_str().encode()).hexdigest()
    assert "matches the set's record" in tokenizer_decoder(folder, mine)[1]
    assert "differs from the set's record" in tokenizer_decoder(folder, "0" * 64)[1]
    out = tmp_path / "v.html"
    r = cli("view", text_set, "--out", out, "--limit", "1", "--tokenizer", folder)
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")
    assert "hello &lt;/script&gt;" in page and page.count("<script>") == 1   # ids 1, 2 of step 1


@pytest.mark.slow
def test_view_page_in_headless_chromium(text_set, tmp_path):
    """The page as a browser runs it: its own script runs, the hostile text's scripts do not,
    and nothing is fetched (skipped without a browser)."""
    from otbench.analysis.report import write_view

    exe = next((b for b in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                if b), None)
    if exe is None:
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    page = write_view(text_set, tmp_path / "view.html", limit=3, decode=decode)
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}",
            "--virtual-time-budget=3000", "--dump-dom", page.resolve().as_uri()]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    dom = r.stdout
    assert r.returncode == 0 and "<html" in dom, r.stderr[-1000:]
    assert 'data-view="ready"' in dom                  # the page's own script ran
    assert "data-pwned" not in dom                     # the model's did not
    assert "<img" not in dom and "&lt;/script&gt;&lt;script&gt;" in dom
    shot = tmp_path / "view.png"
    r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={tmp_path / 'p'}", "--window-size=1200,1600",
                        f"--screenshot={shot}", page.resolve().as_uri()],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", r.stderr[-1000:]
