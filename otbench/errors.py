"""The one error base of otbench (the `jax/_src/errors.py` habit).

Every error otbench raises on purpose derives from `OtbenchError`, so a
caller (the CLI among them) catches one class to tell a refused input or a
refused output from a bug. `str()` of every such error is one line: the
message rule of the whole project is "name the file, row and rule on one
line", and a line break inside a message would break that rule for every
caller that prints it.

Subclasses keep the built-in class that describes them (`ValueError` for bad
values, `FileExistsError` for a refused output, ...), so code that caught the
built-in class before still catches them. This module imports nothing, so
any module of otbench may import it without an import circle.
"""


class OtbenchError(Exception):
    """Base of otbench's own errors; `str()` is the message folded onto one line."""

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


class MeasurementSetError(OtbenchError, ValueError):
    """Invalid data or document; `str()` is one line naming the place and the rule.

    The measurement contract's error, and the error of every document reader
    (`otbench.files.read_json`), which is why it lives in this leaf module.
    """

    def __init__(self, where: str, rule: str):
        self.where = where
        self.rule = rule
        super().__init__(f"{where}: {rule}")


class UnsafeOutputError(OtbenchError, FileExistsError):
    """An output that would replace an input or something otbench did not write."""


class ArgumentError(OtbenchError, ValueError):
    """An argument that breaks its rule; the message names the argument and the rule
    ("`replicates` must be a positive integer, got 0").

    What every library validator raises for a caller's bad value, so the CLI (and any caller)
    tells a refused input from a bug by one class; a bare `ValueError` raised in library code
    is a bug and says so in a comment.
    """


class ResourceLimitError(OtbenchError, ValueError):
    """Arguments whose estimated memory or time exceeds what this machine allows
    (`otbench.resources.check_budget`)."""


__all__ = ["ArgumentError", "MeasurementSetError", "OtbenchError", "ResourceLimitError", "UnsafeOutputError"]
