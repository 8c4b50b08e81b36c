"""Online early exit: an OTBench stopping method run while the model generates (issue: online controller).

* `ExitProcessor` -- the vLLM logits processor (``LLM(...,
  logits_processors=[ExitProcessor])``, or a server's ``--logits-processors
  otbench.probe.online:ExitProcessor``), one class for vLLM's V1 and V2
  model runners (`ExitProcessorV1` / `ExitProcessorV2` name each one);
  imported lazily, in vLLM's process;
* `request_args` / `parse_args` / `ControlSpec` -- the per-request
  extension arguments (`GenRequest.extra_args`, a server request's
  ``vllm_xargs``) that name the method, its θ, its online parameters and
  the model family; `rule_args` gives a resolved `Method`'s;
* `ExitRule` / `load_rule` -- any DEE `Method` declaring ``online =
  "processor"``, run in the processor by its own ``stop(view, theta)``;
* `RequestControl`, `Tables` -- the per-request state machine the processor
  runs (plain Python, tested without vLLM);
* `run_side` / `SideController`, `FieldRule`, `SideJob` -- the
  request-level controller for the methods that need probe answers (every
  method whose `Method.online` is ``"side"``: Dynasor-CoT, DEER, answer
  consistency, plug-ins; budget forcing as a cap; `side_methods`): it
  drives generation through an engine's `Stream` with prefix-cached side
  requests (`_side`), its signals computed by the probe stage's own
  `otbench.probe.grading.probe_signals`;
* `compare`, `design_of`, `paired_point`, `disagreement_line` -- the
  certificate: OTBench's two-stage paired bootstrap of the point at θ on the
  macro chain (restated in NumPy), its verdict (``certified``, ``rejected``
  or ``not certified`` on too little evidence) and every source of
  disagreement;
* `check_engine` -- the one-line refusal of engine settings under which
  per-step control cannot work.

The code is laid out by role, each part a private subpackage: `_request` (what
a request asks), `_processor` (the in-engine stop: the per-request control, the
exit rule, each model runner's processor and the one class for both), `_side`
(the side-request controller), `_cap` (the engine's own thinking cap, restated)
and `_certify` (the replay of stored trajectories and every certificate).

Importing this package imports neither torch, vLLM nor JAX; the analysis
never imports it.
"""

from ._certify._replay import (
                       OnlineResult,
                       Trajectory,
                       certificate_line,
                       certify_set,
                       check_replayable,
                       compare,
                       engine_config_of,
                       boundary_signals,
                       first_at_or_below,
                       replay,
)
from ._certify._cap import KINDS as CAP_KINDS
from ._cap._count import CapPrediction, predict_cut, v2_forced
from ._cap._strings import CapStrings, cap_strings, reasoning_marker
from ._certify._cap import CapOutcome, cap_line, certify_engine_cap, classify, read_capped
from ._certify._interval import Design, design_of, paired_point
from ._certify._verdict import MIN_FAITHFUL_SHARE, MIN_QUESTIONS, disagreement_line
from ._certify._side import (
                            certify_field,
                            net_line,
                            record_signals,
                            replay_context,
                            side_jobs,
                            signals_line,
                            signals_vs_recorded,
)
from ._processor._control import RequestControl, Tables
from ._processor._rule import ExitRule, load_rule, rule_args, set_rule_args
from ._side._controller import FieldRule, SideController, SideJob, SideResult, chunk_seed, run_side, side_methods
from ._request import (
                    CAP,
                    PLUGINS_ENV,
                    PROCESSOR,
                    SIGNAL_NAMES,
                    ControlSpec,
                    OnlineControlError,
                    check_engine,
                    parse_args,
                    request_args,
)

__all__ = ["CAP", "CAP_KINDS", "CapOutcome", "CapStrings", "cap_line", "cap_strings", "certify_engine_cap",
           "classify", "read_capped", "CapPrediction", "predict_cut", "v2_forced", "reasoning_marker",
           "MIN_FAITHFUL_SHARE", "MIN_QUESTIONS", "PLUGINS_ENV", "PROCESSOR",
           "SIGNAL_NAMES", "ControlSpec", "Design", "ExitProcessor", "ExitRule", "ExitProcessorV1", "ExitProcessorV2", "FieldRule",
           "OnlineControlError", "OnlineResult", "RequestControl", "SideController", "SideJob",
           "SideResult", "Tables", "Trajectory",
           "boundary_signals", "certificate_line", "certify_field", "certify_set", "check_engine",
           "check_replayable", "chunk_seed", "compare", "design_of", "disagreement_line", "engine_config_of",
           "first_at_or_below",
           "load_rule", "net_line", "parse_args",
           "paired_point", "record_signals", "replay", "replay_context", "request_args", "rule_args", "set_rule_args",
           "run_side", "side_jobs", "side_methods", "signals_line", "signals_vs_recorded"]


def __getattr__(name: str):
    if name in ("ExitProcessor", "ExitProcessorV1", "ExitProcessorV2"):
        from ._processor import _dispatch

        return getattr(_dispatch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
