"""`otbench audit-log` on a log the real lm-eval wrote (issue 42): a local task on the embedded
SmolLM2 with a small length limit, so the step-by-step replies are cut and the one-number
replies finish.

lm-eval records no finish reason; the audit reads the limit from the run's own `results_*.json`
(`pretrained=` the local folder) by re-encoding each reply against its record's `max_gen_toks`.
The censored share and the bounds are checked against a twin computed here from the samples file
with the same tokenizer, and the source's verdicts are used as they are.
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

QUESTIONS = [
    ("Reply with only the number, nothing else. What is 3 + 4?", "7"),
    ("Reply with only the number, nothing else. What is 2 + 2?", "4"),
    ("Reply with only the number, nothing else. What is 5 + 1?", "6"),
    ("Explain in detail, step by step, how to add 17 and 25.", "42"),
    ("Explain in detail, step by step, how to add 38 and 44.", "82"),
    ("Explain in detail, step by step, how to add 19 and 23.", "42"),
]
LIMIT = 32

TASK = """task: otbench_sums
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
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
    data.write_text("".join(json.dumps({"question_id": f"s{i}", "question": q, "answer": a}) + "\n"
                            for i, (q, a) in enumerate(QUESTIONS)))
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
    assert len(recs) == len(QUESTIONS)
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
