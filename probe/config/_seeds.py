"""Per-sample seeds derived from what a sample is, never from run order (docs/rules.md).

    seed = int(sha256("otbench.seed/1" US model US benchmark US question US
                      trajectory US phase [US position])[:8], big-endian) >> 2

where US is the unit separator U+001F, every field is written as text
(integers in decimal), and the top 62 bits are kept so that `seed + j`
(the seed of sample `j` of a request with `n` samples; vLLM's convention,
which the transformers engine follows too) stays below 2^63. The same
inputs give the same seed on any machine, any Python, any batch order.

Phases: "think" (the trajectory), "answer" (its original answer), "probe"
(answer probes; these also take the probing position `k`), "direct" (the
optional direct answer to the no-thinking prompt, trajectory 0), "dynasor",
"deer" and "thinkbrake" (the field methods' own probes at position `k`,
`probe.field_probes`).
"""

import hashlib
from otbench.errors import ArgumentError

PHASES = ("think", "answer", "probe", "direct", "dynasor", "deer", "thinkbrake")
_AT_POSITION = ("probe", "dynasor", "deer", "thinkbrake")
_TAG = "otbench.seed/1"
_US = "\x1f"


def derive_seed(model: str, benchmark: str, question: str, trajectory: int, phase: str,
                position: int | None = None) -> int:
    """The seed of one request (sample `j` of it uses `seed + j`).

    >>> derive_seed("m", "math", "q1", 0, "think") == derive_seed("m", "math", "q1", 0, "think")
    True
    >>> derive_seed("m", "math", "q1", 0, "probe", 3) != derive_seed("m", "math", "q1", 0, "probe", 4)
    True
    """
    if phase not in PHASES:
        raise ArgumentError(f"`phase` must be one of {', '.join(PHASES)}, got {phase!r}.")
    if (phase in _AT_POSITION) != (position is not None):
        # (the message names the phase asked for; the positional phases other than 'probe' are
        # the field methods' own probes)
        which = phase if phase in _AT_POSITION else "probe"
        raise ArgumentError(f"`position` is required for phase '{which}' and only for it.")
    if isinstance(trajectory, bool) or int(trajectory) != trajectory or trajectory < 0:
        raise ArgumentError(f"`trajectory` must be a non-negative integer, got {trajectory!r}.")
    for name, v in (("model", model), ("benchmark", benchmark), ("question", question)):
        if not isinstance(v, str) or _US in v:
            raise ArgumentError(f"`{name}` must be a string without U+001F, got {v!r}.")
    fields = [_TAG, model, benchmark, question, str(int(trajectory)), phase]
    if position is not None:
        if isinstance(position, bool) or int(position) != position or position < 0:
            raise ArgumentError(f"`position` must be a non-negative integer, got {position!r}.")
        fields.append(str(int(position)))
    digest = hashlib.sha256(_US.join(fields).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 2
