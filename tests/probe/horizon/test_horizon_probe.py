"""The horizon probe: spellings, token-exact stops, controls, engines, runs, the positive control (SPEC §8).

Real engines run the tiny random Qwen3-style model (one transformers and one
vLLM engine per session); `_horizon_engines.ScriptedEngine` stands in for a
model where the test needs a known reader: the scripted positive control
(a reader that uses exactly what the stopped reasoning reveals) and the
terminal-replay agreement check (a reader that hashes the context ids, so
any id that differs between a natural answer's context and its replay
changes the answer with probability 3/4).
"""

import hashlib
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")

from _horizon_engines import ScriptedEngine  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from otbench.analysis.horizon import _inference as inf  # noqa: E402
from otbench.analysis.horizon._analysis import analyze  # noqa: E402
from otbench.analysis.measurement._horizon_run import load_run  # noqa: E402
from otbench.cli._horizon import horizon_group  # noqa: E402
from otbench.probe.config._family import load_family  # noqa: E402
from otbench.probe.engines._interface import EngineConfig, open_engine  # noqa: E402
from otbench.probe.horizon._job import horizon_job_from_dict  # noqa: E402
from otbench.probe.horizon._readout import (  # noqa: E402
    find_spellings,
    length_batches,
    logp_from_ids,
    readout_logprobs,
)
from otbench.probe.horizon._run import run_horizon  # noqa: E402
from otbench.probe.horizon._sources import (  # noqa: E402
    choice_sum_questions,
    reveal_position,
    scripted_thinking,
)
from otbench.probe.horizon._stops import (  # noqa: E402
    assign_donors,
    plain_ids,
    random_prefix,
    shuffled_prefix,
    stop_input,
)
from otbench.probe.stp._job import JobError  # noqa: E402
from otbench.probe.tokens._probe_prompts import compile_format  # noqa: E402
from otbench.probe.tokens._vocab import build_vocabulary  # noqa: E402


@pytest.fixture(scope="session")
def tok(hf_engine):
    return hf_engine.tokenizer()


@pytest.fixture(scope="session")
def fmt(hf_engine, tok):
    return compile_format(load_family("qwen3-thinking"), tok, build_vocabulary(tok, hf_engine.vocab_size()))


def job_dict(tiny_model, **horizon):
    h = {"replicates": 1, "thinking_limit": 40, "answer_limit": 4, "horizons": [0, 8, 24, 40],
         "checkpoints": [0, 16, 32], "batch": 64} | horizon
    return {"model": {"path": str(tiny_model), "family": "qwen3-thinking", "id": "tiny"},
            "engine": {"kind": "transformers", "dtype": "float32", "max_model_len": 1024},
            "data": {"source": "choice-sums", "n": 3, "seed": 0}, "horizon": h,
            "arm": [{"name": "base"}, {"name": "brief", "instruction": "Be brief."}]}


def sha(ids):
    return hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()


# -- spellings, stops, controls -------------------------------------------------------------------

def test_spellings_of_the_tiny_tokenizer(tok):
    sp = find_spellings(tok, 4)
    assert sp.letters == "ABCD"
    for o, ch in enumerate("ABCD"):
        for form, text in (("bare", ch), ("space", " " + ch)):
            enc = tok.encode(text, add_special_tokens=False)
            if len(enc) == 1:       # a one-token spelling must be found ...
                assert enc[0] in sp.ids[o] and sp.forms[o][sp.ids[o].index(enc[0])] == form
            else:                   # ... and a form without one is recorded as missing
                assert (ch, form) in sp.missing
        assert all(tok.decode([t]) in (ch, " " + ch) for t in sp.ids[o])
    # the tiny tokenizer has no single-token " B" or " D" (checked by encoding above)
    assert ("B", "space") in sp.missing and ("D", "space") in sp.missing
    lp = logp_from_ids([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0][:len(sp.flat_ids)], sp, 4)
    assert lp[0] == pytest.approx(np.logaddexp(-1.0, -2.0))


@settings(max_examples=25)
@given(st.lists(st.integers(10, 400), max_size=30), st.integers(0, 40), st.booleans(),
       st.sampled_from(["", "\n\nTime is up.\n"]))
def test_stops_copy_ids_and_completed_blocks_replay_the_natural_context(fmt, tok, thinking, B, finished,
                                                                          closure):
    prompt = [5, 6, 7]
    cl = tok.encode(closure, add_special_tokens=False) if closure else []
    ids, keep, term = stop_input(fmt, prompt, thinking, B, finished, cl, fmt.answer_prefix_ids)
    L = len(thinking)
    if finished and L <= B:
        assert term and keep == L
        assert ids == fmt.answer_context(prompt, thinking, True)      # exactly the natural context
        return
    assert not term and keep == min(B, L)
    assert ids[:len(prompt) + keep] == prompt + thinking[:keep]       # copied, never re-encoded
    tail = ids[len(prompt) + keep:]
    suffix = list(fmt.end_ids) + list(fmt.answer_prefix_ids)
    assert tail[len(tail) - len(suffix):] == suffix
    mid = tail[:len(tail) - len(suffix)]
    if cl:
        assert mid == cl
    else:   # the neutral closure: the family's separator unless the kept text ends with a line feed
        last = (prompt + thinking[:keep])[-1]
        assert mid == ([] if fmt.vocab.ends_newline[last] else list(fmt.separator_ids))


def test_controls(tok, hf_engine):
    pool = plain_ids(tok, hf_engine.vocab_size())
    special = set(tok.all_special_ids) | {i for i, t in tok.added_tokens_decoder.items() if t.special}
    assert pool and not special & set(pool)
    r = random_prefix(pool, 50, 3)
    assert len(r) == 50 and set(r) <= set(pool) and r == random_prefix(pool, 50, 3)
    th = list(range(100, 160))
    s = shuffled_prefix(th, 40, 9)
    assert sorted(s) == th[:40] and s != th[:40]
    with pytest.raises(ValueError, match="exceeds the reasoning length"):
        shuffled_prefix(th, 61, 0)


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 60)), min_size=1, max_size=12),
       st.integers(0, 60), st.integers(0, 99))
def test_swap_donors_are_distinct_long_enough_and_from_other_questions(donors, B, seed):
    recv = [q for q, _ in donors]
    got = assign_donors(recv, donors, B, seed)
    used = [d for d in got if d is not None]
    assert len(used) == len(set(used))
    for u, d in enumerate(got):
        if d is not None:
            assert donors[d][0] != recv[u] and donors[d][1] >= B
    assert got == assign_donors(recv, donors, B, seed)


# -- engines ------------------------------------------------------------------------------------

def test_transformers_and_vllm_candidate_logprobs_agree(tiny_model, hf_engine, tok, fmt):
    pytest.importorskip("vllm")
    sp = find_spellings(tok, 4)
    q = choice_sum_questions(2, seed=1)
    ctxs = [tok.encode(fmt.family.render_prompt("Pick a letter.", x.body()), add_special_tokens=False)
            + list(range(40, 40 + n)) + list(fmt.end_ids) + list(fmt.answer_prefix_ids)
            for x in q for n in (0, 7, 31)]
    vl = open_engine(EngineConfig(kind="vllm", model=str(tiny_model), dtype="float32", max_model_len=512,
                                  block_size=32, kv_cache_gib=1))
    try:
        a = np.array(hf_engine.choice_logprobs(ctxs, sp.flat_ids))
        b = np.array(vl.choice_logprobs(ctxs, sp.flat_ids))
    finally:
        vl.close()
    # Both are full-vocabulary log-softmax values of float32 logits; the two
    # engines' kernels round differently (observed up to 2e-5 here), so 1e-4 absolute.
    np.testing.assert_allclose(a, b, atol=1e-4)
    assert (a.argmax(axis=1) == b.argmax(axis=1)).all()
    assert np.all(a < 0) and np.all(np.exp(a).sum(axis=1) < 1)


def test_batched_readout_equals_the_unbatched_readout(hf_engine, tok, fmt):
    """Padded batches (ragged lengths, several batches, one-row batches) read what one-at-a-time reads."""
    sp = find_spellings(tok, 4)
    q = choice_sum_questions(3, seed=4)
    ctxs = [tok.encode(fmt.family.render_prompt("Pick a letter.", x.body()), add_special_tokens=False)
            + list(range(40, 40 + n)) + list(fmt.end_ids) + list(fmt.answer_prefix_ids)
            for x in q for n in (0, 1, 7, 31, 64)]
    one = np.array(hf_engine.choice_logprobs(ctxs, sp.flat_ids))       # one forward pass each
    longest = max(map(len, ctxs))
    for max_tokens in (1, 3 * longest, 100 * longest):                  # 1: every row alone
        got = np.array(readout_logprobs(hf_engine, ctxs, sp.flat_ids, max_tokens=max_tokens))
        # float32 logits; batched matrix products round differently (observed 1.3e-5)
        np.testing.assert_allclose(got, one, rtol=0, atol=1e-4)
        assert (got.argmax(axis=1) == one.argmax(axis=1)).all()
    assert readout_logprobs(hf_engine, ctxs[:2], []) == [[], []]


def test_length_batches_bound_the_padded_tokens():
    lengths = [5, 1, 9, 9, 3, 7, 2]
    batches = length_batches(lengths, 18)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths)                                       # sorted by length
    assert all(len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 18 for b in batches)
    assert length_batches([40], 10) == [[0]]                           # an over-long row runs alone


# -- runs -------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_run(tiny_model, hf_engine, tmp_path_factory):
    cfg = job_dict(tiny_model, control_arm="base", control_horizons=[8, 24], answer_limit=2)
    cfg["data"]["n"] = 4
    cfg["matched"] = [{"lower": "brief", "upper": "base"}]
    job = horizon_job_from_dict(cfg)
    out = tmp_path_factory.mktemp("hz") / "run"
    run_horizon(job, out, engine=hf_engine, progress=False)
    return job, out


def test_a_tiny_run_is_token_exact(tiny_run, hf_engine, tok, fmt):
    job, out = tiny_run
    run = load_run(out)
    tt = pq.read_table(out / "trajectories.parquet").to_pylist()
    rt = pq.read_table(out / "readouts.parquet").to_pylist()
    traj = {(t["arm"], t["question"], t["replicate"]): t for t in tt}
    assert run.arms == ("base", "brief") and len(tt) == 2 * 4
    # shared seeds: both arms' runs of an item and replicate use the same seed
    for (arm, q, r), t in traj.items():
        assert t["seed"] == traj[("base", q, r)]["seed"]
    common = {q: traj[("base", q, r)]["prompt"] for (_, q, r) in traj}
    checked = replays = 0
    for row in rt:
        t = traj[(row["arm"], row["question"], row["replicate"])]
        p = t["prompt"] if row["context"] == "policy" else common[row["question"]]
        if row["kind"] in ("stop", "terminal", "matched"):
            if row["kind"] == "matched":
                lo = traj[(row["variant"], row["question"], row["replicate"])]
                assert lo["finished"] and row["B"] == lo["L"]
            ids, keep, term = stop_input(fmt, p, t["thinking"], row["B"], t["finished"], [],
                                         fmt.answer_prefix_ids)
            assert (row["length"], row["terminal"]) == (keep, term)
            if term and row["context"] == "policy":
                # a completed block is read in exactly its natural answer context
                assert ids == fmt.answer_context(t["prompt"], t["thinking"], True)
                replays += 1
        else:
            assert row["kind"] == "control" and t["L"] > row["B"]
            continue
        assert row["input_sha256"] == sha(ids)
        checked += 1
        if checked % 17 == 0:      # the stored readout is the engine's readout of that input
            lp = logp_from_ids(hf_engine.choice_logprobs([ids], find_spellings(tok, 4).flat_ids)[0],
                               find_spellings(tok, 4), 4)
            # read in padded batches during the run, alone here: equal up to the float32
            # rounding of batched matrix products (observed 2e-6); another input's ids
            # would move these log-probabilities by far more on the random tiny model
            assert row["logp"] == pytest.approx(lp, abs=1e-4)
    assert checked > 50 and replays > 0
    # controls: one per control kind, swap donors distinct per horizon
    ctl = [r for r in rt if r["kind"] == "control"]
    for B in (8, 24):
        donors = [r["donor"] for r in ctl if r["variant"] == "swap" and r["B"] == B]
        assert len(donors) == len(set(donors))
        for r in ctl:
            if r["variant"] == "swap" and r["B"] == B:
                g, q, arm, rep = r["donor"].split("/")
                assert q != r["question"] and traj[(arm, q, int(rep))]["L"] >= B
    doc = analyze(out, contrasts=["brief,base"], replicates=100)
    assert doc["groups"][0]["calibration"] and doc["groups"][0]["contrasts"]
    man = json.loads((out / "horizon.json").read_text())
    assert man["spellings"]["missing"] == [["B", "space"], ["D", "space"]]
    assert man["closure"] == {"name": "neutral", "text": "", "ids": []}


def test_terminal_replay_agrees_with_natural_answers(tiny_model, tok, tmp_path):
    cfg = job_dict(tiny_model, replicates=4, thinking_limit=30, horizons=[0, 30], checkpoints=[0])
    cfg["data"]["n"] = 8
    eng = ScriptedEngine(tok, mode="hash")
    run_horizon(horizon_job_from_dict(cfg), tmp_path / "r", engine=eng, progress=False)
    doc = analyze(tmp_path / "r", replicates=50)
    rows = doc["groups"][0]["agreement"]
    assert sum(r["compared"] for r in rows) > 20
    # the hash reader answers the same only for identical ids: token-exact replay agrees everywhere
    assert all(r["agree"] == r["compared"] for r in rows)


def test_scripted_positive_control(tiny_model, tok, tmp_path):
    cfg = job_dict(tiny_model, replicates=1, thinking_limit=600, horizons=[64, 512], checkpoints=[64],
                   contexts=["policy"], continuation=False)
    cfg["data"] = {"source": "positive-control", "n": 96}
    cfg["arm"] = [{"name": "long", "script": "reveal-late"}, {"name": "short", "script": "reveal-early"}]
    job = horizon_job_from_dict(cfg)
    th = scripted_thinking(tok, "reveal-late", "C", 600)
    assert 64 < reveal_position(tok, th, "C") < 512
    run_horizon(job, tmp_path / "pc", engine=ScriptedEngine(tok, mode="reveal"), progress=False)
    doc = analyze(tmp_path / "pc", contrasts=["short,long"], replicates=2000)
    (c,) = [c for c in doc["groups"][0]["contrasts"] if c["readout"] == "policy"]
    at = {h["B"]: h for h in c["horizons"]}
    assert at[64]["acc_b"]["estimate"] == 0.25 and at[64]["acc_a"]["estimate"] == 1.0
    assert at[64]["delta"]["estimate"] == 0.75 and at[64]["delta"]["ci"][0] > 0.5
    assert at[512]["delta"]["estimate"] == 0.0 and at[512]["delta"]["ci"] == [0.0, 0.0]
    run = load_run(tmp_path / "pc")
    from otbench.analysis.horizon._group import scores as _scores
    sc = _scores(run.stop["policy"], run.gold, run.valid)["correct"][:, :, 0, :]
    d64 = sc[1, :, 0].astype(float) - sc[0, :, 0]
    d512 = sc[1, :, 1].astype(float) - sc[0, :, 1]
    assert inf.sign_flip(d64, draws=10_000).p == pytest.approx(1 / 10_001)
    assert inf.sign_flip(d512, draws=10_000).p == 1.0


def _cli_job(model: str, *, n: int, T: int) -> str:
    """A small horizon job file on the transformers engine: `model` is its [model] table's body."""
    return f"""
[model]
{model}
[engine]
kind = "transformers"
dtype = "float32"
max_model_len = 512
[data]
source = "choice-sums"
n = {n}
[horizon]
thinking_limit = {T}
answer_limit = 2
horizons = [0, {T}]
checkpoints = [0]
contexts = ["policy"]
continuation = false
[[arm]]
name = "base"
"""


def test_cli_run_on_the_tiny_model(tiny_model, tmp_path):
    cfg = tmp_path / "job.toml"
    cfg.write_text(_cli_job(f'path = "{tiny_model}"\nfamily = "qwen3-thinking"\nid = "tiny"', n=2, T=12))
    r = CliRunner().invoke(horizon_group, ["run", "--config", str(cfg), "--out", str(tmp_path / "o"),
                                           "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output and "no one-token spelling: ' B', ' D'" in r.output
    assert load_run(tmp_path / "o").horizons == (0, 12)
    again = CliRunner().invoke(horizon_group, ["run", "--config", str(cfg), "--out", str(tmp_path / "o")])
    assert again.exit_code == 2 and "already exists" in again.output
    cfg.write_text(cfg.read_text().replace("horizons = [0, 12]", "horizons = [0, 99]"))
    bad = CliRunner().invoke(horizon_group, ["run", "--config", str(cfg), "--out", str(tmp_path / "p")])
    assert bad.exit_code == 2 and "must not exceed horizon.thinking_limit (12)" in bad.output


def test_cli_run_names_a_hugging_face_id(tiny_model, tmp_path, monkeypatch):
    """A horizon job names its model by Hugging Face id, resolved offline through the cache (issue 13)."""
    import shutil

    constants = pytest.importorskip("huggingface_hub.constants")
    hub = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = hub / "models--Org--Tiny-Thinker"
    shutil.copytree(tiny_model, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    cfg = tmp_path / "job.toml"
    cfg.write_text(_cli_job('name = "Org/Tiny-Thinker"\nfamily = "qwen3-thinking"', n=1, T=8))
    r = CliRunner().invoke(horizon_group, ["run", "--config", str(cfg), "--out", str(tmp_path / "o"),
                                           "--no-progress"])
    assert r.exit_code == 0, r.output
    man = json.loads((tmp_path / "o" / "horizon.json").read_text())
    assert man["model"] == "Org/Tiny-Thinker"
    assert man["provenance"]["model"] == {"id": "Org/Tiny-Thinker", "repository": "Org/Tiny-Thinker",
                                          "revision": commit}
    # an id that is not in the cache: one line, exit 2, nothing written
    cfg.write_text(_cli_job('name = "Org/Not-Here"\nfamily = "qwen3-thinking"', n=1, T=8))
    bad = CliRunner().invoke(horizon_group, ["run", "--config", str(cfg), "--out", str(tmp_path / "p"),
                                             "--no-progress"])
    lines = bad.output.strip().splitlines()               # the "resolving ..." log line, then the error
    assert bad.exit_code == 2 and len(lines) == 2 and "Traceback" not in bad.output
    assert lines[-1].startswith("model 'Org/Not-Here' at revision 'main' is not in the Hugging Face cache")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("patch, match", [
    ({"horizon": {"horizons": [0, 99]}}, r"horizon.horizons must not exceed horizon.thinking_limit \(40\)"),
    ({"horizon": {"contexts": ["other"]}}, "horizon.contexts must be a non-empty list"),
    ({"horizon": {"common_arm": "zz"}}, "horizon.common_arm must name an arm"),
    ({"horizon": {"closure": "zz"}}, "horizon.closure must be one of"),
    ({"horizon": {"nope": 1}}, "unknown key horizon.nope"),
    ({"arm": [{"name": "a"}, {"name": "a"}]}, "arm names must be unique"),
    ({"arm": [{"name": "a", "effort": "low"}]}, "needs a family whose system message has a 'Reasoning: '"),
    ({"arm": [{"name": "a", "script": "zz"}]}, "script must be one of"),
    ({"matched": [{"lower": "base", "upper": "base"}]}, "must name two different arms"),
    ({"data": {"source": "sums"}}, "data.source must be one of"),
    ({"extra": {}}, r"unknown table \[extra\]"),
])
def test_horizon_job_validation(tiny_model, patch, match):
    cfg = job_dict(tiny_model)
    for k, v in patch.items():
        cfg[k] = cfg[k] | v if isinstance(v, dict) and k in cfg and k != "data" else v
    with pytest.raises(JobError, match=match):
        horizon_job_from_dict(cfg)


def test_generic_family_needs_an_answer_prefix(tiny_model):
    cfg = job_dict(tiny_model)
    cfg["model"]["family"] = "generic-chat"
    with pytest.raises(JobError, match="horizon.answer_prefix is required for the 'generic-chat' family"):
        horizon_job_from_dict(cfg)


def test_effort_arms_write_the_reasoning_line(tiny_model):
    from otbench.probe.config._family import load_instructions
    from otbench.probe.horizon._run import render_prompt

    cfg = job_dict(tiny_model)
    cfg["model"]["family"] = "gpt-oss"
    cfg["arm"] = [{"name": "low", "effort": "low"}, {"name": "high", "effort": "high", "instruction": "Hm."}]
    job = horizon_job_from_dict(cfg)
    q = choice_sum_questions(1)[0]
    lo, hi = (render_prompt(job, a, q, load_instructions()["choice"]) for a in job.arms)
    assert "Reasoning: low" in lo and "Reasoning: medium" not in lo
    assert "Reasoning: high" in hi and "\n\nHm." in hi
    assert lo.replace("Reasoning: low", "Reasoning: high") == hi.replace("\n\nHm.", "")


def test_candidate_logit_stp_of_a_stored_set(tiny_model, tok, fmt, tmp_path):
    import pyarrow as pa
    from otbench.analysis.measurement._build import from_ragged, ragged
    from otbench.analysis.measurement._io import load, save
    from otbench.probe.horizon._stp import stp_input

    qs = choice_sum_questions(3, seed=0)
    rng = np.random.default_rng(0)
    rows = []
    for q in qs:
        for t in range(2):
            prompt = tok.encode(fmt.family.render_prompt("Pick.", q.body()), add_special_tokens=False)
            th = [int(x) for x in rng.integers(60, 400, size=int(rng.integers(0, 30)))]
            Ls = sorted({0, len(th), *rng.integers(0, len(th) + 1, size=2).tolist()})
            rows.append((q, t, prompt, th, Ls, rng.integers(0, 5, size=len(Ls)).tolist()))
    src = from_ragged(model=["tiny"] * len(rows), group=[q.group for q, *_ in rows],
                      question=[q.id for q, *_ in rows], trajectory=np.array([t for _, t, *_ in rows]),
                      probes=np.full(len(rows), 4), L=ragged([r[4] for r in rows], np.int64),
                      C=ragged([r[5] for r in rows], np.int64), y=np.zeros(len(rows), np.int64))
    tokens = pa.table({"model": ["tiny"] * len(rows), "group": [q.group for q, *_ in rows],
                       "question": [q.id for q, *_ in rows], "trajectory": [t for _, t, *_ in rows],
                       "prompt": [r[2] for r in rows], "thinking": [r[3] for r in rows]})
    save(src, tmp_path / "set", extra_tables={"tokens": tokens})
    cfg = job_dict(tiny_model, horizons=[0], checkpoints=[0], contexts=["policy"], continuation=False)
    cfg["stp_logit"] = {"set": str(tmp_path / "set")}
    eng = ScriptedEngine(tok, mode="hash")
    run_horizon(horizon_job_from_dict(cfg), tmp_path / "out", engine=eng, progress=False)
    got = load(tmp_path / "out" / "stp_logit")
    src = load(tmp_path / "set")
    assert np.array_equal(got.L, src.L) and np.array_equal(got.n, src.n)
    assert (got.probes == 1).all()
    np.testing.assert_allclose(got.signals["stp_accuracy"], src.C / 4)
    by = {(q.group, q.id, t): (q, p, th) for q, t, p, th, *_ in rows}
    for i in range(got.num_trajectories):
        qi = int(got.question[i])
        q, p, th = by[(got.groups[int(got.question_group[qi])], got.question_id[qi], int(got.trajectory[i]))]
        for k in range(int(got.n[i]) + 1):
            ids = stp_input(fmt, p, th, int(got.L[i, k]), fmt.answer_prefix_ids)
            want = eng.read(ids) == q.reference
            assert got.C[i, k] == int(want)
            assert (got.signals["q_true"][i, k] > 0.5) == want
