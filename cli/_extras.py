"""A command whose optional extra is not installed says which, in one line, exit 2.

The wheel alone runs the analysis; probing a model needs the `probe` extra and one vLLM build
for the platform (docs/getting-started.md). Without them, `otbench demo` and `otbench probe
run` used to stop in a traceback at the first import deep inside the run. Two guards:

* `require_probe(command, engine)` before any work, for the engines that run a model here
  (every `EngineSpec` that is not `served`: `vllm`, `transformers`): the extra's core modules,
  and the engine's own (`EngineSpec.modules`: vLLM for `vllm`), are looked up without importing
  them (`importlib.util.find_spec`);
* `extra_errors(command)` around the work: an `ImportError` of a module of an optional
  dependency that is not installed (the name Python records on the error, looked up again)
  becomes the same one line; any other import error, an installed package that fails to
  import included, is a bug and keeps its traceback.
"""

import importlib.util
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from otbench.descriptors import ENGINE_SPECS

from ._common import DataError

PROBE_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "gguf", "accelerate", "numba",
                 "math_verify", "champ_dataset", "ray")
"""The import names of the `probe` extra's packages (pyproject.toml, `probe = [...]`)."""
ENGINE_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "math_verify")
"""What every engine that runs a model in this process imports (checked before the run)."""
INSTALL_PROBE = ('pip install "otbench[probe]" and one vLLM build for the platform '
                 '(docs/getting-started.md, "Install with pip")')
OTHER = {"datasets": 'pip install datasets (Hugging Face datasets sources)'}
"""Optional packages outside the probe extra, each with how to install it."""


def missing(modules: Iterable[str]) -> list[str]:
    """The modules of `modules` that cannot be imported here (looked up, not imported)."""
    out = []
    for m in modules:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):        # a broken parent, or a module without a spec
            found = False
        if not found:
            out.append(m)
    return out


def probe_line(command: str, modules: Iterable[str]) -> str:
    """The one line for a probe extra that is not (fully) installed."""
    return (f"otbench {command} needs the probe extra, which is not installed here (no module "
            f"{', '.join(modules)}): {INSTALL_PROBE}")


def require_probe(command: str, engine: str | None, *, alternative: str = "") -> None:
    """Refuse, in one line, a command that runs a model with `engine` here without its packages.

    `alternative`: what else the user can pass (e.g. "or --engine transformers")."""
    spec = ENGINE_SPECS[engine] if isinstance(engine, str) and engine in ENGINE_SPECS else None
    if spec is None or spec.served:
        return                                   # a served model: the server runs it
    gone = missing(ENGINE_MODULES)
    if gone:
        raise DataError(probe_line(command, gone))
    if spec.modules and missing(spec.modules):     # its own library (vLLM), with its install hint
        raise DataError(f"otbench {command}: the {spec.kind} engine: {spec.install}"
                        + (f"; {alternative}" if alternative else ""))


@contextmanager
def extra_errors(command: str) -> Iterator[None]:
    """The work of `command`: an optional dependency's missing import becomes one line, exit 2."""
    try:
        yield
    except ImportError as e:
        top = (e.name or "").split(".")[0]
        if not top or not missing([top]):    # installed but broken: a bug to see, traceback and all
            raise
        if top in PROBE_MODULES:
            raise DataError(probe_line(command, [top])) from None
        owner = next((s for s in ENGINE_SPECS.declared() if top in s.modules), None)
        if owner is not None:              # an engine's own library (vLLM)
            raise DataError(f"otbench {command}: the {owner.kind} engine: {owner.install}") from None
        if top in OTHER:
            raise DataError(f"otbench {command} needs the {top} package, which is not installed here: "
                            f"{OTHER[top]}") from None
        raise
