"""The in-engine stop: the vLLM logits processor that runs a ``online = "processor"`` method.

* `_control` -- one request's control, a state machine over its growing output (plain Python),
  and the token `Tables` it reads (shared by every part of the online controller);
* `_rule` -- the method the request names, rebuilt in the engine's process and asked to stop;
* `_core` -- what both model runners' processors share (setup, one step, signals, forcing);
* `_v1`, `_v2` (with `_v2_step`, its decision on the device) -- each runner's processor class;
* `_dispatch` -- `ExitProcessor`, the one class both runners load.

`_core`, `_v1`, `_v2`, `_v2_step` and `_dispatch` import torch and vLLM: loaded only in vLLM's
engine process (``otbench.probe.online`` imports them lazily).
"""
