"""Decoding and grading beside the engine: the probe loop's grading lane (one thread feeding the grader)."""

import time
from collections.abc import Callable, Sequence

from otbench.probe.grading import GradeBatch, GradeItem, deer_trial, dynasor_agreement, dynasor_probe, probe_signals


def batch_decoder(tokenizer) -> Callable[[list[list[int]]], list[str]]:
    """`decode(ids, skip_special_tokens=True)` for many answers at once.

    A fast (Rust) tokenizer decodes a batch in parallel, without the GIL: the
    same text as one `decode` per answer (that adds only the optional
    clean-up of tokenization spaces, so it is used when that is on), at a
    fraction of the cost (~1 us per token otherwise, the largest cost of a
    paper-shaped unit).
    """
    fast = getattr(tokenizer, "_tokenizer", None)
    if fast is not None and hasattr(fast, "decode_batch") and \
            not getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return lambda seqs: list(fast.decode_batch(seqs, skip_special_tokens=True))
    return lambda seqs: [tokenizer.decode(s, skip_special_tokens=True) for s in seqs]


class GradeLane:
    """Decoding and grading off the engine's path: one thread feeding the grader (its own processes).

    Answers are decoded as they arrive (`decode`), so the engine's lists of
    Python ints are dropped at once and only text waits for the rest of the
    unit; a unit's texts are then graded as one `grade_batch` call (`grade`),
    in the order the loop lists them. One thread runs tasks in submission
    order, so a unit's decodes are done before its grading starts. Results
    depend only on the answers.
    """

    def __init__(self, grade_batch: GradeBatch, tokenizer, prefix: Sequence[int]):
        from concurrent.futures import ThreadPoolExecutor

        self._grade, self._tok, self._prefix = grade_batch, tokenizer, list(prefix)
        self._decode = batch_decoder(tokenizer)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="otbench-grade")
        self.seconds = 0.0

    def decode(self, answers: Sequence[tuple[Sequence[int], bool]]):
        """Future of the texts of `answers` = [(ids, with the family's answer prefix)]."""
        return self._pool.submit(self._run_decode, answers)

    def field(self, question, ids: Sequence[int], logprobs, stopped: bool, words):
        """Future of the field signals (`probe_signals`) of one probe answer to `question`."""
        return self._pool.submit(self._run_field, question, ids, logprobs, stopped, words)

    def _run_field(self, q, ids, logprobs, stopped, words):
        t = time.perf_counter()
        n_options = 4
        if q.task == "choice" and hasattr(q, "grade_request"):
            n_options = int(getattr(q.grade_request(""), "n_options", 4))
        out = probe_signals(q.task, list(ids), logprobs, prefix=self._prefix,
                            decode=lambda seq: self._decode([seq])[0], stopped=stopped, words=words,
                            n_options=n_options)
        self.seconds += time.perf_counter() - t
        return out

    def dynasor(self, ids: Sequence[int], stopped: bool, context: Sequence[int]):
        """Future of one Dynasor-CoT probe's reading (`_peers.dynasor_probe`), decoded after `context`."""
        return self._pool.submit(self._timed, lambda: dynasor_probe(
            list(ids), stopped, decode=lambda seq: self._decode([seq])[0], context=context))

    def dynasor_unit(self, probes: Sequence):
        """Future of (class ids, window masks) of a trajectory's Dynasor probes (`dynasor_agreement`),
        the futures `probes` in position order (submitted before this, so done before it runs)."""
        return self._pool.submit(self._timed, lambda: dynasor_agreement([f.result().answer for f in probes]))

    def deer(self, ids: Sequence[int], logprobs, eos: Sequence[int], context: Sequence[int]):
        """Future of one DEER trial answer's reading (`_peers.deer_trial`), decoded after `context`."""
        return self._pool.submit(self._timed, lambda: deer_trial(
            list(ids), list(logprobs), decode=lambda seq: self._decode([seq])[0], eos=eos, context=context))

    def _timed(self, fn):
        t = time.perf_counter()
        out = fn()
        self.seconds += time.perf_counter() - t
        return out

    def grade(self, question, texts: Sequence):
        """Future of [(correct, status)] for the texts of the `decode` futures `texts`, in order."""
        return self._pool.submit(self._run_grade, question, texts)

    def _run_decode(self, answers):
        t = time.perf_counter()
        out = self._decode([(self._prefix + list(ids)) if pre else list(ids) for ids, pre in answers])
        self.seconds += time.perf_counter() - t
        return out

    def _run_grade(self, q, texts):
        t = time.perf_counter()
        res = self._grade([GradeItem(q.task, q.reference, text, q) for f in texts for text in f.result()])
        self.seconds += time.perf_counter() - t
        return res

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
