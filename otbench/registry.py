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

A registry with an entry-point `group` (``otbench.methods``, ``otbench.graders``) also lists
the names that installed distributions declare there (``[project.entry-points."otbench.methods"]
my-method = "my_pkg.mod:MyMethod"``), after its own, read from the distributions' metadata
(`importlib.metadata`) and imported only when chosen, like a registered name. An installed
name is a plug-in: it is checked by the same child-process import as a ``module:object``
target, and where `allowed` is given (a server) it resolves only when the operator listed it
(by its name or its ``module:object`` target). It may not take a built-in name, nor one that
another distribution declares with another target (one line naming both).

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


# The child of `_import_returns`: imports one module (or file) with the parent's `sys.path` and
# says on its last stdout line whether the import returned or what it raised. Run with `-I`: the
# working directory is not on its path while it imports its own few modules.
_CHILD = """
import importlib, importlib.util, json, os, sys
kind, target, nonce = sys.argv[1], sys.argv[2], sys.argv[4]
sys.path[:] = json.loads(sys.argv[3])
try:
    if kind == "file":
        spec = importlib.util.spec_from_file_location("otbench_plugin_check", target)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    else:
        importlib.import_module(target)
    said = {"returned": nonce}
except BaseException as e:
    said = {"raised": type(e).__name__, "message": " ".join(str(e).split())[:300], "nonce": nonce}
sys.stdout.write("\\n" + json.dumps(said) + "\\n")
sys.stdout.flush()
os._exit(0)
"""

_RETURNED: set[tuple[str, str]] = set()    # (kind, target) whose import a child saw return


def _import_returns(kind: str, target: str, shown: str, fail: Callable[[str], Exception]) -> None:
    """Import a plug-in's module first in a child process, and refuse it unless that import
    returned: a plug-in that ends the process at import (`os._exit(0)`, a signal) would end the
    command with no output and the exit status it chose, and one raising any `BaseException`
    subclass would escape as a traceback. Costs one interpreter start per plug-in module; the
    module's import-time code runs twice (here and in the command)."""
    import json
    import os
    import secrets
    import subprocess

    if (kind, target) in _RETURNED:
        return
    nonce = secrets.token_hex(8)
    try:
        p = subprocess.run([sys.executable, "-I", "-c", _CHILD, kind, target, json.dumps(sys.path), nonce],
                           capture_output=True, cwd=os.getcwd(), stdin=subprocess.DEVNULL)
    except OSError as e:
        raise fail(f"cannot start a process to check that importing {shown} returns ({e})") from None
    lines = p.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        said = json.loads(lines[-1]) if lines else {}
    except ValueError:
        said = {}
    said = said if isinstance(said, dict) else {}
    if p.returncode == 0 and said.get("returned") == nonce:
        _RETURNED.add((kind, target))
        return
    if said.get("nonce") == nonce and said.get("raised") in ("ImportError", "ModuleNotFoundError"):
        return                    # a missing module: the import in the command names it
    if said.get("nonce") == nonce and "raised" in said:
        raise fail(f"importing {shown} failed ({said['raised']}: {said.get('message', '')})")
    how = (f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit status {p.returncode}")
    raise fail(f"importing {shown} did not return: the process ended during the import ({how}); "
               f"a plug-in must not end the process when it is imported")


def _file_module(path: str, fail: Callable[[str], Exception]) -> Any:
    """The module of ``path/to/file.py``, imported once per resolved path (keyed by its hash)."""
    file = Path(path)
    if not file.is_file():
        raise fail(f"no such file {path!r}")
    name = "otbench_plugin_" + hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    _import_returns("file", str(file.resolve()), repr(path), fail)
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except KeyboardInterrupt:     # the user's Ctrl-C (the child saw the import return)
        del sys.modules[name]
        raise
    except BaseException as e:  # noqa: BLE001 -- any failure of the plug-in's import is reported;
        # a `sys.exit` or another BaseException in it too, which would end the run with no result
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
      group: the entry-point group whose installed names it also lists (module docstring).
    """

    def __init__(self, what: str, entries: Mapping[str, str], *,
                 error: type[Exception] = RegistryError, plugins: bool = True,
                 unknown: Callable[["Registry", str], str] | None = None,
                 group: str | None = None):
        self.what = what
        self._entries: dict[str, str] = dict(entries)
        self.error = error
        self.plugins = plugins
        self._unknown = unknown
        self.group = group
        self._installed: dict[str, str] | None = None      # read on first use

    # -- the table ---------------------------------------------------------------------
    def installed(self) -> dict[str, str]:
        """Name -> target of every entry point in `group` (read once; empty without a group)."""
        if self._installed is None:
            self._installed = self._read_group()
        return self._installed

    def _read_group(self) -> dict[str, str]:
        from importlib.metadata import entry_points

        found: dict[str, tuple[str, str]] = {}
        for ep in entry_points(group=self.group) if self.group else ():
            dist = getattr(getattr(ep, "dist", None), "name", None) or "an installed distribution"
            where = f"{dist}'s entry point {ep.name!r} in {self.group!r}"
            if not ep.name or ":" in ep.name or ep.name in self._entries:
                raise self.error(f"{where}: an installed {self.what} needs a name of its own "
                                 f"(not empty, no ':', not a built-in: {', '.join(self._entries)})")
            if ep.name in found and found[ep.name][0] != ep.value:
                raise self.error(f"{where} names {ep.value!r}, but {found[ep.name][1]} declares "
                                 f"the same name as {found[ep.name][0]!r}")
            try:
                self._split(ep.value, ep.value)
            except self.error as e:
                raise self.error(f"{where}: {e}") from None
            found[ep.name] = (ep.value, dist)
        return {name: value for name, (value, _) in sorted(found.items())}

    def _table(self, name: object) -> str | None:
        try:
            if name in self._entries:
                return self._entries[name]
        except TypeError:           # an unhashable value (a TOML list, say) names nothing
            return None
        return self.installed().get(name) if isinstance(name, str) else None

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order, then the installed ones by name."""
        return tuple(self._entries) + tuple(n for n in self.installed() if n not in self._entries)

    def __contains__(self, name: object) -> bool:
        return self._table(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def target(self, name: str) -> str:
        """The ``module:object`` target registered (or installed) under `name`."""
        target = self._table(name)
        if target is None:
            raise self.error(self._unknown_message(name))
        return target

    def __getitem__(self, name: str) -> str:
        target = self._table(name)
        if target is None:
            raise KeyError(name)
        return target

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

        `allowed`: where given, plug-in targets and installed names must be listed there (a
        server loads only what its operator allowed); registered names always resolve.
        """
        w = self.what
        if spec in self._entries:
            target = self._entries[spec]
        elif isinstance(spec, str) and spec in self.installed():
            target = self.installed()[spec]
            if allowed is not None and spec not in allowed and target not in allowed:
                raise self.error(f"{w} {spec!r} (installed, {target!r}) is not allowed here (the "
                                 f"operator lists the plug-ins it may load)")
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
            if mod_name not in sys.modules and spec not in self._entries:
                _import_returns("module", mod_name, f"module {mod_name!r}", fail)
            try:
                mod = importlib.import_module(mod_name)
            except ImportError as e:
                raise self.error(f"{w} {spec!r}: cannot import module {mod_name!r} ({e})") from None
            except KeyboardInterrupt:     # the user's Ctrl-C (the child saw the import return)
                raise
            except BaseException as e:  # noqa: BLE001 -- the module's own code failed, with any
                # exception class (a BaseException subclass would otherwise be a traceback)
                raise self.error(f"{w} {spec!r}: importing module {mod_name!r} failed "
                                 f"({type(e).__name__}: {e})") from None
        obj: Any = mod
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise self.error(f"{w} {spec!r}: module {mod_name!r} has no object {attr!r}")
            obj = getattr(obj, part)
        return obj


__all__ = ["Registry", "RegistryError"]
