"""Session fixtures of the probe tests: the tiny model, an engine on it, a private otbench cache."""

import os
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
def otbench_cache() -> Path:
    """The run's otbench cache (tests/conftest.py, `pytest_configure`): fingerprint memos and the
    converted model go to a test folder shared by the workers, never the user's cache."""
    return Path(os.environ["OTBENCH_CACHE"])
