"""Candidate-logit STP: the deterministic readout at every STP position of a stored set (docs/rules.md).

For multiple-choice benchmarks the candidate-logit readout can stand in for
the `P` sampled answers of Step-wise Truncation Probing: at position `k` the
input is the STP probe prompt (prompt ids + the first `L(k)` reasoning ids
with the last boundary token replaced by its content, the separator rule,
the thinking-end marker; `_probe_ids.ProbeFormat.retained`) followed by the
readout's answer prefix, and the expected accuracy is `q_true(k)` instead of
`C(k) / P`. The result is its own measurement set, on the same trajectories
and positions as the source:

* `probes = 1` and `C(k) = 1{argmax(k) = gold}` (the readout as one
  deterministic probe, so every STP analysis applies to it unchanged);
* signals `q_true` (expected accuracy), `mass` (valid-option mass `M`) and
  `stp_accuracy` (the source's `C(k) / P`, for side-by-side comparison);
* `y`, `finished`, `L`, split and question text copied from the source.

Items are matched to the job's [data] questions by (group, question id);
the source set must carry the probe's `tokens` table (prompt and reasoning ids).
"""

from collections.abc import Sequence

import numpy as np
from otbench.probe.grading import LETTERS
from otbench.probe.tokens import ProbeFormat

from ._readout import OptionSpellings, logp_from_ids, readout_logprobs, score_logp
from otbench.errors import ArgumentError


def stp_input(fmt: ProbeFormat, prompt: Sequence[int], thinking: Sequence[int], length: int,
              answer_prefix_ids: Sequence[int]) -> list[int]:
    """The STP probe prompt at retained length `length`, with `answer_prefix_ids` as the answer opening."""
    ids = fmt.retained(prompt, thinking, length)
    if fmt.separator_ids and not (ids and fmt.vocab.ends_newline[int(ids[-1])]):
        ids.extend(fmt.separator_ids)
    ids.extend(fmt.end_ids)
    ids.extend(answer_prefix_ids)
    return ids


def run_stp_logit(engine, fmt: ProbeFormat, job, questions: Sequence, spellings: OptionSpellings,
                  answer_prefix_ids: Sequence[int], out_dir=None):
    """The candidate-logit STP measurement set of `job.stp_logit_set` (module docstring)."""
    from otbench.analysis.measurement import (
        content_hash,
        from_ragged,
        load,
        load_table,
        ragged,
    )

    src = job.stp_logit_set
    ms = load(src)
    tokens = load_table(src, "tokens").to_pydict()
    key = {(m, g, q, t): j for j, (m, g, q, t) in enumerate(zip(
        tokens["model"], tokens["group"], tokens["question"], tokens["trajectory"]))}
    qmap = {(q.group, q.id): q for q in questions}
    T = ms.num_trajectories
    rows, inputs = [], []
    for t in range(T):
        c = int(ms.cell[t])
        model, group = ms.cell_name(c)
        qid = ms.question_id[int(ms.question[t])]
        j = key.get((model, group, qid, int(ms.trajectory[t])))
        if j is None:
            raise ArgumentError(f"{src}: trajectory ({model}, {group}, {qid}, {int(ms.trajectory[t])}) has "
                                "no row in the tokens table")
        q = qmap.get((group, qid))
        if q is None or q.task != "choice":
            raise ArgumentError(f"{src}: question ({group}, {qid}) is not a multiple-choice item of the "
                                "job's [data]")
        n = int(ms.n[t])
        Ls = [int(x) for x in ms.L[t, :n + 1]]
        prompt, thinking = tokens["prompt"][j], tokens["thinking"][j]
        for Lk in Ls:
            inputs.append(stp_input(fmt, prompt, thinking, Lk, answer_prefix_ids))
        rows.append((q, n))
    flat = spellings.flat_ids
    lp: list[list[float]] = []
    for i in range(0, len(inputs), job.batch):
        lp.extend(readout_logprobs(engine, inputs[i:i + job.batch], flat))
    C, qt, mass, acc = [], [], [], []
    at = 0
    for t, (q, n) in enumerate(rows):
        gold = LETTERS.index(q.reference)
        cc, qq, mm = [], [], []
        for k in range(n + 1):
            sc = score_logp(logp_from_ids(lp[at], spellings, len(q.options)))
            at += 1
            cc.append(int(sc.argmax == gold))
            qq.append(sc.q[gold] if sc.argmax is not None else 0.0)
            mm.append(sc.M)
        C.append(cc)
        qt.append(qq)
        mass.append(mm)
        acc.append((ms.C[t, :n + 1] / ms.probes[t]).tolist())
    names = [ms.cell_name(int(c)) for c in ms.cell]
    prov = {"stage": "horizon-stp-logit", "source": {"content_hash": content_hash(ms)},
            "readout": "candidate-logit argmax at each STP position (otbench.probe.horizon._stp)",
            "spellings": spellings.as_dict(), "answer_prefix_ids": list(answer_prefix_ids),
            "source_provenance": dict(ms.provenance) if isinstance(ms.provenance, dict) else {}}
    from otbench.analysis.measurement import SPLITS
    return from_ragged(
        model=[m for m, _ in names], group=[g for _, g in names],
        question=[ms.question_id[int(x)] for x in ms.question], trajectory=ms.trajectory,
        probes=np.ones(T, dtype=np.int64),
        L=ragged([ms.L[t, :int(ms.n[t]) + 1] for t in range(T)], np.int64),
        C=ragged(C, np.int64), y=ms.y, finished=ms.finished, n=ms.n,
        dataset=[ms.question_dataset[int(x)] for x in ms.question],
        split=[None if int(s) < 0 else SPLITS[int(s)] for s in ms.split],
        question_text=[ms.question_text[int(x)] for x in ms.question],
        signals={"q_true": ragged(qt, np.float64), "mass": ragged(mass, np.float64),
                 "stp_accuracy": ragged(acc, np.float64)},
        synthetic=bool(ms.synthetic), provenance=prov)
