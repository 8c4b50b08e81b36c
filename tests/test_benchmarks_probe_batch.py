"""benchmarks/probe_batch.py at its smoke size: the loop's batch under KV admission against vLLM alone and plain generate.

In a file of its own so the suite's workers run it beside the rest (tests/test_benchmarks.py).
"""

import re

import pytest
from _bench_smoke import run_smoke

LAST = re.compile(r"^probe_batch: sequences per step (\d+\.\d) vs plain generate (\d+\.\d) \(ratio (\d+\.\d\d)\), "
                  r"preemptions (\d+), old bound (\d+), new bound (\d+); engine busy seconds (\d+\.\d) vs (\d+\.\d); "
                  r"vLLM alone on the same dependencies V (\d+\.\d) \(D/V (\d+\.\d\d)\), its preemptions (\d+); "
                  r"engine steps (\d+) \(loop\), (\d+) \(V\), (\d+) \(G\)$")


@pytest.mark.slow
def test_probe_batch_runs_at_its_smoke_size():
    pytest.importorskip("torch")
    pytest.importorskip("vllm")
    from _models import embedded_smollm2
    embedded_smollm2()
    last = run_smoke("probe_batch.py").strip().splitlines()[-1]
    m = LAST.match(last)
    assert m, last
    # the figures are the benchmark's to judge; here: both batches measured, the old bound as scaled
    assert float(m[1]) > 0 and float(m[2]) > 0 and int(m[5]) >= 1 and int(m[6]) >= 1
    assert float(m[7]) > 0 and float(m[8]) > 0
    # V: the loop again without the KV admission; every pass stepped the engine
    assert float(m[9]) > 0 and int(m[12]) > 0 and int(m[13]) > 0 and int(m[14]) > 0
