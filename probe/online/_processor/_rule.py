"""The logits processor's exit rule: any DEE `Method` declaring ``online = "processor"``, run by its own
``stop(view, theta)`` on an `OnlineView` of the one request (no torch, no vLLM, no JAX).

A request names its method as the analysis registry does (`otbench.analysis.methods.METHODS`: a
registered name, or a ``module:object`` plug-in the server's operator listed in `PLUGINS_ENV`) with
the JSON of its `Method.online_parameters`; `load_rule` rebuilds it in the engine's process through
its ``from_online(params)`` (`otbench.analysis.methods.online_method`). Nothing here knows a method
by name: what the processor computes for it follows from what it declares -- its ``signals`` (a
method reading `CONFIDENCE_SIGNAL` gets every step's token confidence over its ``window``) and its
optional ``device_signal`` (Model Runner V2 then decides it on the device, `_v2_step`).

The view is the one the side-request controller builds for its methods (`trajectory_view`), so a
method decides online exactly as OTBench's offline walk asks it: one trajectory, boundary `k` =
the decisions so far, ``tokens`` its thinking length there, signals at the decided boundaries.
"""

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from otbench.analysis.methods import (
    PROCESSOR_SIGNALS,
    Method,
    MethodError,
    OnlineView,
    UnitTable,
    online_method,
)

from .._request import PLUGINS_ENV, ControlSpec, OnlineControlError


@functools.lru_cache(maxsize=None)
def one_unit(task: str) -> UnitTable:
    """The decision unit a live trajectory has when its question is not given: nothing but its task
    (read-only, so one table per task serves every decision)."""
    idx = np.zeros(1, dtype=np.int64)
    idx.setflags(write=False)
    return UnitTable(model=("",), group=("",), dataset=(task,), question_id=("",), text=(None,),
                     model_index=idx, group_index=idx, models=("",), groups=("",))


def trajectory_view(k: int, row: int, task: str, hist: Mapping[str, np.ndarray], toks: np.ndarray,
                    names: tuple[str, ...], where: str) -> OnlineView:
    """The `OnlineView` of one trajectory at boundary `k`: `hist` maps each signal it may read to
    float64[1, k + 1] (its values at boundaries `0..k`), `toks` float64[1, k + 1] the thinking
    lengths there; `where` says what computes the signals, for a method asking for another."""
    def read(name: str, rows: np.ndarray, at: int, history: bool) -> np.ndarray:
        if name != "" and name not in hist:
            raise MethodError(f"no signal {name!r} online ({where}: {', '.join(names)})")
        src = toks if name == "" else hist[name]
        out = np.array(src[:, :at + 1] if history else src[:, at], copy=True)
        out.setflags(write=False)
        return out

    L_k = int(toks[0, k]) if toks.shape[1] > k else -1
    return OnlineView(int(k), np.array([row], dtype=np.int64), np.zeros(1, dtype=np.int64), one_unit(task),
                      np.array([L_k], dtype=np.int64), names, read)


def ask_stop(m: Method, view: OnlineView, theta: float) -> bool:
    """`m`'s own ``stop(view, theta)`` on a one-trajectory view, checked to be one boolean."""
    try:
        d = np.asarray(m.call("stop(view, theta)", m.decide, view, theta))
    except MethodError as e:
        raise OnlineControlError(str(e)) from None
    if d.shape != (1,) or d.dtype != np.bool_:
        raise OnlineControlError(f"method {m.name!r}: stop(view, theta) must return one "
                                 f"boolean per active trajectory, got {d!r}")
    return bool(d[0])


class ExitRule:
    """A processor method as one request's control runs it (module docstring).

    Attributes:
      method: the rebuilt `Method`; name: its name.
      window: the group confidence's window when it reads `CONFIDENCE_SIGNAL` (the processor
        then feeds the control every step's token confidence), else None.
      device_signal: its device-side form (`Method.device_signal`), None when it decides on
        the host only.
    """

    def __init__(self, method: Method):
        self.method, self.name = method, method.name
        self.window = method.confidence_window()
        self.device_signal = method.device_signal()
        if self.window is not None and len(method.signals) > 1:
            # a request's control reads either every step's confidence or the boundary's logits
            # (`_ExitCore._next`): refused here, in one line, not mid-generation
            raise MethodError(f"method {method.name!r} reads {', '.join(method.signals)}; the logits "
                              f"processor reads the group confidence alone or the logits' signals")

    def stop(self, history: Mapping[str, Sequence[float]], lengths: Sequence[int], theta: float) -> bool:
        """The method's decision at the last of `lengths` (the decided boundaries so far, this one
        last), `history` each signal the processor read there, in the same order."""
        k = len(lengths) - 1
        hist = {name: np.array([list(v)], dtype=np.float64) for name, v in history.items()}
        if "margin" in hist:
            # the processor reads the margin in the model's own context: the recorded margin_own
            hist["margin_own"] = hist["margin"]
        toks = np.array([list(lengths)], dtype=np.float64)
        view = trajectory_view(k, 0, "", hist, toks, PROCESSOR_SIGNALS, "the logits processor computes")
        return ask_stop(self.method, view, float(theta))


def _listed(allowed: str | None) -> tuple[str, ...]:
    text = os.environ.get(PLUGINS_ENV, "") if allowed is None else allowed
    return tuple(s.strip() for s in text.split(",") if s.strip())


def load_rule(spec: ControlSpec, allowed: str | None = None) -> ExitRule:
    """The exit rule a DEE request names (a plug-in only when the operator listed it: `allowed`,
    default the `PLUGINS_ENV` variable), rebuilt from its online parameters."""
    if ":" in spec.method and spec.method.partition(":")[0].endswith(".py"):
        raise OnlineControlError(f"method {spec.method!r}: a server loads plug-ins from installed "
                                 f"modules only (module:object), not from files")
    listed = _listed(allowed)
    if ":" in spec.method and spec.method not in listed:
        raise OnlineControlError(f"method {spec.method!r} is not allowed on this server "
                                 f"(the operator lists plug-in methods in {PLUGINS_ENV})")
    try:
        return ExitRule(online_method(spec.method, spec.params, allowed=listed))
    except MethodError as e:
        raise OnlineControlError(f"{spec.method!r} cannot run in the logits processor ({e})") from None


def rule_args(m: Method, model: str | None, theta: float) -> dict[str, Any]:
    """What a request carries for `m` at `theta` (`request_args`'s `method` and `params`): its
    registered name (or ``module:object``) and its online parameters for `model`."""
    if m.online != "processor":
        raise OnlineControlError(f"method {m.name!r} does not run in the logits processor")
    ref = m.spec if m.spec is not None else m.name
    try:
        return {"method": ref, "params": m.online_parameters(model, theta)}
    except MethodError as e:
        raise OnlineControlError(str(e)) from None


def set_rule_args(m: Method, ms: Any, theta: float) -> dict[str, Any]:
    """`rule_args` of `m` for the one model of a probe run's set `ms` (refused when it holds several:
    online replay runs one recorded engine)."""
    present = np.unique(np.asarray(ms.cell_model)[ms.cell])
    if present.size != 1:
        raise OnlineControlError(f"method {m.name!r}: the set holds {present.size} models; online "
                                 "certify replays one model's set")
    return rule_args(m, ms.models[int(present[0])], theta)
