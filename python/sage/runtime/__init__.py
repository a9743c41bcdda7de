"""Running compiled sage kernels (the launcher proper arrives with the JIT)."""

from sage.runtime.ptx import KernelInfo, parse_kernel_header

__all__ = ["KernelInfo", "parse_kernel_header"]
