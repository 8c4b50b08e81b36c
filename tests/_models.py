"""The embedded SmolLM2 for tests that start a real engine or server, skipped where it is unavailable."""

from pathlib import Path

import pytest


def embedded_smollm2():
    """(model entry, folder of its weights), or skip the test when the embedded model cannot be had."""
    from otbench.probe.config import embedded_model_dir, load_model

    entry = load_model("smollm2-135m-instruct")
    try:
        folder = embedded_model_dir(entry.name, log=lambda *_: None)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"embedded model unavailable: {e}")
    return entry, Path(folder)
