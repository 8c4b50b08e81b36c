"""The probe records the field methods' own probes when the job asks (``probe.field_probes``; issue 37).

On the tiny model (transformers engine, float32, exact): every other
column and table is what a job without the key writes; the new signals are
recomputed outside the loop from what the set stores, by sending each
source's probe again (same prompt ids, seed and sampling) and reading it
with the same rules (`otbench.probe.grading` `dynasor_probe`, `deer_trial`,
`dynasor_agreement`).
"""

import math
from pathlib import Path

import numpy as np
import pytest

PEERS = ("dynasor_answer", "dynasor_window", "dynasor_uncertain", "dynasor_tokens", "deer_conf",
         "deer_tokens")


def _job(path: Path, model: Path, extra: str = "") -> Path:
    from test_probe_resume import JOB

    text = JOB.format(model=model, n=1, R=2, temperature=0.6, model_id="tiny")
    path.write_text(text.replace("units_per_batch = 1\n", "units_per_batch = 1\n" + extra))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model, otbench_cache):
    from test_probe_resume import _run

    d = tmp_path_factory.mktemp("fieldprobes")
    _run(_job(d / "plain.toml", tiny_model), d / "plain")
    _run(_job(d / "fp.toml", tiny_model, 'field_probes = ["dynasor", "deer"]\n'), d / "fp")
    return d / "plain", d / "fp"


def test_without_the_key_nothing_changes(tmp_path, tiny_model):
    from otbench.probe.stp._job import JobError, job_from_dict, load_job
    from otbench.probe.stp._keys import run_key_material

    job = load_job(_job(tmp_path / "j.toml", tiny_model))
    assert job.field_probes == () and "field_probes" not in job.as_dict()
    key = dict(fingerprint="f", tokenizer_hash="t", engine_info={}, grader="minimal", otbench_version="v")
    assert "field_probes" not in run_key_material(job, **key)
    asked = load_job(_job(tmp_path / "k.toml", tiny_model, 'field_probes = ["deer"]\n'))
    assert asked.field_probes == ("deer",) and run_key_material(asked, **key)["field_probes"] == ["deer"]
    import tomllib
    cfg = tomllib.loads((tmp_path / "j.toml").read_text())
    cfg["probe"]["field_probes"] = ["dynasor", "nope"]
    with pytest.raises(JobError, match=r"probe.field_probes must list distinct names of dynasor, deer"):
        job_from_dict(cfg)


def test_other_columns_and_tables_are_unchanged(runs):
    from otbench.analysis.measurement import load, load_table

    plain, fp = (load(p) for p in runs)
    assert set(fp.signals) == set(plain.signals) | set(PEERS)
    for k, v in plain.signals.items():
        assert np.array_equal(v, fp.signals[k], equal_nan=True), k
    for name in ("L", "C", "y", "n"):
        assert np.array_equal(getattr(plain, name), getattr(fp, name))
    for table in ("tokens", "probes"):
        assert load_table(runs[0], table).equals(load_table(runs[1], table))
    assert "field_probes" not in plain.provenance["probe"]
    assert fp.provenance["probe"]["field_probes"] == ["dynasor", "deer"]
    from otbench.probe.stp._results import signal_definitions

    assert plain.provenance["signals"] == signal_definitions()
    assert fp.provenance["signals"] == signal_definitions(["dynasor", "deer"])
    for name in PEERS:
        assert name not in plain.provenance["signals"] and name in fp.provenance["signals"]


def test_the_signals_match_a_recomputation(runs, hf_engine):
    from otbench.analysis.measurement import load, load_table
    from otbench.probe.config import Sampling, derive_seed, load_family
    from otbench.probe.engines import GenRequest
    from otbench.probe.grading import (
        DEER_PROMPT,
        DYNASOR_SUFFIX,
        deer_trial,
        dynasor_agreement,
        dynasor_probe,
    )
    from otbench.probe.stp._lane import batch_decoder
    from otbench.probe.tokens import build_vocabulary, compile_format

    ms = load(runs[1])
    tok = hf_engine.tokenizer()
    fmt = compile_format(load_family("qwen3-thinking"), tok, build_vocabulary(tok, hf_engine.vocab_size()))
    dec1 = batch_decoder(tok)
    decode = lambda ids: dec1([list(ids)])[0]          # noqa: E731
    dyn_ids = tok.encode(DYNASOR_SUFFIX, add_special_tokens=False)
    deer_ids = tok.encode(DEER_PROMPT, add_special_tokens=False)
    job_sampling = Sampling(temperature=0.6)           # the job's: each probe overrides it
    checked = 0
    for t, row in enumerate(load_table(runs[1], "tokens").to_pylist()):
        n = int(ms.n[t])
        answers = []
        for k in range(n + 1):
            head = list(row["prompt"]) + list(row["thinking"][:row["L"][k]])
            seed = derive_seed("tiny", row["dataset"], row["question"], row["trajectory"], "dynasor", k)
            c = hf_engine.generate([GenRequest(head + dyn_ids, 1, seed, 20, fmt.answer_stop_ids,
                                               sampling=Sampling(temperature=0.6, top_p=0.95))],
                                   job_sampling)[0][0]
            p = dynasor_probe(c.token_ids, c.stop_id is not None, decode=decode, context=dyn_ids[-4:])
            answers.append(p.answer)
            assert ms.signals["dynasor_uncertain"][t, k] == int(p.uncertain)
            assert ms.signals["dynasor_tokens"][t, k] == p.decoded + len(dyn_ids)
            seed = derive_seed("tiny", row["dataset"], row["question"], row["trajectory"], "deer", k)
            c = hf_engine.generate([GenRequest(head + deer_ids, 1, seed, 20, (), ignore_eos=True,
                                               logprobs=True, sampling=Sampling())], job_sampling)[0][0]
            assert len(c.token_ids) == 20                  # decoded without stops, cut after
            tr = deer_trial(c.token_ids, c.logprobs, decode=decode, eos=fmt.answer_stop_ids,
                            context=deer_ids[-4:])
            assert ms.signals["deer_tokens"][t, k] == tr.decoded + len(deer_ids)
            assert math.isclose(ms.signals["deer_conf"][t, k], tr.conf, abs_tol=1e-5)
            assert 0.0 <= tr.conf <= 1.0
            checked += 1
        ids, windows = dynasor_agreement(answers)
        assert ms.signals["dynasor_answer"][t, :n + 1].tolist() == [float(x) for x in ids]
        assert ms.signals["dynasor_window"][t, :n + 1].tolist() == [float(x) for x in windows]
    assert checked >= 4


@pytest.fixture(scope="module")
def deepconf_run(runs, tmp_path_factory, tiny_model, otbench_cache):
    from test_probe_resume import _run


    d = tmp_path_factory.mktemp("deepconf")
    _run(_job(d / "dc.toml", tiny_model, 'field_probes = ["deepconf"]\n'), d / "dc")
    return runs[0], d / "dc"


def test_deepconf_reads_the_think_requests_own_logprobs(deepconf_run, hf_engine, tiny_model):
    """``field_probes = ["deepconf"]`` decodes nothing of its own: every other column and table is
    the plain run's, and ``deepconf_min_conf`` equals DeepConf's min_conf recomputed from one prefill
    of prompt + thinking with its top-20 prompt log-probabilities (the probe's confidence request),
    which equal the top-20 means of the think request sent again (same prompt ids and seed) while it
    samples: the tokens' own distributions."""
    from otbench.analysis.measurement import load, load_table
    from otbench.probe.config import derive_seed
    from otbench.probe.engines import GenRequest
    from otbench.probe.grading import DEEPCONF_WINDOW, deepconf_min_confs, token_confidence
    from otbench.probe.stp._field_probes import confidence_request, thinking_confidence
    from otbench.probe.stp._results import signal_definitions

    plain, dc = (load(p) for p in deepconf_run)
    assert set(dc.signals) == set(plain.signals) | {"deepconf_min_conf", "deepconf_warmup_conf"}
    for k, v in plain.signals.items():
        assert np.array_equal(v, dc.signals[k], equal_nan=True), k
    for name in ("L", "C", "y", "n"):
        assert np.array_equal(getattr(plain, name), getattr(dc, name))
    for table in ("tokens", "probes"):
        assert load_table(deepconf_run[0], table).equals(load_table(deepconf_run[1], table))
    assert dc.provenance["deepconf"] == {"window": DEEPCONF_WINDOW, "top_k": 20}
    assert dc.provenance["signals"] == signal_definitions(["deepconf"])
    assert {"deepconf_min_conf", "deepconf_warmup_conf"} <= set(dc.provenance["signals"])
    from otbench.probe.stp._job import load_job

    job = load_job(deepconf_run[1].parent / "dc.toml")
    sampling = job.sampling                                    # the family's, temperature 0.6
    from otbench.probe.config import load_family
    from otbench.probe.tokens import build_vocabulary, compile_format

    tok = hf_engine.tokenizer()
    fmt = compile_format(load_family("qwen3-thinking"), tok, build_vocabulary(tok, hf_engine.vocab_size()))
    finished = 0
    rows = load_table(deepconf_run[1], "tokens").to_pylist()
    import torch
    from transformers import AutoModelForCausalLM

    twin = AutoModelForCausalLM.from_pretrained(str(tiny_model), torch_dtype=torch.float32)
    for t, row in enumerate(rows):
        seed = derive_seed("tiny", row["dataset"], row["question"], row["trajectory"], "think")
        c = hf_engine.generate([GenRequest(list(row["prompt"]), 1, seed, 400, (), top_logprobs=20)],
                               sampling)[0][0]
        th = list(row["thinking"])
        assert list(c.token_ids[:len(th)]) == th
        n = int(dc.n[t])
        pre = hf_engine.generate([confidence_request(row["prompt"], th)], sampling)[0][0]
        conf = thinking_confidence(pre, row["prompt"], th)
        assert np.allclose(conf, c.top_mean[:len(th)], rtol=0, atol=1e-4)     # prefill = decode-time read
        want = deepconf_min_confs(token_confidence(conf), row["L"][:n + 1], DEEPCONF_WINDOW)
        got = dc.signals["deepconf_min_conf"][t, :n + 1]
        assert np.allclose(got, want, rtol=1e-6, atol=1e-6)
        assert got[0] == 0.0 and np.all(got[np.asarray(row["L"][:n + 1]) > 0] > 0)   # no token yet: 0
        # the warm-up value: the whole output as sampled (the think request sent again: thinking,
        # marker, own answer, and the stop id it ended on), read by the brute-force twin below
        if row["finished"]:
            out = th + list(fmt.end_ids) + list(row["answer"])
            assert list(c.token_ids[:len(out)]) == out
            after = c.token_ids[len(out):len(out) + 1]
            if len(row["answer"]) < job.answer_limit and after and after[0] in fmt.answer_stop_ids:
                out.append(after[0])                   # the stop id the think request ended on
        else:
            out = th + ([row["stop_id"]] if row["stop_id"] is not None else [])
        finished += bool(row["finished"])
        want = _warmup_twin(twin, row["prompt"], out, DEEPCONF_WINDOW)
        assert dc.signals["deepconf_warmup_conf"][t].tolist() == pytest.approx([want] * dc.L.shape[1],
                                                                               rel=0, abs=2e-6)
    assert len(rows) >= 2
    print(f"{finished} of {len(rows)} trajectories finished their thinking")


def _warmup_twin(model, prompt, output, window: int) -> float:
    """DeepConf's warm-up min_conf (deepconf utils.py lines 41-62, 282-303) of `output` after `prompt`,
    by a forward pass of the tiny model and plain NumPy: per output token the mean of the 20 largest
    log-probabilities and its own when it is not among them, negated and rounded to 3 decimals; the
    lowest rounded mean of `window` of them, or the mean of all for fewer."""
    import torch
    ids = list(prompt) + list(output)
    with torch.inference_mode():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1).numpy()
    confs = []
    for i in range(len(prompt), len(ids)):
        row = lp[i - 1].astype(np.float64)
        top = np.argsort(-row, kind="stable")[:20]
        vals = [row[ids[i]]] + [row[j] for j in top if j != ids[i]]
        confs.append(round(-np.mean(vals), 3))
    if len(confs) < window:
        return sum(confs) / len(confs) if confs else 0.0
    return min(round(sum(confs[i:i + window]) / window, 3) for i in range(len(confs) - window + 1))




def test_the_deepconf_window_key(tmp_path, tiny_model):
    from otbench.probe.stp._job import JobError, load_job
    from otbench.probe.stp._keys import run_key_material

    key = dict(fingerprint="f", tokenizer_hash="t", engine_info={}, grader="minimal", otbench_version="v")
    plain = load_job(_job(tmp_path / "p.toml", tiny_model))
    assert "deepconf_window" not in plain.as_dict() and "deepconf_window" not in run_key_material(plain, **key)
    dc = load_job(_job(tmp_path / "d.toml", tiny_model, 'field_probes = ["deepconf"]\ndeepconf_window = 16\n'))
    assert dc.deepconf_window == 16 and run_key_material(dc, **key)["deepconf_window"] == 16
    default = load_job(_job(tmp_path / "e.toml", tiny_model, 'field_probes = ["deepconf"]\n'))
    assert default.deepconf_window == 2048 and default.as_dict()["deepconf_window"] == 2048
    with pytest.raises(JobError, match=r'probe\.deepconf_window applies only when probe\.field_probes lists '
                                       r'"deepconf"$'):
        load_job(_job(tmp_path / "f.toml", tiny_model, 'deepconf_window = 16\n'))
    with pytest.raises(JobError, match=r"probe\.deepconf_window must be"):
        load_job(_job(tmp_path / "g.toml", tiny_model, 'field_probes = ["deepconf"]\ndeepconf_window = 0\n'))


@pytest.fixture(scope="module")
def own_rules_run(tmp_path_factory, tiny_model, otbench_cache):
    from test_probe_resume import JOB, _run

    d = tmp_path_factory.mktemp("ownrules")
    text = JOB.format(model=tiny_model, n=4, R=2, temperature=0.6, model_id="tiny")
    (d / "j.toml").write_text(text.replace("units_per_batch = 1\n", 'units_per_batch = 1\n'
                                           'field_probes = ["thinkbrake", "deepconf"]\n'))
    _run(d / "j.toml", d / "set")
    return d / "set"


def test_bench_scores_the_peers_own_rules_on_a_probed_set(own_rules_run):
    """A probed set with ``field_probes = ["thinkbrake", "deepconf"]`` and the prompt's length:
    `thinkbrake` is scored (a set without its signals is refused), `deepconf-exit` fits on the
    source's warm-up value, and the net cost's partial block counts the prompt."""
    from otbench.analysis.bench import assign_splits, evaluate
    from otbench.analysis.measurement import load, load_table

    ms = assign_splits(load(own_rules_run))
    assert {"thinkbrake_check", "thinkbrake_margin", "deepconf_warmup_conf", "prompt_tokens"} <= set(ms.signals)
    prompts = [len(p) for p in load_table(own_rules_run, "tokens").column("prompt").to_pylist()]
    assert ms.signals["prompt_tokens"][:, 0].tolist() == [float(p) for p in prompts]
    tb = evaluate(ms, "thinkbrake").to_json()
    assert tb["net"]["signal_cost"]["partial_block_prefix"] == "prompt_tokens + L(j)"
    dc = evaluate(ms, "deepconf-exit").to_json()
    assert dc["config"]["method_config"]["warmup"].startswith("the source's: signal.deepconf_warmup_conf")
