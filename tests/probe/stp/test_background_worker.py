"""The run's writer thread (`probe.stp._background`): order, the depth bound, failures (issue 13)."""

import threading

import pytest
from otbench.probe.stp._background import BackgroundWorker


def test_items_run_in_order_and_depth_bounds_what_is_not_done():
    done, gate = [], threading.Event()

    def fn(x):
        gate.wait(5)
        done.append(x)

    w = BackgroundWorker(fn, depth=1, name="t")
    w.submit(1)                                    # taken by the thread, held at the gate
    second = threading.Thread(target=w.submit, args=(2,))
    second.start()
    second.join(0.2)
    assert second.is_alive() and done == []        # the second waits: one item is not done
    gate.set()
    second.join(5)
    w.submit(3)
    w.drain()
    assert done == [1, 2, 3]
    w.close()


def test_a_failure_is_raised_in_the_caller_and_later_items_are_dropped():
    seen = []

    def fn(x):
        if x == 1:
            raise OSError(28, "No space left on device")
        seen.append(x)

    w = BackgroundWorker(fn, depth=2, name="t")
    w.submit(1)
    with pytest.raises(OSError, match="No space left"):
        w.drain()
    with pytest.raises(OSError, match="No space left"):
        w.submit(2)
    w.close()                                      # closing after a failure does not raise
    assert seen == []
