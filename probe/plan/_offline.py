"""Hub look-ups of `otbench plan` fail fast without a network.

A job whose `[data]` reads Hugging Face datasets makes `plan` load them to
count the questions. With no network, `datasets` and `huggingface_hub` retry
each request for about half a minute before failing. The planner first tries
one TCP connection to the Hub's endpoint (a few seconds at most); when it
fails it sets `HF_HUB_OFFLINE=1` (and `HF_DATASETS_OFFLINE=1`) for this
process, so only the local cache is read and a missing dataset fails at
once, in one line that says why and how to plan without the data.
"""

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

CONNECT_TIMEOUT_S = 3.0
"""How long the one reachability probe may take."""


def hub_sources(data: Mapping[str, Any]) -> bool:
    """Whether a job's [data] reads any source from the Hub."""
    sources = data.get("sources") if isinstance(data.get("sources"), list) else [data]
    return any(isinstance(s, Mapping) and s.get("hub") for s in sources)


def _endpoint() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def _proxy() -> tuple[str, int] | None:
    """The HTTPS proxy the Hub's clients would go through, when one is set."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(name):
            url = urlparse(os.environ[name] if "://" in os.environ[name] else "http://" + os.environ[name])
            if url.hostname:
                return url.hostname, url.port or 8080
    return None


def hub_reachable(timeout: float = CONNECT_TIMEOUT_S) -> bool:
    """One TCP connection to the Hub's endpoint (`HF_ENDPOINT` or the default), or to the HTTPS
    proxy when one is set, within `timeout`."""
    try:
        with socket.create_connection(_proxy() or _endpoint(), timeout=timeout):
            return True
    except OSError:
        return False


def go_offline_if_unreachable(data: Mapping[str, Any]) -> str | None:
    """Set the Hub's offline mode for this process when `data` reads the Hub and no network reaches it.

    Returns what was done (for the refusal's line), or None when nothing was changed (no hub
    source, offline mode already chosen by the user, or the Hub answers)."""
    if not hub_sources(data) or os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0"):
        return None
    if hub_reachable():
        return None
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    # Both libraries read these at import; one already imported is told directly.
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None:
        hub.HF_HUB_OFFLINE = True
    ds = sys.modules.get("datasets.config")
    if ds is not None:
        ds.HF_HUB_OFFLINE = True
        ds.HF_DATASETS_OFFLINE = True
    host, port = _endpoint()
    return f"no network reaches the Hub ({host}:{port}), so only the local cache was read"
