"""What a launcher needs to know about a PTX module produced by sage.

The compiler prefixes its PTX with one comment line per kernel::

    // sage.kernel name=quant_matmul threads=128 shared_memory=18448

``threads`` is the block size the kernel was compiled for and
``shared_memory`` the dynamic shared memory (bytes) it must be launched with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(
    r"^// sage\.kernel name=(?P<name>\S+) threads=(?P<threads>\d+) "
    r"shared_memory=(?P<shared>\d+)$")


@dataclass(frozen=True)
class KernelInfo:
    """Launch facts of one kernel in a PTX module."""

    name: str
    threads: int
    shared_memory: int


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
                match["name"], int(match["threads"]), int(match["shared"]))
    if not kernels:
        raise ValueError("not a sage PTX module: no '// sage.kernel' header")
    return kernels
