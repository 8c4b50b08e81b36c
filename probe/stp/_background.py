"""One worker thread for the run's writes: the journal's commits and the token tables' encoding.

Both are work that releases the GIL (file I/O; Parquet encoding in C++), so
a thread takes it off the probe driver's path. At most `depth` items are
handed over and not yet done, which bounds the memory they hold. The first
failure is kept and raised in the caller's thread at the next `submit` or at
`drain`; items after it are dropped, not done.
"""

import threading
from collections.abc import Callable
from typing import Any


class BackgroundWorker:
    """`fn(item)` for each submitted item, in order, in a thread of its own (see module docstring)."""

    def __init__(self, fn: Callable[[Any], None], *, depth: int, name: str):
        import queue

        self._fn = fn
        self._todo: queue.Queue = queue.Queue()
        self._room = threading.Semaphore(depth)
        self._failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: Any) -> None:
        """Hand `item` over, waiting while `depth` items are not done; raise an earlier failure."""
        self._room.acquire()
        if self._failed:
            self._room.release()
            raise self._failed[0]
        self._todo.put(item)

    def drain(self) -> None:
        """Wait until every submitted item is done; raise the first failure."""
        self._todo.join()
        if self._failed:
            raise self._failed[0]

    def close(self) -> None:
        """Finish the submitted items and stop the thread (a failure is left to `drain`)."""
        self._todo.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while (item := self._todo.get()) is not None:
            try:
                if not self._failed:
                    self._fn(item)
            except BaseException as e:                  # raised in the caller's thread
                self._failed.append(e)
            finally:
                del item
                self._room.release()
                self._todo.task_done()
        self._todo.task_done()
