"""`ExitProcessor`: the one logits processor class for both of vLLM's model runners.

V2 loads custom processors through `vllm/v1/worker/gpu/sample/logits_processor/loader.py`
(`_load_v2_logitsprocs_by_fqcns`), which refuses any class that is not a
subclass of its own `LogitsProcessor` (`.../logits_processor/interface.py`);
V1 (`vllm/v1/sample/logits_processor/__init__.py`,
`_load_logitsprocs_by_fqcns`) refuses any class that is not a subclass of
the V1 one. The two interfaces differ in their constructor -- V1 builds
``ctor(vllm_config, device, is_pin_memory)`` (`build_logitsprocs`), V2
``ctor(vllm_config, LogitsProcRequestState)`` (`build_custom_logits_processors`)
-- so `ExitProcessor` subclasses both and becomes, at construction, the
processor of the runner that builds it (`ExitProcessorV1`, `_v1`;
`ExitProcessorV2`, `_v2`). Nothing has to re-derive vLLM's
runner choice (which depends on the installed Triton, the environment and
the engine's features), and one FQCN (``otbench.probe.online:ExitProcessor``)
serves ``LLM(...)`` and a server on CPU (V1) and GPU (V2) alike.

Imports torch and vLLM at import time: ``otbench.probe.online`` loads this module lazily, in
vLLM's engine process.
"""

import torch

from ._v1 import ExitProcessorV1
from ._v2 import ExitProcessorV2, LogitsProcessor, LogitsProcRequestState, _validate_v2

__all__ = ["ExitProcessor", "ExitProcessorV1", "ExitProcessorV2"]


if LogitsProcessor is None:  # pragma: no cover
    ExitProcessor = ExitProcessorV1
else:
    from vllm.v1.sample.logits_processor import LogitsProcessor as _V1LogitsProcessor

    class ExitProcessor(_V1LogitsProcessor, LogitsProcessor):
        """Online early exit under either runner (module docstring).

        A subclass of both interfaces, so both loaders accept it; the
        runner that builds it picks the implementation by what it passes:
        V2 a `LogitsProcRequestState` (`loader.py`
        `build_custom_logits_processors`), V1 a device and a pin-memory flag
        (`v1/sample/logits_processor/__init__.py` `build_logitsprocs`).
        Each runner then calls only its own hooks. The frontend validates
        requests before any runner is known (`v1/engine/input_processor.py`
        `_build_logits_processors_params_validator`), so `validate_params`
        is the stricter V2 check under both.
        """

        @classmethod
        def validate_params(cls, sampling_params) -> None:
            _validate_v2(sampling_params)

        def __init__(self, vllm_config, *args):
            if len(args) == 1 and isinstance(args[0], LogitsProcRequestState):
                self.runner, self._impl = "v2", ExitProcessorV2(vllm_config, args[0])
            elif len(args) == 2:
                self.runner, self._impl = "v1", ExitProcessorV1(vllm_config, *args)
            else:
                # a bug: vLLM itself constructs the processor with these arguments
                raise TypeError("ExitProcessor is built by vLLM: (vllm_config, device, is_pin_memory) "
                                "under the V1 runner, (vllm_config, req_states) under V2")

        def is_argmax_invariant(self) -> bool:
            return False

        def update_state(self, batch_update) -> None:          # V1 only
            self._impl.update_state(batch_update)

        def add_request(self, req_idx: int, sampling_params) -> bool:   # V2 only
            return self._impl.add_request(req_idx, sampling_params)

        def apply_staged_writes(self) -> None:                 # V2 only
            self._impl.apply_staged_writes()

        def apply(self, logits: torch.Tensor, ctx=None) -> torch.Tensor:
            return self._impl.apply(logits) if self.runner == "v1" else self._impl.apply(logits, ctx)
