"""The JAX core every analysis subpackage shares: JAX configuration, shape types, random streams.

Importing this package is what switches JAX to x64 (`_config`); every
JAX-using subpackage of `otbench.analysis` imports it first.
"""

from ._config import use_cpu_only
from ._random import GAMMA, mix64, numbers, pick, words
from ._typing import Array, Bool, Float, Float64, Int, Int32, Int64, UInt64

__all__ = [
    "GAMMA", "mix64", "numbers", "pick", "words", "use_cpu_only",
    "Array", "Bool", "Float", "Float64", "Int", "Int32", "Int64", "UInt64",
]
