"""The probe records ThinkBrake's own two forks (``probe.field_probes = ["thinkbrake"]``; issue 58).

On the tiny model (transformers engine, float32) with a given trajectory whose thinking has
``.\\n\\n`` boundaries: every other measurement is what a job without the key gives; the check is
recomputed from the tokenizer's decoded text, and the margin from a forward pass of the model: the
one token fork 0 samples (the same request sent again) read at the retained prefix, minus the end
token read after the text + ``.\\n`` (ssangjun706/ThinkBrake handler.py lines 83-112).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from otbench.probe.config import derive_seed  # noqa: E402
from otbench.probe.config._family import Sampling, load_family, load_instructions  # noqa: E402
from otbench.probe.data import sum_questions  # noqa: E402
from otbench.probe.engines import GenRequest  # noqa: E402
from otbench.probe.grading._batch import resolve_grader  # noqa: E402
from otbench.probe.stp._direct import encode_prompts  # noqa: E402
from otbench.probe.stp._loop import RunStats, ThinkResult, probe_units  # noqa: E402
from otbench.probe.tokens._probe_prompts import compile_format  # noqa: E402
from otbench.probe.tokens._vocab import build_vocabulary  # noqa: E402

SAMPLING = Sampling(temperature=0.6, top_p=0.95, top_k=20, presence_penalty=0.0)
THINKING = ("we add the digits.\n\nso the sum is four\n\nwe check it again.\n\n"
            "the sum is four.\n\nthen")


@pytest.fixture(scope="module", params=["qwen3-thinking", "generic-chat"])
def runs(hf_engine, request):
    tok = hf_engine.tokenizer()
    fmt = compile_format(load_family(request.param), tok, build_vocabulary(tok, hf_engine.vocab_size()))
    qs = sum_questions(1, seed=1)
    prompts = encode_prompts(fmt, tok, qs, load_instructions())
    thinking = tuple(int(t) for t in tok.encode(THINKING, add_special_tokens=False))
    answer = tuple(int(t) for t in tok.encode("\\boxed{4}", add_special_tokens=False))
    native = fmt.family.native_thinking
    given = {(0, 0): ThinkResult(11, thinking, True, fmt.end_ids[0] if native else fmt.think_stop_ids[0],
                                 answer if native else None)}
    out = {}
    for fp in ((), ("thinkbrake",)):
        stats = RunStats()
        res = probe_units(hf_engine, fmt, model="tiny", questions=qs, prompts=prompts, units=[(0, 0)],
                          P=2, b=1, thinking_limit=200, answer_limit=6, sampling=SAMPLING,
                          grade_batch=resolve_grader("minimal")[1], tokenizer=tok, stats=stats,
                          given=given, field_probes=fp)
        out[fp] = (res[0], stats)
    return tok, fmt, qs, prompts, out[()], out[("thinkbrake",)]


def test_nothing_else_changes_and_the_costs_are_counted(runs):
    tok, fmt, qs, prompts, (plain, ps), (tb, ts) = runs
    for name in ("L", "C", "logp_end", "logp_other", "logp_end_own", "logp_other_own", "answer_id",
                 "answer_conf", "probe_tokens", "probe_status", "y"):
        assert getattr(plain, name) == getattr(tb, name), name
    assert plain.thinkbrake_check == () and len(tb.thinkbrake_check) == tb.n + 1
    checks = sum(tb.thinkbrake_check)
    own = sum(1 for k, c in enumerate(tb.thinkbrake_check) if c and _fork1(tok, prompts[0], tb, k)
              != fmt.signal_context(prompts[0], tb.thinking, tb.L[k]))
    # fork 0 is a request of the probe phase at every check (one token decoded); fork 1 a signal read
    # of its own only where its context is not the position's signal context
    assert ts.probe.requests - ps.probe.requests == checks
    assert ts.probe.generated - ps.probe.generated == checks
    assert ts.signal.requests - ps.signal.requests == own
    # Qwen3 closes on a line feed: fork 1 is the position's signal read; the generic family's signal
    # context has no line feed (`ProbeFormat.signal_context`), so fork 1 is a read of its own
    assert checks >= 2 and own == (checks if not fmt.closes_on_newline else 0)
    assert tb.seeds["thinkbrake"] == [derive_seed("tiny", qs[0].dataset, qs[0].id, 0, "thinkbrake", k)
                                      for k in range(tb.n + 1)]


def _fork1(tok, prompt, u, k):
    """Fork 1's context as the source builds it in text: the text so far without its last line feed
    (checked against the tokenizer's decoding), ids of the trajectory up to its last token."""
    L = u.L[k]
    last = tok.encode(tok.decode([u.thinking[L - 1]])[:-1], add_special_tokens=False)
    ids = list(u.thinking[:L - 1]) + list(last)
    assert tok.decode(ids) == tok.decode(list(u.thinking[:L]))[:-1]
    return list(prompt) + ids


def test_checks_and_margins_match_a_recomputation(runs, hf_engine, tiny_model):
    from transformers import AutoModelForCausalLM

    tok, fmt, qs, prompts, _, (tb, _) = runs
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model), torch_dtype=torch.float32)

    def logp(ctx, token):
        with torch.inference_mode():
            row = torch.log_softmax(model(input_ids=torch.tensor([list(ctx)])).logits[0, -1].float(), -1)
        return float(row[int(token)])

    checked = 0
    for k, Lk in enumerate(tb.L):
        want = tok.decode(list(tb.thinking[:Lk])).endswith(".\n\n")
        assert tb.thinkbrake_check[k] == int(want), k
        if not want:
            assert tb.thinkbrake_margin[k] == 0.0
            continue
        head = list(prompts[0]) + list(tb.thinking[:Lk])
        seed = derive_seed("tiny", qs[0].dataset, qs[0].id, 0, "thinkbrake", k)
        c = hf_engine.generate([GenRequest(head, 1, seed, 1, (), ignore_eos=True)], SAMPLING)[0][0]
        sampled = logp(head, c.token_ids[0])
        end = logp(_fork1(tok, prompts[0], tb, k), fmt.signal_id)
        assert tb.thinkbrake_margin[k] == pytest.approx(sampled - end, abs=1e-4)
        checked += 1
    assert checked >= 2 and checked < tb.n + 1              # checks, and boundaries that are not
    assert np.isfinite(tb.thinkbrake_margin).all()


def test_the_set_carries_the_signals_and_thinkbrake_is_scored(runs, tmp_path):
    """The measurement set gets both columns with their definitions, and `thinkbrake` (refused on a
    set without them) fits and stops on it; `thinkbrake-onectx` reads the same set's `margin`."""
    from otbench.analysis.measurement import PEER_SIGNAL_DEFINITIONS
    from otbench.analysis.methods import load_method
    from otbench.probe.stp._output import measurement_set
    from otbench.probe.stp._results import signal_definitions

    *_, (plain, _), (tb, _) = runs
    ms = measurement_set([tb], model="tiny", P=2, provenance={"signals": signal_definitions(["thinkbrake"])})
    assert ms.signals["thinkbrake_check"][0, :tb.n + 1].tolist() == [float(c) for c in tb.thinkbrake_check]
    for name in ("thinkbrake_check", "thinkbrake_margin"):
        assert ms.provenance["signals"][name] == PEER_SIGNAL_DEFINITIONS[name]
    m = load_method("thinkbrake")
    m.fit(ms, ms)
    stops = m.stop(_View(ms, 1), 1e9)                            # every check stops at a huge θ
    assert stops.tolist() == [bool(tb.thinkbrake_check[1])]
    bare = measurement_set([plain], model="tiny", P=2)
    with pytest.raises(Exception, match=r"thinkbrake needs the per-position signals thinkbrake_check"):
        load_method("thinkbrake").fit(bare, bare)


class _View:
    """The decision view at position `k` (what a rule reads there)."""

    def __init__(self, ms, k):
        self.ms, self.k = ms, k

    def signal(self, name):
        return np.asarray(self.ms.signals[name])[:, self.k]
