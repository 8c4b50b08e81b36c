"""Bootstrap checkpoints (orbax-checkpoint): save every N batches, resume a killed run exactly (docs/rules.md).

A checkpoint holds the replicate arrays computed so far (full size, filled
up to `done`) and a JSON fingerprint of everything the numbers depend on
(the data's content hash, seed, replicate count, frontier settings). A
replicate depends only on its index and the seed (`_bootstrap_draws`), so
resuming at `done` and computing the rest reproduces an uninterrupted run
bit for bit, whatever the batch size before and after the interruption.
Saves are synchronous and orbax commits a step atomically, so a run killed
while saving resumes from the previous step.

Nothing resumes silently wrong: the metadata records the sha256 of the saved
arrays together with `done` (which replicates are filled), and `done` must
equal the step it is stored under, so a flipped bit, an edited count (also
one edited consistently with a renamed step) or a deleted state is refused; a lock file makes a second
bootstrap on the same directory fail at once instead of racing; orbax's
temporary folders of a killed save are removed on open (under the lock).
"""

import fcntl
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from otbench.errors import OtbenchError


class CheckpointError(OtbenchError, ValueError):
    """A checkpoint directory that cannot be used as asked (message says why and how to fix)."""


class Checkpointer:
    """Save / restore the replicate arrays of one bootstrap run.

    Args:
      directory: checkpoint directory (created when missing).
      fingerprint: JSON-able settings the results depend on.
      resume: continue the latest checkpoint in `directory`; without it a
        directory that already holds checkpoints is refused rather than
        silently overwritten.
      keep: checkpoints kept (older ones are deleted).
    """

    def __init__(self, directory: str | Path, fingerprint: dict[str, Any], *, resume: bool,
                 keep: int = 2):
        # Lazy: orbax (and tensorstore) load only for runs that checkpoint.
        import orbax.checkpoint as ocp

        self._ocp = ocp
        self.directory = Path(directory).absolute()
        self._lock = _lock(self.directory)
        for tmp in self.directory.glob("*.orbax-checkpoint-tmp*"):
            shutil.rmtree(tmp, ignore_errors=True)
        self.fingerprint = json.loads(json.dumps(fingerprint))      # normalized (tuples -> lists)
        opts = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                            enable_async_checkpointing=False)
        self.manager = ocp.CheckpointManager(self.directory, options=opts)
        self.resume = resume
        if not resume and self.manager.latest_step() is not None:
            self.close()
            raise CheckpointError(
                f"`checkpoint_dir` {self.directory} already holds a checkpoint; pass resume=True "
                "(--resume) to continue it, or choose an empty directory")

    def restore(self, arrays: dict[str, np.ndarray]) -> int:
        """Fill `arrays` (in place) from the latest checkpoint; return replicates done (0: none)."""
        step = self.manager.latest_step() if self.resume else None
        if step is None:
            return 0
        ocp = self._ocp
        try:
            got = self.manager.restore(step, args=ocp.args.Composite(
                meta=ocp.args.JsonRestore(), state=ocp.args.StandardRestore()))
        except Exception as e:  # noqa: BLE001 -- orbax raises many kinds for a damaged step
            raise CheckpointError(f"the checkpoint step {step} in {self.directory} cannot be read "
                                  f"({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
                                  "delete it to start over") from None
        meta = got["meta"]
        if not isinstance(meta, dict):
            raise CheckpointError(f"the checkpoint step {step} in {self.directory} has no "
                                  "metadata; delete it to start over")
        if meta.get("fingerprint") != self.fingerprint:
            old, new = meta.get("fingerprint", {}), self.fingerprint
            diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            raise CheckpointError(
                f"the checkpoint in {self.directory} was made with different settings "
                f"({', '.join(diff)}); resume with the same data and settings, or choose "
                "another `checkpoint_dir`")
        state = got["state"]
        for k, a in arrays.items():
            src = np.asarray(state[k])
            if src.shape != a.shape or src.dtype != a.dtype:
                raise CheckpointError(f"checkpoint array {k!r} has shape {src.shape} {src.dtype}, "
                                      f"expected {a.shape} {a.dtype}")
            a[...] = src
        done = meta.get("done")
        if type(done) is not int or done != step or not 0 <= done <= _rows(arrays):
            raise CheckpointError(f"the checkpoint step {step} in {self.directory} records "
                                  f"done={done!r}, which must equal its step and lie in "
                                  f"0..{_rows(arrays)}; delete it to start over")
        if meta.get("sha256") != _digest(arrays, done):
            raise CheckpointError(f"the checkpoint step {step} in {self.directory} does not match "
                                  "its checksum (changed or damaged); delete it to start over")
        return done

    def save(self, done: int, arrays: dict[str, np.ndarray]) -> None:
        """Write a checkpoint of the first `done` replicates (step = done)."""
        ocp = self._ocp
        if done in self.manager.all_steps():
            return                 # already saved (a resumed, finished run)
        self.manager.save(done, args=ocp.args.Composite(
            meta=ocp.args.JsonSave({"fingerprint": self.fingerprint, "done": int(done),
                                    "sha256": _digest(arrays, int(done))}),
            state=ocp.args.StandardSave({k: np.asarray(a) for k, a in arrays.items()})),
            force=True)
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()
        if self._lock is not None:
            self._lock.close()              # closing the file releases the lock
            self._lock = None


def _lock(directory: Path):
    """An exclusive lock on `directory` for this run; `CheckpointError` when another holds it.

    A folder that exists, is not empty and is not a checkpoint folder (no lock file of an
    earlier run) is refused: checkpoints never land among a user's files.
    """
    if directory.is_dir() and not (directory / ".otbench.lock").is_file() \
            and any(directory.iterdir()):
        raise CheckpointError(f"`checkpoint_dir` {directory} exists and is not a checkpoint "
                              "folder (it holds other files); choose an empty or new directory")
    directory.mkdir(parents=True, exist_ok=True)
    f = open(directory / ".otbench.lock", "a")  # noqa: SIM115 -- held until close()
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise CheckpointError(f"`checkpoint_dir` {directory} is in use by another bootstrap "
                              "(its lock is held); wait for it or choose another directory") \
            from None
    return f


def _rows(arrays: dict[str, np.ndarray]) -> int:
    return min((a.shape[0] for a in arrays.values() if a.ndim), default=0)


def _digest(arrays: dict[str, np.ndarray], done: int) -> str:
    """sha256 over `done` (which replicates are filled) and the arrays (names, shapes, dtypes,
    bytes) in name order: a checkpoint edited consistently (its step folder renamed and its
    `done` moved with it) no longer matches, so rows never filled are never taken as results."""
    h = hashlib.sha256()
    h.update(f"done:{int(done)};".encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.shape}:{a.dtype.str};".encode())
        h.update(a.tobytes())
    return h.hexdigest()
