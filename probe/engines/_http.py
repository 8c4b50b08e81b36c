"""A small HTTP client for OpenAI-compatible servers: keep-alive, bounded retries, one-line errors.

Standard library only (`http.client`), one keep-alive connection per
thread. Retries use exponential backoff (honouring `Retry-After`) on 408,
429, 5xx, refused or dropped connections and timeouts, for up to a bounded
time; other 4xx answers are never retried. A retry is the same request.
"""

import contextlib
import http.client
import json
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from otbench.errors import OtbenchError

from ._interface import (
    EngineStartError,
)

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
MAX_BODY = 256 << 20
"""The largest answer read (bytes): a generation of P samples x 32k tokens with log-probabilities
is ~10 MB; a 3 GB body is refused when it passes this, not held in memory."""


class _TooLarge(OtbenchError, RuntimeError):
    """An answer over `MAX_BODY` (internal: `Client._once` turns it into `ServerError`)."""


def _read_capped(r: http.client.HTTPResponse, cap: int) -> bytes:
    """The body of `r`, refused past `cap` bytes (by its Content-Length, or as it arrives)."""
    n = r.getheader("Content-Length")
    if n is not None and n.strip().isascii() and n.strip().isdigit() and int(n) > cap:
        raise _TooLarge(f"the answer is {int(n)} bytes, more than the {cap >> 20} MiB an answer "
                        "may be")
    parts, size = [], 0
    while True:
        chunk = r.read1(1 << 16)
        if not chunk:
            r.close()                   # done with it (read1 leaves a fully read answer open)
            return b"".join(parts)
        size += len(chunk)
        if size > cap:
            raise _TooLarge(f"the answer passed the {cap >> 20} MiB an answer may be")
        parts.append(chunk)


class ServerError(OtbenchError, RuntimeError):
    """A served-model request failed for good (a client error, or retries exhausted); one line."""


class _Retryable(OtbenchError, RuntimeError):
    """An attempt that may succeed when repeated (internal: `Client.request` turns it into `ServerError`)."""

    def __init__(self, why: str, after: float | None = None):
        super().__init__(why)
        self.after = after


def backoff_delays(base: float, cap: float) -> Callable[[int], float]:
    """Delay before retry `i` (0-based): `base * 2**i`, at most `cap` seconds."""
    return lambda i: min(cap, base * (2.0 ** min(i, 30)))


DEFAULT_BACKOFF = backoff_delays(0.5, 15.0)
"""0.5, 1, 2, 4, 8, 15, 15, ... seconds (a server's Retry-After wins)."""


class Client:
    """JSON over HTTP/1.1 to one server, one keep-alive connection per thread, with retries.

    Args:
      base_url: "http://HOST:PORT" (a path prefix is kept; "/v1" at its end is dropped,
        so both the server root and its OpenAI base work).
      api_key: sent as `Authorization: Bearer KEY` (None: no header).
      timeout_s: per attempt (connect + response).
      retry_s: total time retries of one request may take before it fails.
      backoff: `backoff_delays(...)` (None: `DEFAULT_BACKOFF`); `sleep`: injectable for tests.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 retry_s: float = 300.0, backoff=None, sleep=None):
        if not isinstance(base_url, str) or not _printable(base_url) or " " in base_url:
            raise EngineStartError("engine.base_url holds a space, a control character (CR/LF?) "
                                   f"or a non-ASCII character: {base_url!r}")
        if api_key is not None and not _printable(api_key):
            # never shown: a header with CR/LF would be refused by http.client with the key in it
            raise EngineStartError("the API key holds a control character (CR/LF?) or a non-ASCII "
                                   "character; refused (the key is not shown)")
        try:
            u = urllib.parse.urlsplit(base_url)
            u.port
        except ValueError as e:
            raise EngineStartError(f"engine.base_url {base_url!r}: {e}") from None
        if u.scheme not in ("http", "https") or not u.hostname:
            raise EngineStartError(f"engine.base_url must be http://HOST:PORT or https://HOST:PORT, "
                                   f"got {base_url!r}")
        self.base_url = base_url
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname, u.port
        self._prefix = re.sub(r"/v1/?$", "", u.path.rstrip("/"))
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s, self.retry_s = float(timeout_s), float(retry_s)
        self.max_body = MAX_BODY
        self._closed = threading.Event()
        # a closed client stops waiting at once: its pool's threads never outlive a failed run by retry_s
        self._backoff, self._sleep = backoff or DEFAULT_BACKOFF, sleep or self._closed.wait
        self._local = threading.local()
        self.retries = 0            # attempts that were retried (all threads; for run reports)
        self._lock = threading.Lock()

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = self._local.conn = cls(self._host, self._port, timeout=self.timeout_s)
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        self._local.conn = None
        if c is not None:
            c.close()

    def _once(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes, Any]:
        # One deadline for the whole attempt (connect, headers, body): a server that drips a
        # byte a second, or sends an endless chunked body, is cut off at timeout_s, not per read.
        expired = threading.Event()
        c = self._conn()

        def cut() -> None:
            expired.set()
            with contextlib.suppress(OSError, AttributeError):
                c.sock.shutdown(socket.SHUT_RDWR)
        timer = threading.Timer(self.timeout_s, cut)
        timer.daemon = True
        timer.start()
        try:
            c.request(method, self._prefix + path, body=body, headers=self._headers)
            r = c.getresponse()
            data = _read_capped(r, self.max_body)
            if expired.is_set():            # cut at the deadline: what was read is not the answer
                raise TimeoutError("deadline")
        except _TooLarge as e:
            self._drop()
            raise ServerError(f"{self.base_url}{path}: {e}") from None
        except (ConnectionError, TimeoutError, http.client.HTTPException, OSError, ValueError) as e:
            self._drop()
            if expired.is_set():
                raise _Retryable(f"no complete answer within engine.request_timeout_s = "
                                 f"{self.timeout_s:g} s") from None
            raise _Retryable(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None
        finally:
            timer.cancel()
        if r.getheader("Connection", "").lower() == "close":
            self._drop()
        return r.status, data, r.getheader("Retry-After")

    def request(self, method: str, path: str, payload: Any = None, *, retry: bool = True) -> Any:
        """The decoded JSON answer of `method path` (retrying what `RETRY_STATUS` and network errors allow)."""
        body = None if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        t0, attempt = time.monotonic(), 0
        while True:
            try:
                status, data, after = self._once(method, path, body)
                if status in RETRY_STATUS:
                    raise _Retryable(f"HTTP {status}: {_detail(data)}", _retry_after(after))
            except _Retryable as e:
                waited = time.monotonic() - t0
                delay = e.after if e.after is not None else self._backoff(attempt)
                if self._closed.is_set():
                    raise ServerError(f"{self.base_url}{path}: {e} (the client was closed)") from None
                if not retry or waited + delay > self.retry_s:
                    raise ServerError(f"{self.base_url}{path}: {e} (gave up after {attempt + 1} "
                                      f"attempts over {waited:.1f} s; engine.retry_s = {self.retry_s:g})"
                                      ) from None
                with self._lock:
                    self.retries += 1
                self._sleep(delay)
                attempt += 1
                continue
            if 300 <= status < 400:
                # never followed: a redirect would send the request (and its key) elsewhere
                raise HTTPStatusError(status, f"{self.base_url}{path}: HTTP {status} (a redirect); "
                                              "redirects are refused: engine.base_url must name "
                                              "the server itself")
            if status >= 400:
                raise HTTPStatusError(status, f"{self.base_url}{path}: HTTP {status}: {_detail(data)}")
            if status != 200:
                raise ServerError(f"{self.base_url}{path}: HTTP {status}, not 200")
            try:
                return json.loads(data)
            except (ValueError, RecursionError):
                raise ServerError(f"{self.base_url}{path}: the answer is not JSON (or nests too "
                                  f"deeply) ({data[:80]!r})") from None

    def close(self) -> None:
        """Stop retrying (requests waiting to retry fail now) and drop this thread's connection."""
        self._closed.set()
        self._drop()


class HTTPStatusError(ServerError):
    """A client-error answer (4xx other than 408/429): the request itself is refused; never retried."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _printable(text: str) -> bool:
    """Printable ASCII only: what an HTTP header or request line may carry."""
    return all(" " <= c <= "~" for c in text)


def _retry_after(v: str | None) -> float | None:
    try:
        return max(0.0, float(v)) if v is not None else None
    except ValueError:
        return None


def _detail(data: bytes) -> str:
    """The server's error message, on one line and short."""
    try:
        d = json.loads(data)
        msg = d.get("error", d) if isinstance(d, dict) else d
        msg = msg.get("message", msg) if isinstance(msg, dict) else msg
        text = str(msg)
    except ValueError:
        text = data.decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")


