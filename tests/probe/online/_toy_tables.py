"""A 12-token toy vocabulary and its control tables, shared by the online controller's unit tests."""

import numpy as np

from otbench.probe.online import Tables

V = 12
BOUNDARY = 3              # a boundary-vocabulary id
NL_END, NL_START = 4, 5   # ends / starts with a line feed (the span rule)
STOP = 6                  # the model's own thinking end
SEP, END, PREFIX, EOS = 7, 8, 9, 11


def toy_tables(span: bool, separator=(SEP,)) -> Tables:
    """The toy vocabulary's tables; `span`: the `vocab+span` boundary rule (line-feed starts too)."""
    mask = np.zeros(V, bool)
    mask[BOUNDARY] = True
    ends = np.zeros(V, bool)
    ends[[NL_END, BOUNDARY]] = True
    starts = np.zeros(V, bool)
    starts[NL_START] = True
    return Tables(mask=mask, ends_newline=ends, starts_newline=starts if span else None, signal_id=STOP,
                  think_stop_ids=frozenset({STOP}), separator_ids=tuple(separator), end_ids=(END,),
                  answer_prefix_ids=(PREFIX,), eos_id=EOS)


class SecondDecision:
    """A processor method with memory (stop at the second decision whose margin is <= θ) and no
    device-side form: the V2 processor runs it on the host, synchronously."""

    strategy = "dee"
    online = "processor"
    signals = ("margin",)

    def stop(self, view, theta):
        return (view.history("margin") <= theta).sum(axis=1) >= 2


class ConfidenceAndMargin:
    """A processor method reading the group confidence and the margin, which no one control reads
    together: refused when the request is set up."""

    strategy = "dee"
    online = "processor"
    signals = ("deepconf_min_conf", "margin")
    window = 4

    def stop(self, view, theta):
        return view.signal("margin") <= theta
