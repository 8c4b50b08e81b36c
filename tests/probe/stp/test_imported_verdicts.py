"""Imported verdicts kept (issue 37 item 4) and logs of more frameworks (issue 40).

An imported trajectory's `y` is its source's verdict; otbench's grade of the same
answer sits beside it, and the disagreements are summarized in one line. The
lm-eval extraction forms are replayed case by case against lm-eval's control flow
(`otbench.evallogs._extract` cites the file and line). The inspect-ai log is written
by inspect-ai itself (its mock model, offline); the lighteval details by lighteval's
own details writer when it is installed.
"""

import json
from pathlib import Path

import pytest
from _evallogs import inspect_log, lighteval_details
from otbench.probe.data import DatasetError, load_questions
from otbench.probe.stp._imported import import_trajectories
from otbench.probe.stp._job import job_from_dict

from otbench.evallogs import PRESETS, Extraction, ExtractionError, exact_match, extraction, read_log

# -- lm-eval's extraction, case by case --------------------------------------------------------


def test_regex_filter_replays_lm_eval_control_flow():
    strict, cot, flex = PRESETS["strict-match"], PRESETS["the-answer-is"], PRESETS["flexible-extract"]
    assert strict.apply("so\n#### 1,234") == "1,234"
    assert strict.apply("The answer is 5.") == "[invalid]"               # no match: the fallback
    assert cot.apply("3 + 4 = 7. The answer is 7.") == "7"
    # group_select 0: the first; the class takes the "." and the pattern's unescaped "." the
    # space after it, exactly as in lm-eval (its metric then drops the "." with `\\.$`)
    assert cot.apply("The answer is 7. The answer is 8.") == "7."
    # two groups: findall gives tuples; the first non-empty group of the last match (-1)
    assert flex.apply("12 apples, then $3.50 and 7") == "7"
    assert flex.apply("costs $3.50") == "$3.50"
    assert flex.apply("no digits") == "[invalid]"
    assert strict.apply(None) == "[invalid]"                               # not a string: read as ""
    assert Extraction("x", r"(a)|(b)", 0).apply("b") == "b"
    assert Extraction("x", r"(a)?(c)?", 0, fallback="F").apply("zz") == "F"  # every group empty
    assert Extraction("x", r"(\d+)", 5).apply("1 2") == "[invalid]"        # past the matches
    assert extraction({"regex": r"ANSWER: (\w+)", "group_select": -1}).apply("ANSWER: a ANSWER: b") == "b"
    with pytest.raises(ExtractionError, match="'regex' '\\(' does not compile"):
        extraction({"regex": "("})
    with pytest.raises(ExtractionError, match="is not one of strict-match"):
        extraction("boxed")


def test_exact_match_restates_lm_eval_order_of_steps():
    from otbench.evallogs import GSM8K_IGNORE

    # GSM8K's metric: the ignores removed in turn, then lower case
    assert exact_match("$1,234.", "1234", regexes_to_ignore=GSM8K_IGNORE, ignore_case=True)
    assert exact_match("72", "Natalia sold 48/2 = 24 clips.\n#### 72", regexes_to_ignore=GSM8K_IGNORE)
    assert not exact_match("72", "#### 73", regexes_to_ignore=GSM8K_IGNORE)
    assert exact_match("A!", "a", ignore_case=True, ignore_punctuation=True)
    assert not exact_match("A!", "a", ignore_case=True)
    assert exact_match("x1", "x2", ignore_numbers=True)


# -- an lm-eval sample file with "The answer is N" ---------------------------------------------

def _lm_eval_file(tmp_path: Path, questions, wrong=(5,), cot="The answer is {}.") -> Path:
    rows = []
    for k, q in enumerate(questions):
        ans = "999" if k in wrong else q.reference
        rows.append({"doc_id": k, "doc": {"question_id": q.id, "question": q.text}, "target": q.reference,
                     "arguments": {"gen_args_0": {"arg_0": f"Q: {q.text}\nA:", "arg_1": {"until": ["Q:"]}}},
                     "resps": [[f"<think>\nadding up</think>{cot.format(ans)}"]], "filtered_resps": [ans],
                     "filter": "strict-match", "metrics": ["exact_match"], "exact_match": float(k not in wrong)})
        rows.append({**rows[-1], "filter": "flexible-extract"})       # lm-eval's second filter
    p = tmp_path / "tiny" / "samples_sums-cot_2026-01-01T00-00-00.000000.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _cfg(tiny_model, path, n=6, fmt="lm-eval", **extra):
    return {"model": {"family": "qwen3-thinking", "id": "tiny", "path": str(tiny_model)},
            "engine": {"kind": "transformers", "dtype": "float32", "max_model_len": 256},
            "data": {"source": "sums", "n": n}, "probe": {"P": 1, "b": 16, "thinking_limit": 40, "answer_limit": 6},
            "grader": {"kind": "minimal"}, "trajectories": {"path": str(path), "format": fmt, **extra}}


def _import(cfg):
    lines = []
    job = job_from_dict(cfg)
    qs = load_questions(cfg["data"])
    return import_trajectories(job, qs, lines.append), lines


def test_lm_eval_answer_is_n_imports_with_source_verdicts_and_one_line(tmp_path: Path, tiny_model):
    qs = load_questions({"source": "sums", "n": 6})
    path = _lm_eval_file(tmp_path, qs)
    imp, lines = _import(_cfg(tiny_model, path))
    # y is lm-eval's verdict (5 right, 1 wrong), although otbench's rule (the final \boxed{}) reads none
    assert [t.verdict[0] for t in imp.job.replay] == [1, 1, 1, 1, 1, 0]
    assert imp.job.replay[0].verdict[1] == "source exact_match (strict-match)=1; otbench 0 no_answer"
    v = imp.record["verdicts"]
    assert (v["kept"], v["source_correct"], v["otbench_correct"], v["disagree"], v["source_only"]) == (6, 5, 0, 5, 5)
    assert len(v["trajectories"]) == 6 and v["examples"][0]["answer"] == "The answer is 7."
    (line,) = [ln for ln in lines if ln.startswith("verdicts:")]
    assert line.startswith("verdicts: exact_match (strict-match) kept as y for 6 of 6 trajectories "
                           "(source 5 correct, otbench's grader [extract: none: the final \\boxed{}] 0); "
                           "5 disagree (5 right only by the source, 0 only by otbench); e.g. sums-0-0#0 "
                           "'The answer is 7.' (source 1, otbench 0 no_answer)")
    # the answer cut at answer_limit is counted and said, in the same line
    assert imp.record["answer_cut"] == 1 and line.endswith("1 own answers cut at answer_limit = 6 tokens before grading")
    # lm-eval's own form for otbench's grader: the two agree, case by case
    imp, lines = _import(_cfg(tiny_model, path, extract="the-answer-is"))
    v = imp.record["verdicts"]
    assert (v["source_correct"], v["otbench_correct"], v["disagree"]) == (5, 5, 0)
    assert [t[3:5] for t in v["trajectories"]] == [[1, 1]] * 5 + [[0, 0]]
    # the other filter's records, and otbench's grades as y when asked
    imp, _ = _import(_cfg(tiny_model, path, filter="flexible-extract", verdicts="otbench", extract="the-answer-is"))
    assert [t.verdict for t in imp.job.replay][:1] == [(1, "ok")]
    assert imp.record["verdicts"]["source"] == "exact_match (flexible-extract)"


def test_import_options_refused_in_one_line(tmp_path: Path, tiny_model):
    qs = load_questions({"source": "sums", "n": 2})
    path = _lm_eval_file(tmp_path, qs, wrong=())
    with pytest.raises(DatasetError, match=r"trajectories.verdicts must be one of source, otbench, got 'x'"):
        _import(_cfg(tiny_model, path, n=2, verdicts="x"))
    with pytest.raises(DatasetError, match=r"trajectories.extract: extraction 'nope' is not one of"):
        _import(_cfg(tiny_model, path, n=2, extract="nope"))
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[0]["exact_match"] = 0.5
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError, match=r"jsonl:1: the source's verdict 0.5 \(exact_match \(strict-match\)\) "
                                           r"is not 0 or 1"):
        _import(_cfg(tiny_model, path, n=2))


def test_trace_prompt_is_the_question_prompt(tmp_path: Path, tiny_model):
    from otbench.probe.stp._direct import encode_prompts
    from transformers import AutoTokenizer

    qs = load_questions({"source": "sums", "n": 2})
    path = _lm_eval_file(tmp_path, qs, wrong=())
    imp, _ = _import(_cfg(tiny_model, path, n=2, prompt="trace"))
    assert [q.prompt for q in imp.questions] == [f"Q: {q.text}\nA:" for q in qs]
    assert imp.record["prompt"] == "trace"
    tok = AutoTokenizer.from_pretrained(tiny_model)
    ids = encode_prompts(None, tok, imp.questions, {})
    assert ids[0] == tok.encode(f"Q: {qs[0].text}\nA:", add_special_tokens=False)
    imp, _ = _import(_cfg(tiny_model, path, n=2))        # the default: otbench's prompt
    assert [q.prompt for q in imp.questions] == [None, None] and imp.record["prompt"] == "otbench"


def _run(cfg, out):
    from otbench.probe.stp._runner import run_job

    lines = []
    run_job(job_from_dict(cfg), out, progress=False, log=lines.append)
    return lines


def test_probed_set_keeps_source_verdicts(tmp_path: Path, tiny_model, otbench_cache):
    from otbench.analysis.measurement import load_table, read_manifest

    qs = load_questions({"source": "sums", "n": 3})
    path = _lm_eval_file(tmp_path, qs, wrong=(2,))
    lines = _run(_cfg(tiny_model, path, n=3), tmp_path / "set")
    tok = load_table(tmp_path / "set", "tokens").to_pylist()
    assert [(t["question"], t["y"]) for t in tok] == [(q.id, int(k != 2)) for k, q in enumerate(qs)]
    assert all(t["y_status"].startswith("source exact_match (strict-match)=") for t in tok)
    prov = read_manifest(tmp_path / "set")["provenance"]["trajectories"]
    assert prov["verdicts"]["disagree"] == 2 and prov["answer_cut"] == 1
    assert any(ln.startswith("verdicts: exact_match (strict-match) kept as y for 3 of 3") for ln in lines)
    from otbench.analysis.overthinking import set_accuracy_reason
    assert set_accuracy_reason(tmp_path / "set") == (
        "Original full-thinking accuracy 66.67 % (2 of 3 own answers correct): 3 of the 3 verdicts are "
        "the imported source's own (docs/guides/import-traces.md)")


# -- inspect-ai: a log its mock model wrote ----------------------------------------------------

def test_inspect_mock_log_imports_into_a_set(tmp_path: Path, tiny_model, otbench_cache):
    from otbench.analysis.measurement import load_table

    qs = load_questions({"source": "sums", "n": 3})
    replies = [f"<think>\nadding</think>The answer is {qs[0].reference}.", "<think>\nstill adding",
               f"<think>\nhmm</think>It is {int(qs[2].reference) + 1}."]
    path = inspect_log(tmp_path, qs, replies, ["stop", "max_tokens", "stop"])
    reps = read_log(path)
    assert [(r.question_id, r.finished, r.length_stop, r.verdict, r.metric) for r in reps] == [
        (qs[0].id, True, False, 1.0, "match"), (qs[1].id, False, True, 0.0, "match"),
        (qs[2].id, True, False, 0.0, "match")]
    assert reps[0].task == "sums" and reps[0].model == "mockllm/model" and reps[0].extracted == qs[0].reference
    lines = _run(_cfg(tiny_model, path, n=3, fmt="inspect-ai"), tmp_path / "set")
    tok = load_table(tmp_path / "set", "tokens").to_pylist()
    # inspect-ai's verdicts are the set's y, the cut trace is not finished
    assert [(t["question"], t["y"], t["finished"]) for t in tok] == [
        (qs[0].id, 1, True), (qs[1].id, 0, False), (qs[2].id, 0, True)]
    assert any(ln.startswith("verdicts: match kept as y for 3 of 3") for ln in lines)


# -- lighteval details -------------------------------------------------------------------------

def test_lighteval_details_keep_their_metric(tmp_path: Path):
    rows = [{"doc": {"query": "What is 2 + 2?", "choices": ["4"], "gold_index": 0, "id": "q1", "generation_size": 8},
             "model_response": {"input": "What is 2 + 2?", "text": ["<think>\nadd</think>The answer is 4."],
                                "text_post_processed": ["The answer is 4."], "output_tokens": [[1, 2, 3]]},
             "metric": {"extractive_match": 1.0}},
            {"doc": {"query": "What is 3 + 3?", "choices": ["6"], "gold_index": 0, "id": "q2", "generation_size": 4},
             "model_response": {"input": "What is 3 + 3?", "text": ["<think>\nlong"],
                                "text_post_processed": ["<think>\nlong"], "output_tokens": [[1, 2, 3, 4]]},
             "metric": {"extractive_match": 0.0}}]
    path = lighteval_details(tmp_path, rows)
    reps = read_log(path)
    assert [(r.task, r.model, r.question_id, r.finished, r.length_stop, r.verdict, r.metric, r.reference)
            for r in reps] == [("lighteval|sums|0", "org/model", "q1", True, False, 1.0, "extractive_match", "4"),
                               ("lighteval|sums|0", "org/model", "q2", False, True, 0.0, "extractive_match", "6")]
    assert reps[0].extracted == "The answer is 4." and reps[0].prompt == "What is 2 + 2?"
