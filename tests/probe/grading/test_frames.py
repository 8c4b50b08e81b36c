"""The sandbox's frame decoder alone (`probe/grading/_frames.py`): frames survive any chunking,
a line that is not a harness header breaks the stream, a stream past its cap is over."""

import json

from hypothesis import given
from hypothesis import strategies as st
from otbench.probe.grading._frames import FrameDecoder, TestOutcome, _Outcomes


def frame(payload: bytes, **header) -> bytes:
    return json.dumps({"nbytes": len(payload), **header}).encode() + b"\n" + payload


@given(st.lists(st.binary(max_size=40), max_size=6), st.lists(st.integers(1, 30), max_size=40))
def test_any_chunking_gives_the_same_frames(payloads, cuts):
    stream = frame(b"", ready=True) + b"".join(frame(p, kind="exit", code=0) for p in payloads)
    dec, got, at = FrameDecoder(cap=1 << 20), [], 0
    for c in cuts + [len(stream)]:
        dec.feed(stream[at:at + c])
        at += c
        got += list(dec.frames())
        if at >= len(stream):
            break
    assert [p for h, p in got] == [b""] + payloads and not dec.broken and not dec.over
    assert got[0][0]["ready"] is True


def test_a_line_that_is_not_a_header_breaks_the_stream():
    dec = FrameDecoder(cap=1 << 20)
    dec.feed(frame(b"x", kind="exit", code=0) + b"hello from the program\n" + frame(b"y"))
    assert [p for _, p in dec.frames()] == [b"x"] and dec.broken
    assert list(dec.frames()) == []


def test_past_the_cap_is_over():
    dec = FrameDecoder(cap=10)
    dec.feed(b"x" * 11)
    assert dec.over


def test_outcomes_stop_at_a_failed_test_or_a_refused_one():
    dec = FrameDecoder(cap=1 << 20)
    dec.feed(frame(b"", ready=True) + frame(b"1", kind="exit", code=0)
             + frame(b"", kind="timeout", code=0) + frame(b"3", kind="exit", code=0))
    box = _Outcomes(None)
    box.take(dec)
    assert box.ready and box.stop and box.outcomes == [TestOutcome("exit", 0, b"1"),
                                                       TestOutcome("timeout", 0, b"")]
    dec = FrameDecoder(cap=1 << 20)
    dec.feed(frame(b"a", kind="exit", code=0) + frame(b"b", kind="exit", code=0))
    box = _Outcomes(lambda i, o: o.output != b"a")
    box.take(dec)
    assert box.stop and len(box.outcomes) == 1
