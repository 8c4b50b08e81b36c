"""The sandbox harness's frame stream, decoded apart from the process handling (`_sandbox`).

The harness writes one frame per event: a JSON header line (`nbytes`, and
`ready` or the test's `kind` and `code`), then `nbytes` bytes of output. A
line that is not such a header means the program under test wrote to the
stream, which ends the run.
"""

import json
from collections.abc import Iterator
from typing import NamedTuple


class TestOutcome(NamedTuple):
    """How one test ended inside the sandbox.

    Attributes:
        kind: "exit" | "signal" | "timeout" | "memory" | "output_limit".
        code: exit status, or minus the signal number.
        output: stdout bytes (stdin/stdout tests) or return-value JSON (functional).
    """

    kind: str
    code: int
    output: bytes


class FrameDecoder:
    """The harness's frame stream: a JSON header line holding `nbytes`, then that many bytes.

    `feed` appends what was read (`over` once more than `cap` bytes wait);
    `frames()` yields each complete `(header, payload)` and sets `broken`
    at a line that is not a harness header (the program wrote to the stream).
    """

    def __init__(self, cap: int):
        self.buf, self.cap = bytearray(), cap
        self.over = self.broken = False

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        if len(self.buf) > self.cap:
            self.over = True

    def frames(self) -> Iterator[tuple[dict, bytes]]:
        while not self.broken:
            nl = self.buf.find(b"\n")
            if nl < 0:
                return
            try:
                header = json.loads(self.buf[:nl])
                size = int(header["nbytes"])
            except (ValueError, KeyError, TypeError):
                self.broken = True
                return
            if len(self.buf) < nl + 1 + size:
                return
            payload = bytes(self.buf[nl + 1: nl + 1 + size])
            del self.buf[: nl + 1 + size]
            yield header, payload


class _Outcomes:
    """The tests' outcomes as frames arrive; `stop` at a failed test, a test `accept` refuses,
    or a broken stream (`ready`: the harness said it started)."""

    def __init__(self, accept):
        self.accept, self.outcomes = accept, []
        self.ready = self.stop = False

    def take(self, frames: FrameDecoder) -> None:
        for header, payload in frames.frames():
            if header.get("ready"):
                self.ready = True
                continue
            o = TestOutcome(str(header.get("kind")), int(header.get("code", 0)), payload)
            self.outcomes.append(o)
            if o.kind != "exit" or o.code != 0 or (
                    self.accept is not None and not self.accept(len(self.outcomes) - 1, o)):
                self.stop = True
                return
        if frames.broken:
            self.stop = True
