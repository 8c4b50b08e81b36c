"""benchmarks/horizon_smollm2.py at its smoke size: a matched-horizon run of the embedded model, analysed.

In a file of its own so the suite's workers run it beside the rest (tests/test_benchmarks.py).
"""

import pytest
from _bench_smoke import run_smoke


@pytest.mark.slow
def test_horizon_smollm2_runs_at_its_smoke_size(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("vllm")
    from _models import embedded_smollm2
    embedded_smollm2()
    assert "4. analysis at paper scale" in run_smoke("horizon_smollm2.py", "--work", str(tmp_path))
