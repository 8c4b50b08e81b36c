"""Candidate-logit readout of multiple-choice answers (docs/rules.md): option spellings, per-option log-probabilities.

One deterministic forward pass on prompt + stopped reasoning + closure gives
the full-vocabulary next-token log-probabilities at the first answer
position. Each option letter's probability is the sum over its valid
one-token spellings (log-sum-exp): the bare letter ("C") and the
leading-space form (" C"), found by scanning the tokenizer's vocabulary
(special tokens excluded), so a tokenizer that has only one of the two forms
as a single token still gets every spelling it has; the forms it lacks are
recorded as missing. From the per-option log-probabilities `logp`:

    M = sum_y exp(logp_y)        valid-option mass (of the full vocabulary)
    q_y = exp(logp_y) / M        normalized option distribution
    argmax = argmax_y q_y        the answer (ties: the earliest letter)

`score_logp` is the NumPy reference; the analysis recomputes the same
quantities (plus log loss and Brier score) with
`otbench.analysis.horizon._kernels.readout_scores`.

Batching (`readout_logprobs`). An engine that exposes `position_logits`
(the transformers engine) is read in padded batches: contexts sorted by
length, cut into batches of at most `READOUT_BATCH_TOKENS` padded tokens,
right-padded with an attention mask. Right padding keeps every real token
at its own position (no position-id bookkeeping) and, the model being
causal, a real token never sees the padding after it; the logits are taken
at each row's last real position only. Other engines (vLLM batches on its
own) go through `choice_logprobs`. A batched readout equals the
one-at-a-time readout up to the float rounding of batched matrix products
(1.3e-5 in log-probability at most on the tiny float32 test model), not bit
for bit: which contexts share a batch can move the last bits.
"""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from otbench.probe.grading import LETTERS
from otbench.errors import ArgumentError

READOUT_BATCH_TOKENS = 8192
"""Padded tokens per batched readout forward pass (bounds activation memory)."""

FORMS = ("bare", "space")
"""The spellings looked for: the letter itself and the letter after one space."""


@dataclasses.dataclass(frozen=True)
class OptionSpellings:
    """Every one-token spelling of each option letter in one tokenizer.

    Attributes:
      letters: the option letters, in order ("ABCD...").
      ids: ids[o] = the token ids spelling letter `o` (bare and leading-space forms).
      forms: forms[o] = the form of each id in `ids[o]` ("bare" / "space").
      missing: (letter, form) pairs with no single-token spelling.
    """

    letters: str
    ids: tuple[tuple[int, ...], ...]
    forms: tuple[tuple[str, ...], ...]
    missing: tuple[tuple[str, str], ...]

    @property
    def flat_ids(self) -> tuple[int, ...]:
        """All spelling ids, option by option (the order `logp_from_ids` expects)."""
        return tuple(t for ids in self.ids for t in ids)

    def as_dict(self) -> dict:
        return {"letters": self.letters, "ids": [list(i) for i in self.ids],
                "forms": [list(f) for f in self.forms], "missing": [list(m) for m in self.missing]}


def find_spellings(tokenizer, n_options: int, vocab_size: int | None = None) -> OptionSpellings:
    """Scan the vocabulary for the one-token spellings of the first `n_options` letters.

    A token spells letter `X` when it is not a special token and decodes, on
    its own, to exactly "X" (bare) or " X" (leading space). Decoding one id
    at a time reads what the tokenizer would show, whatever its byte or
    piece encoding.
    """
    if not 2 <= n_options <= len(LETTERS):
        raise ArgumentError(f"`n_options` must be in 2..{len(LETTERS)}, got {n_options}.")
    letters = LETTERS[:n_options]
    want = {}
    for o, ch in enumerate(letters):
        want[ch] = (o, "bare")
        want[" " + ch] = (o, "space")
    special = set(int(t) for t in getattr(tokenizer, "all_special_ids", []) or [])
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    special |= {int(i) for i, t in added.items() if getattr(t, "special", False)}
    n = int(vocab_size) if vocab_size is not None else len(tokenizer)
    n = min(n, len(tokenizer))
    found: list[list[tuple[int, str]]] = [[] for _ in letters]
    for tid in range(n):
        if tid in special:
            continue
        text = tokenizer.decode([tid])
        hit = want.get(text)
        if hit is not None:
            found[hit[0]].append((tid, hit[1]))
    missing = []
    for o, ch in enumerate(letters):
        have = {f for _, f in found[o]}
        missing.extend((ch, f) for f in FORMS if f not in have)
    return OptionSpellings(
        letters=letters, ids=tuple(tuple(t for t, _ in sorted(f)) for f in found),
        forms=tuple(tuple(k for _, k in sorted(f)) for f in found), missing=tuple(missing))


def logp_from_ids(lp_ids: Sequence[float], spellings: OptionSpellings, n_options: int) -> list[float]:
    """Per-option log-probabilities from the log-probabilities of `spellings.flat_ids` (log-sum-exp).

    Options beyond `n_options` are dropped; an option without a spelling is -inf.
    """
    out, at = [], 0
    for o, ids in enumerate(spellings.ids):
        vals = [float(v) for v in lp_ids[at:at + len(ids)]]
        at += len(ids)
        if o < n_options:
            out.append(_logsumexp(vals))
    return out


def readout_logprobs(engine, contexts: Sequence[Sequence[int]], token_ids: Sequence[int], *,
                     max_tokens: int = READOUT_BATCH_TOKENS) -> list[list[float]]:
    """Next-token log-probabilities of `token_ids` after each context, batched when the engine allows.

    Equal to `engine.choice_logprobs(contexts, token_ids)` up to float
    rounding of batched matrix products (module docstring).
    """
    if not token_ids:
        return [[] for _ in contexts]
    forward = getattr(engine, "position_logits", None)
    if forward is None:
        return engine.choice_logprobs(contexts, token_ids)
    return padded_logprobs(forward, contexts, token_ids, max_tokens=max_tokens)


def length_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices sorted by length, cut so that `rows x longest <= max_tokens` (at least one row)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    out: list[list[int]] = []
    for i in order:
        if out and (len(out[-1]) + 1) * lengths[i] <= max_tokens:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def padded_logprobs(forward, contexts: Sequence[Sequence[int]], token_ids: Sequence[int], *,
                    max_tokens: int = READOUT_BATCH_TOKENS, pad_id: int = 0) -> list[list[float]]:
    """The batched readout: `forward(input_ids, attention_mask, keep)` -> logits `[b, len(keep), V]`.

    The log-softmax over the full vocabulary is taken in float64 from the
    model's logits, as in the unbatched readout.
    """
    import torch

    lengths = [len(c) for c in contexts]
    if any(n == 0 for n in lengths):
        raise ArgumentError("every readout context needs at least one token")
    ids = torch.tensor([int(t) for t in token_ids], dtype=torch.long)
    out: list[list[float]] = [[] for _ in contexts]
    for batch in length_batches(lengths, max_tokens):
        width = lengths[batch[-1]]
        x = torch.full((len(batch), width), int(pad_id), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, i in enumerate(batch):
            x[r, :lengths[i]] = torch.tensor([int(t) for t in contexts[i]], dtype=torch.long)
            mask[r, :lengths[i]] = 1
        last = torch.tensor([lengths[i] - 1 for i in batch], dtype=torch.long)
        keep = torch.unique(last)                                  # sorted positions to project
        logits = forward(x, mask, keep)
        rows = logits[torch.arange(len(batch)), torch.searchsorted(keep, last)].double().cpu()
        lp = torch.log_softmax(rows, dim=-1)[:, ids]
        for r, i in enumerate(batch):
            out[i] = [float(v) for v in lp[r]]
    return out


def _logsumexp(vals: Sequence[float]) -> float:
    m = max(vals, default=-math.inf)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(v - m) for v in vals))


@dataclasses.dataclass(frozen=True)
class ReadoutScore:
    """A readout's summary: valid-option mass, normalized distribution, answer."""

    M: float
    q: tuple[float, ...]
    argmax: int | None        # None when no option has probability (M = 0)


def score_logp(logp: Sequence[float]) -> ReadoutScore:
    """`M`, `q` and the argmax letter index of per-option log-probabilities (NumPy reference)."""
    lp = np.asarray(logp, dtype=np.float64)
    m = _logsumexp(lp.tolist())
    if m == -math.inf:
        return ReadoutScore(0.0, tuple(float("nan") for _ in lp), None)
    q = np.exp(lp - m)
    return ReadoutScore(float(math.exp(m)), tuple(float(v) for v in q), int(np.argmax(lp)))
