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
Two optional fields may follow it: ``cluster=C`` (programs per thread-block
cluster along grid axis 0) and ``early_launch=1`` (the kernel waits for the
previous kernel of its stream, ``sl.grid_dependency_wait``, or on counters
that kernel raises, ``sl.counter_wait``, before it reads what that kernel
wrote, so the launcher lets it start while that kernel finishes:
programmatic dependent launch).

A kernel whose TMA tensor maps its arguments determine has them encoded by
the launcher (the compiler's ``sagegpu-host-tensor-maps``), one line each::

    // sage.tensor_map kernel=gemm param=9 address=a0 dims=a7;a5 strides=a7 box=128,128 element_type=0 swizzle=3

The map is parameter ``param`` (128 bytes, after every other argument,
scratch included, in this order); ``dims`` (extents, innermost first) and
``strides`` (bytes, of dimensions 1 and up) are ``;``-separated host
expressions of the kernel's arguments (``aN`` is argument N; the grammar is
the pass's), ``box`` the box's extents, ``element_type`` and ``swizzle``
the CUDA driver's ``CUtensorMapDataType`` and ``CUtensorMapSwizzle``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_HEADER = re.compile(
    r"^// sage\.kernel name=(?P<name>\S+) threads=(?P<threads>\d+) "
    r"shared_memory=(?P<shared>\d+)(?: global_scratch=(?P<scratch>\d+))?"
    r"(?: cluster=(?P<cluster>\d+))?(?: early_launch=(?P<early>[01]))?$")


_MAP = re.compile(
    r"^// sage\.tensor_map kernel=(?P<name>\S+) param=(?P<param>\d+) "
    r"address=(?P<address>\S+) dims=(?P<dims>\S+) strides=(?P<strides>\S+) "
    r"box=(?P<box>[\d,]+) element_type=(?P<element_type>\d+) "
    r"swizzle=(?P<swizzle>\d+)$")


@dataclass(frozen=True)
class HostTensorMap:
    """A TMA tensor map the launcher encodes: kernel parameter ``param``,
    its fields as host expressions of the kernel's arguments."""

    param: int
    address: str
    dims: tuple[str, ...]
    strides: tuple[str, ...]
    box: tuple[int, ...]
    element_type: int
    swizzle: int

    def spec(self) -> tuple:
        """The tuple the native launcher takes (``_sage.Kernel(tensor_maps=...)``)."""
        return (self.param, self.address, list(self.dims), list(self.strides),
                list(self.box), self.element_type, self.swizzle)


@dataclass(frozen=True)
class KernelInfo:
    """Launch facts of one kernel in a PTX module."""

    name: str
    threads: int
    shared_memory: int
    #: Bytes of global scratch per program; > 0 adds a trailing pointer argument.
    global_scratch: int = 0
    #: Tensor maps the launcher encodes, the kernel's last parameters.
    tensor_maps: tuple[HostTensorMap, ...] = ()
    #: Programs per thread-block cluster along grid axis 0 (1: none).
    cluster: int = 1
    #: Whether the kernel may start before the previous kernel of its stream
    #: finishes (programmatic dependent launch): it waits for that kernel
    #: (``sl.grid_dependency_wait``) or on its counters (``sl.counter_wait``)
    #: before it reads what it wrote.
    early_launch: bool = False


def parse_kernel_header(ptx: str) -> dict[str, KernelInfo]:
    """Returns the kernels described at the top of ``ptx``, by name.

    Raises:
        ValueError: if the text carries no ``// sage.kernel`` line.
    """
    kernels: dict[str, KernelInfo] = {}
    maps: dict[str, list[HostTensorMap]] = {}
    for line in ptx.splitlines():
        if not line.startswith("//"):
            break
        match = _HEADER.match(line.strip())
        if match:
            kernels[match["name"]] = KernelInfo(
                match["name"], int(match["threads"]), int(match["shared"]),
                int(match["scratch"] or 0), cluster=int(match["cluster"] or 1),
                early_launch=match["early"] == "1")
        elif line.startswith("// sage.tensor_map"):
            found = _MAP.match(line.strip())
            if not found:
                raise ValueError(f"malformed tensor map line: {line.strip()!r}")
            maps.setdefault(found["name"], []).append(HostTensorMap(
                int(found["param"]), found["address"], tuple(found["dims"].split(";")),
                tuple(found["strides"].split(";")),
                tuple(int(b) for b in found["box"].split(",")),
                int(found["element_type"]), int(found["swizzle"])))
    if not kernels:
        raise ValueError("not a sage PTX module: no '// sage.kernel' header")
    for name, found in maps.items():
        if name not in kernels:
            raise ValueError(f"tensor map of an unknown kernel {name!r}")
        kernels[name] = replace(kernels[name], tensor_maps=tuple(found))
    return kernels
