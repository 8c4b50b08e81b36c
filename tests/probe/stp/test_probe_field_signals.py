"""The probe records the field signals and the own-context margin (issues 27, 28), on the tiny model.

The reference is recomputed outside the loop from what the set stores: each
position's first probe answer (the `probes` table), its log-probabilities
read again by teacher forcing (the engine's full-vocabulary readout after
each prefix of the probe), `probe_signals` on them, and the ThinkBrake
signal request on `prompt + thinking[:L]`.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from otbench.probe.stp import SIGNALS, UnitResult


@pytest.fixture(scope="module")
def probed(tmp_path_factory, tiny_model, otbench_cache):
    from test_probe_resume import _run, write_job

    d = tmp_path_factory.mktemp("field")
    out = d / "set"
    _run(write_job(d / "job.toml", tiny_model, n=2, R=2), out)
    return out


def test_all_signals_recorded_with_their_definitions(probed):
    from otbench.analysis.measurement import SIGNAL_DEFINITIONS, load
    from otbench.probe.stp._results import OWN_CONTEXT, signal_definitions

    ms = load(probed)
    assert set(ms.signals) == set(SIGNALS)
    prov = ms.provenance
    assert prov["signals"] == signal_definitions()
    for name, text in SIGNAL_DEFINITIONS.items():
        assert prov["signals"][name] == text
    assert prov["signals"]["margin_own"] == OWN_CONTEXT["margin_own"]
    assert prov["probe"]["hesitation_words"] == ["wait", "hold", "but", "okay", "no", "hmm"]
    assert not ms.synthetic and "field_signals" not in prov       # recorded, not drawn


def test_field_signals_match_a_recomputation(probed, hf_engine):
    from otbench.analysis.measurement import load, load_table
    from otbench.probe.config import load_family
    from otbench.probe.grading import number_answers, probe_signals
    from otbench.probe.stp._lane import batch_decoder
    from otbench.probe.tokens import build_vocabulary, compile_format

    ms = load(probed)
    tok = hf_engine.tokenizer()
    fmt = compile_format(load_family("qwen3-thinking"), tok, build_vocabulary(tok, hf_engine.vocab_size()))
    decode1 = batch_decoder(tok)
    decode = lambda ids: decode1([list(ids)])[0]          # noqa: E731
    tokens = load_table(probed, "tokens").to_pylist()
    probes = [p for p in load_table(probed, "probes").to_pylist() if p["sample"] == 0]
    first = {(p["question"], p["trajectory"], p["position"]): p for p in probes}
    seen = {"answer": set(), "hesitation": set()}
    for t, row in enumerate(tokens):
        n = int(ms.n[t])
        keys, ok = [], []
        for k in range(n + 1):
            p = first[row["question"], row["trajectory"], k]
            ids = list(p["tokens"])
            ctx = fmt.probe_prompt(row["prompt"], row["thinking"], row["L"][k])
            lps = [hf_engine.choice_logprobs([ctx + ids[:i]], [ids[i]])[0][0] for i in range(len(ids))]
            stopped = len(ids) < 6                                   # answer_limit = 6
            want = probe_signals("math", ids, lps, prefix=fmt.answer_prefix_ids, decode=decode,
                                 stopped=stopped)
            keys.append(want.key)
            ok.append(p["status"] == "ok")
            assert ms.signals["answer_tokens"][t, k] == want.tokens
            assert ms.signals["hesitation"][t, k] == int(want.hesitation)
            assert math.isclose(ms.signals["answer_conf"][t, k], want.conf, abs_tol=1e-4)
            assert 0.0 <= ms.signals["answer_conf"][t, k] <= 1.0
            seen["hesitation"].add(int(want.hesitation))
        ids = number_answers(keys, ok)
        assert ms.signals["answer"][t, :n + 1].tolist() == [float(x) for x in ids]
        seen["answer"].update(ids)
    assert seen["answer"] and seen["hesitation"]


def test_margin_own_is_the_signal_in_the_models_own_context(probed, hf_engine):
    from otbench.analysis.measurement import load, load_table
    from otbench.probe.config import load_family
    from otbench.probe.tokens import build_vocabulary, compile_format
    from test_probe_resume import SIGNAL_ATOL

    ms = load(probed)
    tok = hf_engine.tokenizer()
    fmt = compile_format(load_family("qwen3-thinking"), tok, build_vocabulary(tok, hf_engine.vocab_size()))
    differs = 0
    for t, row in enumerate(load_table(probed, "tokens").to_pylist()):
        n = int(ms.n[t])
        own = hf_engine.signals([list(row["prompt"]) + list(row["thinking"][:L]) for L in row["L"]],
                                fmt.signal_id)
        got = np.asarray(ms.signals["margin_own"])[t, :n + 1]
        assert np.allclose(got, [s.logp_other - s.logp_end for s in own], rtol=0, atol=SIGNAL_ATOL)
        differs += int(np.any(np.abs(got[1:] - np.asarray(ms.signals["margin"])[t, 1:n + 1]) > 1e-6))
    assert differs, "the own context never changed the margin: the two signals would be one"


def test_hf_engine_returns_the_raw_logprobs_of_its_samples(hf_engine):
    from otbench.probe.config import Sampling
    from otbench.probe.engines import GenRequest

    hot = Sampling(temperature=1.3, top_p=0.9, top_k=20, presence_penalty=0.5)
    prompt = [5, 6, 7, 8]
    c = hf_engine.generate([GenRequest(prompt, 1, 7, 8, (), logprobs=True)], hot)[0][0]
    assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids)
    for i, t in enumerate(c.token_ids):
        raw = hf_engine.choice_logprobs([prompt + list(c.token_ids[:i])], [t])[0][0]
        assert c.logprobs[i] == pytest.approx(raw, abs=1e-4)      # raw: before temperature and filters
    plain = hf_engine.generate([GenRequest(prompt, 1, 7, 8, ())], hot)[0][0]
    assert plain.logprobs is None and plain.token_ids == c.token_ids


def test_a_set_without_the_new_signals_still_loads(tmp_path: Path):
    """Units of a journal written before (no own-context or field signals) give a set without them."""
    from otbench.analysis.measurement import load, save
    from otbench.probe.stp._output import measurement_set
    from otbench.probe.stp._results import signal_definitions
    from test_probe_job import _unit

    old = []
    for q in ("q1", "q2"):
        rec = _unit(q).to_record()
        for k in ("logp_end_own", "logp_other_own", "answer_id", "answer_conf", "hesitation", "answer_tokens"):
            rec.pop(k)
        old.append(UnitResult.from_record(rec))
    # an old record holds the prompt ids, so the prompt's length is known: prompt_tokens is written
    ms = measurement_set(old, model="m", P=2, provenance={"signals": signal_definitions()})
    assert set(ms.signals) == {"logp_end", "logp_other", "margin", "prompt_tokens"}
    assert set(ms.provenance["signals"]) == set(ms.signals)
    assert ms.signals["prompt_tokens"][0, :3].tolist() == [float(len(old[0].prompt))] * 3
    assert "prompt_tokens" not in old[0].to_record()          # the record's form is unchanged
    save(ms, tmp_path / "old")
    back = load(tmp_path / "old")
    assert set(back.signals) == {"logp_end", "logp_other", "margin", "prompt_tokens"}
    # the count survives dropping the ids (the runner's summaries); a unit without either: no column
    summary = dataclasses.replace(old[0], prompt=())
    assert summary.prompt_tokens == len(old[0].prompt)
    bare = dataclasses.replace(old[1], prompt=(), prompt_tokens=None)
    assert "prompt_tokens" not in measurement_set([summary, bare], model="m", P=2).signals
    # one unit with them and one without: the columns are left out (never half-filled)
    new = dataclasses.replace(old[0], logp_end_own=(-1.0, -2.0, -3.0), logp_other_own=(-0.5,) * 3,
                              answer_id=(-1, 1, 0), answer_conf=(.1, .2, .3), hesitation=(0, 1, 0),
                              answer_tokens=(3, 4, 5))
    ms2 = measurement_set([new, old[1]], model="m", P=2)
    assert set(ms2.signals) == {"logp_end", "logp_other", "margin", "prompt_tokens"}
    ms3 = measurement_set([new], model="m", P=2, provenance={"signals": signal_definitions()})
    assert set(ms3.signals) == set(SIGNALS)
    assert ms3.signals["margin_own"][0, :3].tolist() == [0.5, 1.5, 2.5]
    assert ms3.signals["answer"][0, :3].tolist() == [-1.0, 1.0, 0.0]


def test_hesitation_words_job_key(tmp_path: Path):
    from otbench.probe.stp import JobError, job_from_dict

    base = {"model": {"path": str(tmp_path), "family": "qwen3-thinking"}}
    assert job_from_dict(base).hesitation_words == ("wait", "hold", "but", "okay", "no", "hmm")
    job = job_from_dict({**base, "probe": {"hesitation_words": ["verify", "Hmm"]}})
    assert job.hesitation_words == ("verify", "Hmm")
    for bad in ([], ["two words"], "wait", [3]):
        with pytest.raises(JobError, match="hesitation_words"):
            job_from_dict({**base, "probe": {"hesitation_words": bad}})
