"""Session fixtures of the probe tests: the tiny model, an engine on it, a private otbench cache."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny random Qwen3-style model folder (`engines._tiny`), built once per session."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from otbench.probe.engines._tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.getbasetemp() / "tiny-qwen3", seed=0)


@pytest.fixture(scope="session")
def hf_engine(tiny_model):
    """A transformers engine on the tiny model (float32, so results are exact across runs)."""
    from otbench.probe.engines import EngineConfig, open_engine

    e = open_engine(EngineConfig(kind="transformers", model=str(tiny_model), dtype="float32"))
    yield e
    e.close()


@pytest.fixture(scope="session")
def otbench_cache(tmp_path_factory):
    """Fingerprint memos and converted models go to a test folder, not the user's cache."""
    d = tmp_path_factory.mktemp("otbench-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTBENCH_CACHE", str(d))
        yield d
