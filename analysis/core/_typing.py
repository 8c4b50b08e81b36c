"""Shape-annotated array types for the kernels (STYLE.md "one shape vocabulary").

jaxtyping is a core dependency; annotations are checked at run time only when
the tests run with jaxtyping's import hook.
"""

from jaxtyping import Array, Bool, Float, Float64, Int, Int32, Int64, UInt64

__all__ = ["Array", "Bool", "Float", "Float64", "Int", "Int32", "Int64", "UInt64"]
