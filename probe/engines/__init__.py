"""Inference engines behind one interface (docs/rules.md): vLLM (GPU and CPU builds), transformers, a lazy registry.

Importing this package never imports torch, transformers or vLLM; an engine
loads its library when it is opened (`open_engine`).
"""

from ._interface import (
                         ENGINES,
                         EngineBase,
                         StreamBase,
                         BatchStream,
                         Completion,
                         Engine,
                         EngineConfig,
                         EngineStartError,
                         GenRequest,
                         Signal,
                         SignalRequest,
                         Stream,
                         engine_class,
                         open_engine,
)



def detect_device() -> str:
    """The device vLLM will run on, by its own platform detection (`_vllm.detect_device`; imports vLLM)."""
    from ._vllm import detect_device as detect

    return detect()


__all__ = ["ENGINES", "BatchStream", "Completion", "Engine", "EngineBase", "EngineConfig", "EngineStartError",
           "GenRequest", "Signal", "SignalRequest", "Stream", "StreamBase", "detect_device", "engine_class", "open_engine"]
