"""The sage kernel language: write one program instance as a Python function.

``import sage.language as sl``; see docs/language.md. A kernel is traced to
sage IR with :func:`trace` or run on the CPU with :func:`interpret`.
"""

from sage.language.core import (ArgSpec, DType, Int8Scheme, PointerType, TileType, bfloat16,
                                constexpr, float16, float32, int1, int8, int8_per_block,
                                int8_per_channel, int8_per_token, int32, int64, pointer_type,
                                uint8, uint8_per_block, uint8_per_channel, uint8_per_token)
from sage.language.diagnostics import CompilationError
from sage.language.elementwise import (abs, bitcast, cast, exp, exp2, floor, fma, log, log2,
                                       maximum, minimum, sqrt, where)
from sage.language.interpreter import Buffer, interpret
from sage.language.loops import range
from sage.language.ops import (absmax, addptr, broadcast, cluster_barrier, counter_add,
                               counter_wait, dequantize, full,
                               grid_dependency_wait, iota, launch_dependents, load,
                               matmul, max, min, num_programs, program_id, qmatmul, quantize,
                               reduce, smooth, softmax_update, splat, store, sum, zeros)
from sage.language.tracer import trace
from sage.language.values import Value

__all__ = [
    "ArgSpec", "Buffer", "CompilationError", "DType", "Int8Scheme", "PointerType",
    "TileType", "Value", "abs", "absmax", "addptr", "bfloat16", "bitcast", "broadcast", "cast",
    "cluster_barrier",
    "constexpr", "counter_add", "counter_wait", "dequantize", "exp", "exp2", "float16", "floor",
    "fma", "float32", "full",
    "grid_dependency_wait", "int1", "int8",
    "int8_per_block", "int8_per_channel", "int8_per_token", "int32", "int64", "interpret",
    "iota", "launch_dependents", "load", "log", "log2", "matmul", "max", "maximum", "min",
    "minimum",
    "num_programs", "pointer_type", "program_id", "qmatmul", "quantize", "range", "reduce",
    "smooth", "softmax_update", "splat", "sqrt", "store", "sum", "trace", "uint8",
    "uint8_per_block", "uint8_per_channel", "uint8_per_token", "where", "zeros",
]
