"""`otbench.files.read_regular`: a regular file up to the limit, every other input one error."""

import os

import pytest
from otbench.files import read_regular


class Refused(Exception):
    pass


def _read(path, limit=8):
    return read_regular(path, limit, what="a test file", fail=Refused)


def test_reads_up_to_the_limit_and_refuses_one_byte_more(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"12345678")
    assert _read(f) == b"12345678"
    f.write_bytes(b"")
    assert _read(f) == b""
    f.write_bytes(b"123456789")
    with pytest.raises(Refused, match=r"^larger than 8 bytes; a test file is smaller$"):
        _read(f)
    big = tmp_path / "big"
    big.write_bytes(b"x" * (3 << 20))              # read in chunks, across the 1 MiB reads
    assert _read(big, 3 << 20) == b"x" * (3 << 20)


def test_special_files_and_missing_paths_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)                                 # no writer: a blocking open would hang
    for path in (fifo, "/dev/zero", tmp_path):
        with pytest.raises(Refused, match=r"^not a regular file \(a FIFO, device or folder is not a test file\)$"):
            _read(path)
    with pytest.raises(Refused, match=r"^no such file$"):
        _read(tmp_path / "missing")
    locked = tmp_path / "locked"
    locked.write_bytes(b"x")
    locked.chmod(0)
    if os.geteuid() != 0:                           # root reads a mode-0 file
        with pytest.raises(Refused, match=r"^cannot be read \(Permission denied\)$"):
            _read(locked)


def _read_fifo_in_a_thread(fifo, timeout=20.0):
    """What `open_regular(..., pipes=True)` reads from `fifo`, or None when it is still blocked
    after `timeout` seconds (it is then released by a writer that opens and leaves, so a hang
    fails the test instead of stopping the suite)."""
    import threading

    from otbench.files import open_regular

    got = {}

    def reader():
        with open_regular(fifo, what="a test file", fail=Refused, pipes=True) as f:
            got["data"] = f.read()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(5)
        return None
    return got["data"]


def _writer(fifo, data=b"a\nb\n"):
    import threading

    def write():
        with open(fifo, "wb") as w:              # blocks until a reader opens
            w.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_pipes_reads_a_fifo_as_a_stream_and_still_refuses_devices(tmp_path):
    from otbench.files import open_regular

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t = _writer(fifo)
    assert _read_fifo_in_a_thread(fifo) == b"a\nb\n"
    t.join(5)
    assert not t.is_alive()
    for path in ("/dev/zero", tmp_path):
        with pytest.raises(Refused, match=r"^not a regular file "):
            open_regular(path, what="a test file", fail=Refused, pipes=True)


def test_a_writer_that_writes_and_leaves_at_once_is_read_in_full(tmp_path, monkeypatch):
    # A reader slow between its open and its check (a loaded machine): a writer has connected,
    # written and left by then. Opening the FIFO twice (a non-blocking look, then a blocking
    # reopen) lost the data with the first descriptor and then waited forever for a writer.
    import time

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_fstat = os.fstat

    def slow_fstat(fd):
        time.sleep(0.3)
        return real_fstat(fd)

    monkeypatch.setattr(os, "fstat", slow_fstat)
    t = _writer(fifo, b"all of it\n")
    assert _read_fifo_in_a_thread(fifo) == b"all of it\n"
    t.join(5)
    assert not t.is_alive()
