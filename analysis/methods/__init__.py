"""Stopping methods (docs/rules.md-§6.2, §10): the contract, `Method`, the registry and the built-ins.

No JAX here: the probe stage and the online controller import these names
(as they import the measurement contract), and OTBench's JAX scorer
(`otbench.analysis.bench`) takes the `Method` they resolve.

* the contract a method object meets: `UnitTable`, `OnlineView` and the
  `RoutingMethod` / `BudgetMethod` / `ExitMethod` protocols;
* `resolve` -> `Method`, resolved and checked once; `METHODS`, the one
  registry (one line adds a method: ``METHODS.register(name, "module:object")``);
* `SignalCost` (what a method's signal costs per decision);
* the built-ins: the three baselines, the field's methods, imported stops;
  question features and ridge regression for the learned ones.
"""

from ._baselines import PredictiveScheduling, ThinkBrakeOneContext, ThinkSwitcher
from ._contract import (
                        DECISION,
                        STRATEGIES,
                        BudgetMethod,
                        ExitMethod,
                        MethodError,
                        OnlineView,
                        RoutingMethod,
                        UnitTable,
)
from ._cost import KV_BLOCK, NO_SIGNAL, PROMPT_SIGNAL, SignalCost, partial_block, signal_tokens
from ._features import HashedText, StoredFeatures, read_question_features, ridge_fit, units_of
from ._field import AnswerConsistency, BudgetForcing, DeepConfExit, Deer, DeerSTP, DynasorCoT, DynasorCoTSTP
from ._method import (
                      CONFIDENCE_SIGNAL,
                      DEFAULT_ONLINE,
                      DEVICE_SIGNALS,
                      METHODS,
                      ONLINE_MODES,
                      PROCESSOR_SIGNALS,
                      OWN_SIDE_SIGNALS,
                      SIDE_SIGNALS,
                      STP_SIDE_SIGNALS,
                      Method,
                      builtin_methods,
                      check_sweep_budget,
                      load_method,
                      online_method,
                      resolve,
)
from ._stops import ImportedStops, read_stops
from ._thinkbrake import ThinkBrake, thinkbrake_stop

BUILTINS = METHODS
"""The registry under its former name: built-in names -> ``module:object``."""

__all__ = [
    "BUILTINS", "CONFIDENCE_SIGNAL", "KV_BLOCK", "DECISION", "DEFAULT_ONLINE", "DEVICE_SIGNALS", "METHODS", "NO_SIGNAL", "ONLINE_MODES", "PROCESSOR_SIGNALS", "PROMPT_SIGNAL",
    "OWN_SIDE_SIGNALS", "SIDE_SIGNALS", "STP_SIDE_SIGNALS", "STRATEGIES",
    "AnswerConsistency", "BudgetForcing", "BudgetMethod", "DeepConfExit", "Deer", "DeerSTP", "DynasorCoT", "DynasorCoTSTP", "ExitMethod",
    "HashedText", "ImportedStops", "Method", "MethodError", "OnlineView", "PredictiveScheduling",
    "RoutingMethod", "SignalCost", "StoredFeatures", "ThinkBrake", "ThinkBrakeOneContext", "ThinkSwitcher", "UnitTable",
    "builtin_methods", "check_sweep_budget", "load_method", "online_method", "partial_block", "read_question_features", "read_stops",
    "resolve", "ridge_fit", "signal_tokens", "thinkbrake_stop", "units_of",
]
