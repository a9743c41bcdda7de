"""What a launcher needs to know about a PTX module produced by sage.

The compiler prefixes its PTX with one comment line per kernel::

    // sage.kernel name=quant_matmul threads=128 shared_memory=18448 global_scratch=256

``threads`` is the block size the kernel was compiled for and
``shared_memory`` the dynamic shared memory (bytes) it must be launched with.
``global_scratch`` is the global memory (bytes) each program needs: when it
is above 0 the kernel takes one extra, last argument, a pointer to at least
``programs * global_scratch`` bytes (128-byte aligned) that the launcher
allocates. Kernels that build TMA tensor maps on the device keep them there:
a tensor map must live in global memory, not shared memory. The field is
optional (0 when absent), so PTX written before it, such as hand-edited
override files, still parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(
    r"^// sage\.kernel name=(?P<name>\S+) threads=(?P<threads>\d+) "
    r"shared_memory=(?P<shared>\d+)(?: global_scratch=(?P<scratch>\d+))?$")


@dataclass(frozen=True)
class KernelInfo:
    """Launch facts of one kernel in a PTX module."""

    name: str
    threads: int
    shared_memory: int
    #: Bytes of global scratch per program; > 0 adds a trailing pointer argument.
    global_scratch: int = 0


def parse_kernel_header(ptx: str) -> dict[str, KernelInfo]:
    """Returns the kernels described at the top of ``ptx``, by name.

    Raises:
        ValueError: if the text carries no ``// sage.kernel`` line.
    """
    kernels: dict[str, KernelInfo] = {}
    for line in ptx.splitlines():
        if not line.startswith("//"):
            break
        match = _HEADER.match(line.strip())
        if match:
            kernels[match["name"]] = KernelInfo(
                match["name"], int(match["threads"]), int(match["shared"]),
                int(match["scratch"] or 0))
    if not kernels:
        raise ValueError("not a sage PTX module: no '// sage.kernel' header")
    return kernels
