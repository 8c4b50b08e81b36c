"""The journal's single-writer lock: `flock` where the filesystem has it, an owner file where it does not.

Lustre mounted without `-o flock` answers `flock` with ENOSYS, some NFS
setups with ENOLCK, others with EOPNOTSUPP/EINVAL. There the lock is a file
created with O_CREAT | O_EXCL (atomic on those filesystems too) that names
its owner (host, pid) and is removed on release. An owner file left by a
run killed on this host (its pid is gone) is taken over; one written on
another host cannot be checked from here, so it is refused in one line
that names the file to delete once that run is known to be dead.
"""

import errno
import fcntl
import json
import os
import socket
from pathlib import Path

from otbench.errors import OtbenchError
from otbench.files import pid_alive

NO_FLOCK = frozenset({errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL,
                      getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)})
"""`flock` errors that mean "this filesystem does not lock", not "someone holds the lock"."""
OWNER_FILE = "lock.owner"


class LockHeldError(OtbenchError, RuntimeError):
    """Another run holds the journal's lock."""


class JournalLock:
    """Held by the one run that writes a journal folder; `release` gives it up (idempotent)."""

    def __init__(self, root: Path):
        self.root, self.kind = Path(root), "flock"
        self._fd, self._owner = -1, None
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES):
                raise LockHeldError(f"{self.root}: another run is writing this journal (its lock is held)") from None
            if e.errno not in NO_FLOCK:
                raise
            self.kind = "owner file"
            self._owner = self._take_owner_file()
            return
        self._fd = fd

    def _take_owner_file(self) -> Path:
        path = self.root / OWNER_FILE
        me = {"host": socket.gethostname(), "pid": os.getpid()}
        for _ in range(2):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                try:
                    owner = json.loads(path.read_text())
                    host, pid = str(owner["host"]), int(owner["pid"])
                except (OSError, ValueError, KeyError, TypeError):
                    host, pid = "?", -1
                if host == me["host"] and pid > 0 and not pid_alive(pid):
                    path.unlink(missing_ok=True)           # left by a killed run on this host
                    continue
                raise LockHeldError(
                    f"{self.root}: another run is writing this journal ({host} pid {pid}); this filesystem "
                    f"has no flock, so the lock is the file {OWNER_FILE}: delete it once that run is dead"
                ) from None
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(me) + "\n")
                f.flush()
                os.fsync(f.fileno())
            return path
        raise LockHeldError(f"{self.root}: could not take {OWNER_FILE} (another run took it meanwhile)")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)           # releases the flock
            self._fd = -1
        if self._owner is not None:
            self._owner.unlink(missing_ok=True)
            self._owner = None
