"""What a request asks of the online controller (no torch, no vLLM, no JAX).

A request opts in through its per-request extension arguments
(`GenRequest.extra_args` -> vLLM's `SamplingParams.extra_args`; over an
OpenAI-compatible server, the request body's `vllm_xargs`), flat keys so
they travel through either path unchanged:

* ``otbench_method``: a DEE method that runs in the logits processor
  (``online = "processor"``), by its registered name
  (`otbench.analysis.methods.METHODS`) or as ``"module:object"``, a plug-in
  the server's operator allowed (`PLUGINS_ENV`); or `CAP`, the controller's
  own per-request cap for an FB method (θ is the cap in thinking tokens; a
  DR route is a cap of 0 or no control at all);
* ``otbench_theta``: the method's θ;
* ``otbench_params``: the method's online parameters
  (`Method.online_parameters`, e.g. a threshold fitted offline), a JSON
  object as a string (a server's ``vllm_xargs`` carries no nested objects);
  the processor rebuilds the method from them (`_processor._rule.load_rule`);
* ``otbench_family``: the model family (``artifacts/families``), which
  fixes the signal token and the thinking end the controller forces;
* ``otbench_boundary``: ``"vocab"`` or ``"vocab+span"`` (the model entry's
  boundary rule, `SPAN_RULES`);
* ``otbench_lengths``: optional; decide only at these thinking lengths
  (certification replays a stored trajectory's step ends `L(0..n-1)`),
  instead of at every block end as it is written.

Everything here is plain Python so a client, the tests and the processor
share one parser.
"""

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from otbench.errors import OtbenchError

PREFIX = "otbench_"
KEYS = ("method", "theta", "family", "params", "boundary", "lengths")
CAP = "cap"
"""The controller's own rule (not a `Method`): force the thinking end at θ thinking tokens."""
SIGNAL_NAMES = ("logp_end", "logp_other", "margin")
"""Signals the processor computes from the logits it sees, as the probe records them:
`margin = logp_other - logp_end` (docs/rules.md). The processor sees the model's own context
(the boundary token as written), so its ``margin`` is the probe's recorded ``margin_own``;
the probe's ``margin`` is read after the boundary token is replaced (docs/rules.md), a context
the processor never sees. Certify an offline walk on ``margin_own`` against it."""
PLUGINS_ENV = "OTBENCH_ONLINE_PLUGINS"
"""Comma-separated ``module:object`` methods a server may load when a request names them
(a request never makes the server import a module its operator did not list)."""

PROCESSOR = "otbench.probe.online:ExitProcessor"
"""The processor's fully qualified name, for ``--logits-processors`` (either model runner)."""


class OnlineControlError(OtbenchError, ValueError):
    """A request or engine setting the online controller cannot honour (one line)."""


@dataclasses.dataclass(frozen=True)
class ControlSpec:
    """One request's online control, parsed from its extension arguments (see module docstring)."""

    method: str
    theta: float
    family: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    boundary: str = "vocab"
    lengths: tuple[int, ...] | None = None

    @property
    def is_cap(self) -> bool:
        return self.method == CAP

    def as_args(self) -> dict[str, Any]:
        """The flat extension arguments that parse back to this spec."""
        out: dict[str, Any] = {PREFIX + "method": self.method, PREFIX + "theta": float(self.theta),
                               PREFIX + "family": self.family, PREFIX + "boundary": self.boundary}
        if self.params:
            out[PREFIX + "params"] = json.dumps(dict(self.params), sort_keys=True, allow_nan=False)
        if self.lengths is not None:
            out[PREFIX + "lengths"] = [int(x) for x in self.lengths]
        return out


def request_args(method: str, theta: float, family: str, *, params: Mapping[str, Any] | None = None,
                 boundary: str = "vocab", lengths: Sequence[int] | None = None,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Extension arguments asking for online control (checked here, as the server will).

    `method`: a processor method's registered name or ``module:object``, or `CAP`; `params`:
    its online parameters (`_processor._rule.rule_args` gives both for a resolved `Method`).
    """
    spec = ControlSpec(method, float(theta), family, dict(params or {}), boundary,
                       None if lengths is None else tuple(int(x) for x in lengths))
    args = dict(extra or {})
    args.update(spec.as_args())
    parse_args(args)
    return args


def _params(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        out = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise OnlineControlError(f"{PREFIX}params must be a JSON object as a string, got {raw!r}")
    return out


def _method(method: Any) -> str:
    """The request's method reference, checked for form only (the processor resolves it)."""
    from otbench.analysis.methods import METHODS

    if not isinstance(method, str) or not method:
        raise OnlineControlError(f"{PREFIX}method must be a non-empty string, got {method!r}")
    if method != CAP and method not in METHODS and ":" not in method:
        raise OnlineControlError(f"{PREFIX}method must be a registered method that runs in the logits "
                                 f"processor, 'module:object' or {CAP!r}, got {method!r} "
                                 f"(`otbench bench list` names them)")
    return method


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
    method = _method(args[PREFIX + "method"])
    theta = args.get(PREFIX + "theta")
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or math.isnan(float(theta)):
        raise OnlineControlError(f"{PREFIX}theta must be a number, got {theta!r}")
    theta = float(theta)
    if method == CAP and not theta >= 0:
        raise OnlineControlError(f"{PREFIX}theta of method {CAP!r} is a token cap >= 0, got {theta}")
    family = args.get(PREFIX + "family")
    if not isinstance(family, str) or not family:
        raise OnlineControlError(f"{PREFIX}family must name a model family, got {family!r}")
    params = _params(args.get(PREFIX + "params"))
    if method == CAP and params:
        raise OnlineControlError(f"{PREFIX}params apply to a method, not to {CAP!r}")
    boundary = args.get(PREFIX + "boundary", "vocab")
    if boundary not in ("vocab", "vocab+span"):
        raise OnlineControlError(f"{PREFIX}boundary must be 'vocab' or 'vocab+span', got {boundary!r}")
    lengths = args.get(PREFIX + "lengths")
    if lengths is not None:
        if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in lengths):
            raise OnlineControlError(f"{PREFIX}lengths must be a list of thinking lengths >= 0")
        lengths = tuple(sorted(set(int(x) for x in lengths)))
    return ControlSpec(method, theta, family, params, boundary, lengths)


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
