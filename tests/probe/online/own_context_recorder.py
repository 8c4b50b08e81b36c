"""A plug-in exit rule for the tests: never stops, writes what the processor read at each decision.

Loaded inside vLLM's engine process by name (`OTBENCH_ONLINE_PLUGINS`); the
file it appends to is named by `OTBENCH_TEST_RECORDER` (the engine process
inherits the test's environment).
"""

import json
import os


class Recorder:
    signals = ("logp_end", "logp_other", "margin")

    def online_stop(self, history, lengths, theta) -> bool:
        with open(os.environ["OTBENCH_TEST_RECORDER"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"length": int(lengths[-1]),
                                **{k: float(history[k][-1]) for k in self.signals}}) + "\n")
        return False
