"""Batched candidate-logit readout (transformers engine) against one forward pass per context.

Runs the embedded tiny random Qwen3-style model on CPU (no model download):
64 readout contexts of ragged lengths, read once one at a time
(`HFEngine.choice_logprobs`) and once in padded batches
(`otbench.probe.horizon._readout.readout_logprobs`), both measured in this
run. Prints the largest absolute difference and, last, the speed-up.
"""

import tempfile
import time
from pathlib import Path

import numpy as np
from otbench.probe.engines._interface import EngineConfig, open_engine
from otbench.probe.engines._tiny import build_tiny_model
from otbench.probe.horizon._readout import find_spellings, readout_logprobs


def _smoke() -> bool:
    """`--smoke`: the smoke size the test suite runs (8 contexts)."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: 8 contexts")
    return ap.parse_args().smoke


def main() -> None:
    count = 8 if _smoke() else 64
    with tempfile.TemporaryDirectory() as tmp:
        eng = open_engine(EngineConfig(kind="transformers", model=str(build_tiny_model(Path(tmp) / "m", seed=0)),
                                       dtype="float32"))
        sp = find_spellings(eng.tokenizer(), 4)
        rng = np.random.default_rng(0)
        ctxs = [rng.integers(40, 400, int(n)).tolist() for n in rng.integers(64, 512, count)]
        readout_logprobs(eng, ctxs[:4], sp.flat_ids)            # warm-up
        eng.choice_logprobs(ctxs[:4], sp.flat_ids)
        t = time.perf_counter()
        one = np.array(eng.choice_logprobs(ctxs, sp.flat_ids))
        t_one = time.perf_counter() - t
        t = time.perf_counter()
        bat = np.array(readout_logprobs(eng, ctxs, sp.flat_ids))
        t_bat = time.perf_counter() - t
        eng.close()
    print(f"{count} contexts, 64-511 tokens: one at a time {t_one:.2f} s, batched {t_bat:.2f} s; "
          f"max |diff| {np.abs(one - bat).max():.2e}")
    print(f"speed-up {t_one / t_bat:.2f}x")


if __name__ == "__main__":
    main()
