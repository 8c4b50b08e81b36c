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


def test_pipes_reads_a_fifo_as_a_stream_and_still_refuses_devices(tmp_path):
    import threading

    from otbench.files import open_regular

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "wb") as w:              # blocks until the reader opens
            w.write(b"a\nb\n")

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    with open_regular(fifo, what="a test file", fail=Refused, pipes=True) as f:
        assert f.read() == b"a\nb\n"
    t.join(5)
    assert not t.is_alive()
    for path in ("/dev/zero", tmp_path):
        with pytest.raises(Refused, match=r"^not a regular file "):
            open_regular(path, what="a test file", fail=Refused, pipes=True)
