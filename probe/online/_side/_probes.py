"""Which probes the side-request controller issues per position, and how it reads the field methods' own.

A side method reads signals of one or more probes (`otbench.analysis.methods.SIDE_SIGNALS`):

* ``"stp"`` -- otbench's own STP answer probe (``answer``, ``answer_conf``,
  ``hesitation``, ``answer_tokens``), issued and read by `_controller` itself;
* ``"dynasor"`` -- Dynasor-CoT's own probe (``dynasor_window``,
  ``dynasor_uncertain``, ``dynasor_tokens``);
* ``"deer"`` -- DEER's own trial answer (``deer_conf``, ``deer_tokens``).

The field methods' probes are the probe stage's (``probe.field_probes``):
the same request (`otbench.probe.stp.peer_request`: the retained prefix,
the source's suffix tokenized on its own, its sampling and caps), the same
seed (``derive_seed(..., "dynasor" | "deer", k)``, `SideJob.field_seeds`),
and the same reading (`otbench.probe.grading.dynasor_probe`,
`dynasor_windows`, `deer_trial`), so on the stored prefix an online
decision reads the values OTBench's walk reads, and a certificate compares
like with like. A Dynasor window mask at `j` needs the answers at
``j - 15 .. j``; it is set once they have all arrived (the controller
decides at `k` only after the probe at `k - 1`, so they have).

What a decision pays for an own probe is its recorded ``*_tokens`` signal
(the suffix's prefill plus the tokens its source decodes: DEER's cut, not
the 20 the request decodes to find it), all of it counted as the probe's
"decoded" part with no separate prefill, as OTBench's net rule for these
methods declares (prefill 0, the recorded tokens per decision).
"""

from collections.abc import Sequence
from typing import Any

from otbench.analysis.methods import OWN_SIDE_SIGNALS, STP_SIDE_SIGNALS
from otbench.probe.grading import DYNASOR_WINDOW_BITS, deer_trial, dynasor_probe, dynasor_windows

from .._request import OnlineControlError

# The field probes are named once, by the analysis's table of their signals (a probe may share
# its method's name, and names of methods live in `otbench.analysis.methods` alone).
PROBES = ("stp", *OWN_SIDE_SIGNALS)
TAGS = dict(zip(PROBES, "pde"))
"""The request tag's kind of each probe (``(key, kind, k)``)."""
KINDS = {v: k for k, v in TAGS.items()}
ARRIVED = {"stp": ("answer", "answer_tokens"), **{p: (sig[0], sig[-1]) for p, sig in OWN_SIDE_SIGNALS.items()}}
"""The signals whose presence at `k` says that probe's reading at `k` is complete (an own probe's
first signal -- its window or confidence -- and its tokens)."""
SIGNALS_OF = {"stp": STP_SIDE_SIGNALS, **OWN_SIDE_SIGNALS}


def probes_of(signals: Sequence[str], record: bool = False) -> tuple[str, ...]:
    """The probes whose signals a method reads (the record pass: otbench's STP probe alone)."""
    if record:
        return ("stp",)
    return tuple(p for p in PROBES if any(s in SIGNALS_OF[p] for s in signals))


class PeerProbes:
    """The field methods' own probes of one controller: their requests and readings (module docstring)."""

    def __init__(self, tokenizer: Any, fmt: Any, probes: Sequence[str]):
        from otbench.probe.stp import CONTEXT_IDS, peer_request, suffix_ids

        own = [p for p in probes if p != "stp"]
        ids = suffix_ids(tokenizer, own)
        self.suffix = {p: list(ids[f"{p}_ids"]) for p in own}
        self._context = {p: v[-CONTEXT_IDS:] for p, v in self.suffix.items()}
        self._request, self._fmt, self._tok = peer_request, fmt, tokenizer

    def _decode(self, seq: Sequence[int]) -> str:
        return self._tok.decode(list(seq), skip_special_tokens=True)

    def request(self, probe: str, head: Sequence[int], seed: int):
        """(the request of `probe` on the prefix `head`, its prompt ids past the prefix)."""
        return self._request(probe, head, self.suffix[probe], seed, self._fmt.answer_stop_ids), \
            len(self.suffix[probe])

    def read(self, probe: str, scratch: dict, k: int, c: Any, name: str
             ) -> tuple[dict[int, dict[str, float]], int]:
        """(signals by position -- `k`'s own, and for a Dynasor probe the window masks it
        completes, at `k` or at later positions already read -- and the tokens a decision paid)."""
        suffix = self.suffix[probe]
        if probe == "dynasor":
            p = dynasor_probe([int(x) for x in c.token_ids], c.stop_id is not None, decode=self._decode,
                              context=self._context[probe])
            answers = scratch.setdefault("dynasor_answers", {})
            answers[k] = p.answer
            out: dict[int, dict[str, float]] = {k: {"dynasor_uncertain": float(p.uncertain),
                                                    "dynasor_tokens": float(p.decoded + len(suffix))}}
            done = scratch.setdefault("dynasor_masked", set())
            for j in sorted(answers):
                lo = max(0, j - DYNASOR_WINDOW_BITS + 1)
                if j in done or any(i not in answers for i in range(lo, j + 1)):
                    continue
                done.add(j)
                mask = dynasor_windows([answers[i] for i in range(lo, j + 1)])[-1]
                out.setdefault(j, {})["dynasor_window"] = float(mask)
            return out, p.decoded + len(suffix)
        if c.logprobs is None:
            raise OnlineControlError(f"{name} needs the side request's token log-probabilities "
                                     "(GenRequest.logprobs), which the engine's stream did not return")
        t = deer_trial([int(x) for x in c.token_ids], [float(x) for x in c.logprobs], decode=self._decode,
                       eos=self._fmt.answer_stop_ids, context=self._context[probe])
        return {k: {"deer_conf": float(t.conf), "deer_tokens": float(t.decoded + len(suffix))}}, \
            t.decoded + len(suffix)
