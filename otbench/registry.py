"""One lazy registry for everything otbench loads by name: methods, engines, graders.

lm-evaluation-harness's habit (``lm_eval/api/registry.py``): a name maps to
a ``"module:object"`` target that is imported only when the name is chosen,
so choosing the transformers engine never imports vLLM and listing the
methods imports no method's dependencies. A `Registry` also resolves
plug-ins that are not registered:

* ``"package.module:Object"`` (dotted attributes allowed after the colon);
* ``"path/to/file.py:Object"``, imported from that file (any directory);

and refuses both where the registry allows no plug-ins (a server's
registry lists what its operator allowed: `allowed`). The registry never
changes `sys.path`: a ``"module:object"`` target imports from the path as
the caller set it.

This module imports nothing heavy, so any part of otbench may use it.
"""

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from otbench.errors import OtbenchError


class RegistryError(OtbenchError, ValueError):
    """A name or ``module:object`` target that cannot be resolved (one line saying why)."""


def _file_module(path: str, fail: Callable[[str], Exception]) -> Any:
    """The module of ``path/to/file.py``, imported once per resolved path (keyed by its hash)."""
    file = Path(path)
    if not file.is_file():
        raise fail(f"no such file {path!r}")
    name = "otbench_plugin_" + hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except (Exception, SystemExit) as e:  # noqa: BLE001 -- any failure of the plug-in's import is
        # reported; a `sys.exit` in it too, which would otherwise end the run with no result
        del sys.modules[name]
        raise fail(f"importing {path!r} failed ({type(e).__name__}: {e})") from None
    return mod


class Registry(Mapping):
    """Names -> lazy ``module:object`` targets, plus plug-in resolution (module docstring).

    A read-only `Mapping` of name -> target (``registry["deer"]``), grown only by `register`.

    Args:
      what: the kind, as messages name it (``"method"``, ``"engine"``, ...).
      entries: the built-in names and their targets, in listing order.
      error: the error class raised (a `RegistryError` subclass or any
        `OtbenchError` that takes one message).
      plugins: whether targets that are not registered names resolve.
      unknown: the message for a name that is neither registered nor a
        target (default: "<what> must be one of ... or 'module:object'").
    """

    def __init__(self, what: str, entries: Mapping[str, str], *,
                 error: type[Exception] = RegistryError, plugins: bool = True,
                 unknown: Callable[["Registry", str], str] | None = None):
        self.what = what
        self._entries: dict[str, str] = dict(entries)
        self.error = error
        self.plugins = plugins
        self._unknown = unknown

    # -- the table ---------------------------------------------------------------------
    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._entries
        except TypeError:           # an unhashable value (a TOML list, say) names nothing
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def target(self, name: str) -> str:
        """The ``module:object`` target registered under `name`."""
        if name not in self._entries:
            raise self.error(self._unknown_message(name))
        return self._entries[name]

    def __getitem__(self, name: str) -> str:
        return self._entries[name]

    def register(self, name: str, target: str) -> None:
        """Register `target` (``module:object`` or ``file.py:object``) under `name`.

        One line adds a method, engine or grader; the target is checked for
        form now and imported only when the name is chosen.
        """
        if not isinstance(name, str) or not name or ":" in name:
            raise self.error(f"a {self.what} name must be a non-empty string without ':', got {name!r}")
        self._split(target, target)
        self._entries[name] = target

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    # -- resolution ----------------------------------------------------------------------
    def _unknown_message(self, spec: str) -> str:
        if self._unknown is not None:
            return self._unknown(self, spec)
        return (f"{self.what} must be a built-in name ({', '.join(self._entries)}) or "
                f"'module:object', got {spec!r}")

    def _split(self, spec: str, target: str) -> tuple[str, str]:
        w = self.what
        mod_name, _, attr = target.partition(":")
        if not mod_name or not attr:
            raise self.error(f"{w} must be 'module:object' with both parts, got {spec!r}")
        if not mod_name.endswith(".py") and not all(p.isidentifier() for p in mod_name.split(".")):
            raise self.error(f"{w} {spec!r}: {mod_name!r} is neither a dotted module name "
                             f"(package.module) nor a path to a .py file")
        if not all(p.isidentifier() and not (p.startswith("__") and p.endswith("__"))
                   for p in attr.split(".")):
            raise self.error(f"{w} {spec!r}: the object {attr!r} must be dotted names "
                             f"without dunders (Object or Object.attribute)")
        return mod_name, attr

    def resolve(self, spec: str, *, allowed: tuple[str, ...] | None = None) -> Any:
        """The object a registered name or a plug-in target names (imported now).

        `allowed`: where given, plug-in targets must be listed there (a server
        loads only what its operator allowed); registered names always resolve.
        """
        w = self.what
        if spec in self._entries:
            target = self._entries[spec]
        else:
            if ":" not in spec:
                raise self.error(self._unknown_message(spec))
            if not self.plugins:
                raise self.error(f"{w} {spec!r}: plug-ins are not loaded here "
                                 f"(registered: {', '.join(self._entries)})")
            if allowed is not None and spec not in allowed:
                raise self.error(f"{w} {spec!r} is not allowed here (the operator lists the "
                                 f"plug-ins it may load)")
            target = spec
        mod_name, attr = self._split(spec, target)

        def fail(why: str) -> Exception:
            return self.error(f"{w} {spec!r}: {why}")

        if mod_name.endswith(".py"):
            mod = _file_module(mod_name, fail)
        else:
            try:
                mod = importlib.import_module(mod_name)
            except ImportError as e:
                raise self.error(f"{w} {spec!r}: cannot import module {mod_name!r} ({e})") from None
            except (Exception, SystemExit) as e:  # noqa: BLE001 -- the module's own code failed
                raise self.error(f"{w} {spec!r}: importing module {mod_name!r} failed "
                                 f"({type(e).__name__}: {e})") from None
        obj: Any = mod
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise self.error(f"{w} {spec!r}: module {mod_name!r} has no object {attr!r}")
            obj = getattr(obj, part)
        return obj


__all__ = ["Registry", "RegistryError"]
