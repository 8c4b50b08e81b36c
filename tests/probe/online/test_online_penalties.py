"""Online control under the family's penalties reads the offline signal (vLLM's real penalty code, CPU).

The probe records the signal from the raw row (log-softmax before penalties).
Under vLLM's V1 sampler the processor runs before the penalties; under V2 it
runs after them and undoes them (`undo_penalties`). Here: vLLM's own penalty
function against the undo (the rule in its docstring), and vLLM's own V1
pipeline (`Sampler.apply_logits_processors`) around the V1 processor.
"""

import types

import numpy as np
import pytest
from _toy_tables import BOUNDARY, STOP, V, toy_tables
from otbench.probe.online import request_args

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
pytest.importorskip("vllm.v1.worker.gpu.sample.logits_processor")

from otbench.probe.online import ExitProcessorV1
from otbench.probe.online._processor._core import signal_values
from otbench.probe.online._processor._v2 import undo_penalties
from vllm.model_executor.layers.utils import apply_penalties, get_token_bin_counts_and_mask


def _lm_rows(seed, rows, vocab):
    """Logits shaped like a language model's: a bulk around 0, a few tokens far above."""
    g = np.random.default_rng(seed)
    x = g.normal(0.0, 3.0, size=(rows, vocab)).astype(np.float32)
    top = g.integers(0, vocab, size=(rows, 8))
    np.put_along_axis(x, top, g.uniform(12.0, 30.0, size=top.shape).astype(np.float32), axis=1)
    return torch.from_numpy(x)


def _outputs(seed, rows, vocab, n):
    g = np.random.default_rng(seed + 1)
    return torch.from_numpy(g.integers(0, vocab, size=(rows, n)).astype(np.int64))


@pytest.mark.parametrize("pp,fp", [(1.5, 0.0), (1.5, 0.5), (0.1, 0.3), (-0.7, 0.0)])
def test_the_undo_inverts_vllms_penalty_by_the_stated_rule(pp, fp):
    R, W, N = 64, 4096, 300
    raw = _lm_rows(7, R, W)
    out = _outputs(7, R, W, N)
    prompt = torch.full((R, 1), W, dtype=torch.long)             # prompts do not count (padding only)
    pen = apply_penalties(raw.clone(), prompt, out, torch.full((R,), pp), torch.full((R,), fp),
                          torch.ones(R))
    counts, present = get_token_bin_counts_and_mask(out, W, R)
    back = undo_penalties(pen, counts.to(torch.int32), torch.full((R,), pp), torch.full((R,), fp))
    # Absent tokens: untouched by vLLM, back bit for bit.
    assert torch.equal(back[~present], raw[~present])
    # Present tokens: bit for bit wherever vLLM's subtractions were exact, else within one ulp.
    sub = (raw.double() - fp * counts.double() - pp * present.double())
    exact = present & (pen.double() == sub) & ((raw.double() - fp * counts.double())
                                               == (raw - (fp * counts.to(torch.float32))).double())
    assert torch.equal(back[exact], raw[exact])
    # vLLM's rounding of x - p and the undo's of the sum: half an ulp each, of |x - p| and |x|.
    ulp = torch.finfo(torch.float32).eps * torch.maximum(pen.abs(), raw.abs())
    assert bool(((back - raw).abs() <= ulp)[present].all())
    if pp == 1.5 and fp in (0.0, 0.5):                             # the docstring's ranges, exactly
        hi = present & ((raw >= 0.75) if fp == 0 else (raw >= 2 * (fp * counts + pp)))
        assert int(hi.sum()) > 1000 and torch.equal(back[hi], raw[hi])
    # The signals: the offline one (raw row) against the penalised row and the undone one.
    sid = torch.full((R,), 5, dtype=torch.long)
    off, on, bad = signal_values(raw, sid), signal_values(back, sid), signal_values(pen, sid)
    margin = lambda s: s[:, 1] - s[:, 0]
    assert float((margin(bad) - margin(off)).abs().max()) > 0.09    # the penalty moves the signal
    err = float((on - off).abs().max())
    assert err <= 4e-6, err
    top_present = present.gather(1, raw.argmax(1, keepdim=True)).view(-1)
    hi_rows = ~top_present | (pp == 1.5 and fp in (0.0, 0.5))      # top logits >= 12: exact there
    assert torch.equal(margin(on)[hi_rows], margin(off)[hi_rows])


def test_v1_reads_the_row_before_vllms_penalties():
    """vLLM's V1 pipeline: custom processors, then penalties (`v1/sample/sampler.py`)."""
    from vllm.v1.sample.sampler import Sampler

    proc = ExitProcessorV1(types.SimpleNamespace(
        speculative_config=None, model_config=types.SimpleNamespace(
            tokenizer="unused", get_vocab_size=lambda: V, hf_config=types.SimpleNamespace(eos_token_id=11))),
        torch.device("cpu"), False)
    proc._tables_for = lambda family, boundary: toy_tables(False)
    from vllm.v1.sample.logits_processor import BatchUpdate

    out = [0, BOUNDARY]                            # length 2, a block just ended: a decision
    params = types.SimpleNamespace(extra_args=request_args("thinkbrake-onectx", -1e9, "f"))
    proc.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, params, [1], out)], moved=[]))
    raw = _lm_rows(3, 1, V)
    raw[0, 0] = 40.0                               # the best other token, in the output
    meta = types.SimpleNamespace(
        bad_words_token_ids={}, no_penalties=False, output_token_ids=[out], allowed_token_ids_mask=None,
        logitsprocs=types.SimpleNamespace(non_argmax_invariant=[proc]), spec_token_ids=None,
        prompt_token_ids=torch.tensor([[1]]), presence_penalties=torch.tensor([1.5]),
        frequency_penalties=torch.tensor([0.0]), repetition_penalties=torch.tensor([1.0]),
        thinking_budget_state_holder=None)
    sampled_from = Sampler().apply_logits_processors(raw.clone(), meta, False)
    assert float(sampled_from[0, 0]) == 40.0 - 1.5                 # the penalty did apply, after
    (L, sig, stop), = proc._req[0]._pending and [proc._req[0]._pending]
    off = signal_values(raw, torch.tensor([STOP]))[0].tolist()
    assert L == 2 and not stop and (sig["logp_end"], sig["logp_other"]) == tuple(off)
