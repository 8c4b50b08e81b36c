"""A processor method for the tests: never stops, writes what the processor read at each decision.

Loaded inside vLLM's engine process by name (`OTBENCH_ONLINE_PLUGINS`); the
file it appends to is named by `OTBENCH_TEST_RECORDER` (the engine process
inherits the test's environment).
"""

import json
import os

import numpy as np


class Recorder:
    strategy = "dee"
    online = "processor"
    signals = ("logp_end", "logp_other", "margin")

    def stop(self, view, theta):
        with open(os.environ["OTBENCH_TEST_RECORDER"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"length": int(view.tokens[0]),
                                **{k: float(view.signal(k)[0]) for k in self.signals}}) + "\n")
        return np.zeros(len(view), dtype=bool)
