"""Logs the real lm-eval writes (issues 40 and 42): a local task over the embedded SUMS
questions, run on the embedded SmolLM2 with a small length limit, so the step-by-step replies
are cut and the one-number replies finish. One lm-eval run serves both readers:

* `otbench audit-log`: lm-eval records no finish reason; the audit reads the limit from the
  run's own `results_*.json` (`pretrained=` the local folder) by re-encoding each reply against
  its record's `max_gen_toks`. The censored share and the bounds are checked against a twin
  computed here from the samples file with the same tokenizer.
* the probe's trace import (`[trajectories] format = "lm-eval"`): each document's reply becomes
  a trajectory and lm-eval's own verdict its `y`.

The source's verdicts are used as they are in both.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from otbench.cli import main

pytest.importorskip("lm_eval")
transformers = pytest.importorskip("transformers")

N = 6
SHORT = "Reply with only the number, nothing else. "
LONG = "Explain in detail, step by step, how you find the answer. "
LIMIT = 32


def _questions():
    from otbench.probe.data import load_questions

    return load_questions({"source": "sums", "n": N})

TASK = """task: otbench_sums
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["<|im_end|>"]
  max_gen_toks: {limit}
  do_sample: false
filter_list:
  - name: number
    filter:
      - function: regex
        regex_pattern: "The answer is (\\\\d+)"
      - function: take_first
metric_list:
  - metric: exact_match
"""


@pytest.fixture(scope="module")
def lm_eval_samples(tmp_path_factory):
    from _models import embedded_smollm2

    _, folder = embedded_smollm2()
    work = tmp_path_factory.mktemp("lm-eval")
    data = work / "tasks" / "sums.jsonl"
    data.parent.mkdir()
    # the first half asked for the number alone (finished), the rest for an explanation (cut)
    data.write_text("".join(json.dumps({"question_id": q.id, "question": q.text, "answer": q.reference,
                                        "prompt": (SHORT if i < N // 2 else LONG) + q.text}) + "\n"
                            for i, q in enumerate(_questions())))
    (work / "tasks" / "sums.yaml").write_text(TASK.format(data=data, limit=LIMIT))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run([str(Path(sys.executable).parent / "lm_eval"), "--model", "hf", "--model_args",
                        f"pretrained={folder},dtype=float32", "--tasks", "otbench_sums", "--include_path",
                        str(work / "tasks"), "--log_samples", "--output_path", str(work / "out"),
                        "--apply_chat_template", "--device", "cpu"],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    (samples,) = (work / "out").glob("*/samples_otbench_sums_*.jsonl")
    return samples, folder


def test_audit_reads_the_length_limit_of_a_real_lm_eval_log(lm_eval_samples, tmp_path):
    samples, folder = lm_eval_samples
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    recs = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(recs) == N
    cut = np.array([len(tok.encode(r["resps"][0][0], add_special_tokens=False)) >= LIMIT for r in recs])
    verdict = np.array([r["exact_match"] for r in recs], dtype=float)
    assert 0 < cut.sum() < len(recs)                   # the small limit cuts some replies, not all
    res = CliRunner().invoke(main, ["audit-log", str(samples), "--replicates", "500", "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert f"length limit: each reply's tokens counted with the tokenizer in {folder}" in res.output
    k = int(cut.sum())
    assert (f"{k} of {len(recs)} replies censored ({100 * k / len(recs):.1f} %: 0 never closed their thinking, "
            f"{k} hit the length limit)") in res.output
    doc = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert doc["length_limit"]["tokenizer"] == str(folder)
    (g,) = doc["groups"]
    assert g["task"].startswith("otbench_sums") and "number" in g["task"]
    # one reply per question: the item means are the replies themselves
    assert g["reported"]["estimate"] == pytest.approx(verdict.mean())
    assert g["worst_case"]["estimate"] == pytest.approx(np.where(cut, 0.0, verdict).mean())
    assert g["best_case"]["estimate"] == pytest.approx(np.where(cut, 1.0, verdict).mean())
    # without the results file the limit is not recorded, and the audit says so
    bare = tmp_path / "bare" / samples.name
    bare.parent.mkdir()
    bare.write_text(samples.read_text())
    res = CliRunner().invoke(main, ["audit-log", str(bare), "--replicates", "50"])
    assert res.exit_code == 0 and "length limit: not recorded" in res.output
    assert "0 hit the length limit" in res.output


def test_a_real_lm_eval_log_imports_with_its_own_verdicts(lm_eval_samples):
    from otbench.probe.stp import job_from_dict
    from otbench.probe.stp._imported import import_trajectories

    samples, folder = lm_eval_samples
    recs = {json.loads(line)["doc"]["question_id"]: json.loads(line) for line in samples.read_text().splitlines()}
    cfg = {"model": {"family": "generic-chat", "id": "smollm2", "path": str(folder)},
           "engine": {"kind": "transformers", "dtype": "float32", "max_model_len": 512},
           "data": {"source": "sums", "n": N}, "probe": {"P": 1, "b": 16, "thinking_limit": 64, "answer_limit": 8},
           "grader": {"kind": "minimal"}, "trajectories": {"path": str(samples), "format": "lm-eval"}}
    lines: list[str] = []
    imp = import_trajectories(job_from_dict(cfg), _questions(), lines.append)
    assert len(imp.job.replay) == N
    # y is lm-eval's verdict of each document, as lm-eval scored it
    want = [int(recs[q.id]["exact_match"]) for q in _questions()]
    assert [t.verdict[0] for t in imp.job.replay] == want
    v = imp.record["verdicts"]
    assert v["source"] == "exact_match (number)" and v["kept"] == N and v["source_correct"] == sum(want)
    assert any(ln.startswith("verdicts: exact_match (number) kept as y for 6 of 6") for ln in lines), lines
