"""What a request asks of the online controller, and the decision rules it can run (no torch, no vLLM).

A request opts in through its per-request extension arguments
(`GenRequest.extra_args` -> vLLM's `SamplingParams.extra_args`; over an
OpenAI-compatible server, the request body's `vllm_xargs`), flat keys so
they travel through either path unchanged:

* ``otbench_method``: ``"thinkbrake"`` (DEE: stop at the first boundary
  whose recorded-style signal is ``<= θ``, docs/rules.md), ``"cap"`` (an FB
  method's per-request cap: θ is the cap in thinking tokens; a DR route is
  a cap of 0 or no control at all), or ``"module:object"`` naming a
  plug-in rule the server operator allowed (`PLUGINS_ENV`);
* ``otbench_theta``: the method's θ;
* ``otbench_family``: the model family (``artifacts/families``), which
  fixes the signal token and the thinking end the controller forces;
* ``otbench_signal``: for thinkbrake, the signal (``margin`` by default,
  ``logp_end``, ``logp_other``; docs/rules.md and the probe's `SIGNALS`);
* ``otbench_boundary``: ``"vocab"`` or ``"vocab+span"`` (the model entry's
  boundary rule, `SPAN_RULES`);
* ``otbench_lengths``: optional; decide only at these thinking lengths
  (certification replays a stored trajectory's step ends `L(0..n-1)`),
  instead of at every block end as it is written;
* ``otbench_window``: for ``"deepconf"`` (DEE: DeepConf's group confidence,
  `otbench.probe.grading._deepconf`; θ is the absolute threshold), the
  window of its group confidence in tokens.

Everything here is plain Python so a client, the tests and the processor
share one parser.
"""

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from otbench.errors import OtbenchError
from otbench.registry import Registry, RegistryError

PREFIX = "otbench_"
KEYS = ("method", "theta", "family", "signal", "boundary", "lengths", "window")
SIGNAL_NAMES = ("logp_end", "logp_other", "margin")
"""Signals the processor computes from the logits it sees, as the probe records them:
`margin = logp_other - logp_end` (docs/rules.md). The processor sees the model's own context
(the boundary token as written), so its ``margin`` is the probe's recorded ``margin_own``;
the probe's ``margin`` is read after the boundary token is replaced (docs/rules.md), a context
the processor never sees. Certify an offline walk on ``margin_own`` against it."""
PLUGINS_ENV = "OTBENCH_ONLINE_PLUGINS"
"""Comma-separated ``module:object`` rules a server may load when a request names them
(a request never makes the server import a module its operator did not list)."""


class OnlineControlError(OtbenchError, ValueError):
    """A request or engine setting the online controller cannot honour (one line)."""


RULES = Registry("rule", {})
"""The processor's plug-in rules: none registered; a request's ``module:object`` resolves only
when the server's operator listed it (`PLUGINS_ENV`, passed as the registry's allow-list)."""


@dataclasses.dataclass(frozen=True)
class ControlSpec:
    """One request's online control, parsed from its extension arguments (see module docstring)."""

    method: str
    theta: float
    family: str
    signal: str = "margin"
    boundary: str = "vocab"
    lengths: tuple[int, ...] | None = None
    window: int | None = None

    @property
    def is_cap(self) -> bool:
        return self.method == "cap"

    @property
    def reads_confidence(self) -> bool:
        """Whether the processor feeds this request's control each step's token confidence."""
        return self.method == "deepconf"

    def as_args(self) -> dict[str, Any]:
        """The flat extension arguments that parse back to this spec."""
        out: dict[str, Any] = {PREFIX + "method": self.method, PREFIX + "theta": float(self.theta),
                               PREFIX + "family": self.family, PREFIX + "signal": self.signal,
                               PREFIX + "boundary": self.boundary}
        if self.lengths is not None:
            out[PREFIX + "lengths"] = [int(x) for x in self.lengths]
        if self.window is not None:
            out[PREFIX + "window"] = int(self.window)
        return out


def request_args(method: str, theta: float, family: str, *, signal: str = "margin",
                 boundary: str = "vocab", lengths: Sequence[int] | None = None,
                 window: int | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Extension arguments asking for online control (checked here, as the server will)."""
    spec = ControlSpec(method, float(theta), family, signal, boundary,
                       None if lengths is None else tuple(int(x) for x in lengths),
                       None if window is None else int(window))
    args = dict(extra or {})
    args.update(spec.as_args())
    parse_args(args)
    return args


def parse_args(args: Mapping[str, Any] | None) -> ControlSpec | None:
    """The `ControlSpec` of a request's extension arguments, None when it asks for no control.

    Raises `OnlineControlError` (one line) for a malformed request; vLLM turns
    a `ValueError` from `validate_params` into HTTP 400 on its server.
    """
    if not args or PREFIX + "method" not in args:
        unknown = [k for k in (args or {}) if k.startswith(PREFIX)]
        if unknown:
            raise OnlineControlError(f"{unknown[0]} needs {PREFIX}method")
        return None
    extra = [k for k in args if k.startswith(PREFIX) and k[len(PREFIX):] not in KEYS]
    if extra:
        raise OnlineControlError(f"unknown online-control argument {extra[0]!r} "
                                 f"(known: {', '.join(PREFIX + k for k in KEYS)})")
    method = args[PREFIX + "method"]
    if not isinstance(method, str) or not method:
        raise OnlineControlError(f"{PREFIX}method must be a non-empty string, got {method!r}")
    if method not in BUILT_IN_RULES and ":" not in method:
        raise OnlineControlError(f"{PREFIX}method must be 'thinkbrake', 'cap', 'deepconf' or "
                                 f"'module:object', got {method!r}")
    theta = args.get(PREFIX + "theta")
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or math.isnan(float(theta)):
        raise OnlineControlError(f"{PREFIX}theta must be a number, got {theta!r}")
    theta = float(theta)
    if method == "cap" and not theta >= 0:
        raise OnlineControlError(f"{PREFIX}theta of method 'cap' is a token cap >= 0, got {theta}")
    family = args.get(PREFIX + "family")
    if not isinstance(family, str) or not family:
        raise OnlineControlError(f"{PREFIX}family must name a model family, got {family!r}")
    signal = args.get(PREFIX + "signal", "margin")
    if signal not in SIGNAL_NAMES:
        raise OnlineControlError(f"{PREFIX}signal must be one of {', '.join(SIGNAL_NAMES)}, got {signal!r}")
    boundary = args.get(PREFIX + "boundary", "vocab")
    if boundary not in ("vocab", "vocab+span"):
        raise OnlineControlError(f"{PREFIX}boundary must be 'vocab' or 'vocab+span', got {boundary!r}")
    lengths = args.get(PREFIX + "lengths")
    if lengths is not None:
        if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in lengths):
            raise OnlineControlError(f"{PREFIX}lengths must be a list of thinking lengths >= 0")
        lengths = tuple(sorted(set(int(x) for x in lengths)))
    window = args.get(PREFIX + "window")
    if method == "deepconf":
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise OnlineControlError(f"{PREFIX}window of method 'deepconf' is its group confidence's "
                                     f"window in tokens, an integer >= 1, got {window!r}")
    elif window is not None:
        raise OnlineControlError(f"{PREFIX}window applies only to method 'deepconf'")
    return ControlSpec(method, theta, family, signal, boundary, lengths, window)


# -- decision rules ------------------------------------------------------------------

class ThinkBrakeRule:
    """ThinkBrake (docs/rules.md): stop at the first decided boundary whose signal is `<= θ`.

    The same comparison as `otbench.analysis.bench.ThinkBrake.stop`, on the
    signal the processor reads at this boundary.
    """

    def __init__(self, signal: str = "margin"):
        self.signals = (signal,)
        self._signal = signal

    def online_stop(self, history: Mapping[str, Sequence[float]], lengths: Sequence[int],
                    theta: float) -> bool:
        return bool(history[self._signal][-1] <= theta)


class DeepConfRule:
    """DeepConf at a decided boundary (`otbench.analysis.measurement.deepconf_stop`, the rule
    `deepconf-exit` walks offline): the window is full and the lowest group confidence of the
    thinking so far (``deepconf_min_conf``, the control's own running window) is below `θ`."""

    signals = ("deepconf_min_conf",)

    def __init__(self, window: int):
        self.window = int(window)

    def online_stop(self, history: Mapping[str, Sequence[float]], lengths: Sequence[int],
                    theta: float) -> bool:
        from otbench.analysis.measurement import deepconf_stop

        low = history["deepconf_min_conf"][-1]
        return bool(deepconf_stop([low], [lengths[-1]], theta, self.window)[0])


BUILT_IN_RULES = ("thinkbrake", "cap", "deepconf")


def load_rule(spec: ControlSpec, allowed: str | None = None) -> Any:
    """The decision rule a DEE request names (a plug-in only when the operator listed it).

    A plug-in is any object with ``online_stop(history, lengths, theta) ->
    bool`` (``history``: signal name -> values at the decided boundaries so
    far, this one last; ``lengths``: the thinking lengths there) and
    optionally ``signals`` (a subset of `SIGNAL_NAMES`); a class is
    instantiated without arguments.
    """
    if spec.method == "thinkbrake":
        return ThinkBrakeRule(spec.signal)
    if spec.method == "deepconf":
        return DeepConfRule(spec.window)
    listed = tuple(s.strip() for s in (os.environ.get(PLUGINS_ENV, "") if allowed is None else allowed)
                   .split(",") if s.strip())
    if spec.method not in listed:
        raise OnlineControlError(f"rule {spec.method!r} is not allowed on this server "
                                 f"(the operator lists plug-in rules in {PLUGINS_ENV})")
    if spec.method.partition(":")[0].endswith(".py"):
        raise OnlineControlError(f"rule {spec.method!r}: a server loads rules from installed "
                                 f"modules only (module:object), not from files")
    try:
        obj = RULES.resolve(spec.method, allowed=listed)
    except RegistryError as e:
        raise OnlineControlError(f"rule {spec.method!r} cannot be loaded ({e})") from None
    if isinstance(obj, type):
        obj = obj()
    if not callable(getattr(obj, "online_stop", None)):
        raise OnlineControlError(f"rule {spec.method!r} has no online_stop(history, lengths, theta)")
    bad = [s for s in getattr(obj, "signals", SIGNAL_NAMES) if s not in SIGNAL_NAMES]
    if bad:
        raise OnlineControlError(f"rule {spec.method!r} needs signal {bad[0]!r}, which the logits "
                                 f"processor cannot compute (it has {', '.join(SIGNAL_NAMES)})")
    return obj


def check_engine(settings: Mapping[str, Any]) -> None:
    """Refuse, in one line, engine settings under which per-step control cannot work.

    `settings`: what is known of the engine's configuration
    (``speculative_config``, ``async_scheduling``, ...). Speculative
    decoding proposes several tokens per step and verifies them in one
    forward pass: the controller would have to decide at boundaries inside
    the draft, and vLLM itself refuses custom logits processors with it
    (`build_logitsprocs`). Pooling models never sample.
    """
    if settings.get("speculative_config"):
        raise OnlineControlError("online early exit needs one sampled token per step: speculative "
                                 "decoding verifies several drafted tokens in one step (and vLLM "
                                 "refuses custom logits processors with it); start the engine "
                                 "without a speculative config")
    if settings.get("pooling"):
        raise OnlineControlError("online early exit needs a generating model, not a pooling one")
