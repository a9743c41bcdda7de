"""``sl.trace``: a kernel function and its specialisation to a sage IR module."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from sage.language.builder import IRBuilder
from sage.language.core import ArgSpec
from sage.language.diagnostics import error
from sage.language.kernel import (check_arity, constexpr_values, definition,
                                  kernel_signature, run_kernel)
from sage.language.loops import is_num_stages, launch_num_stages
from sage.language.values import Value, using_backend

TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
ALIGNMENT_ATTR = "sage.alignment"
DIVISIBILITY_ATTR = "sage.divisibility"


#: The range of ``maxnreg`` (PTX ``.maxnreg``; the dialect's ``sage.maxnreg``).
MAXNREG_RANGE = (24, 255)


def check_maxnreg(maxnreg: int | None) -> None:
    """Raises ValueError unless ``maxnreg`` is None or an int in :data:`MAXNREG_RANGE`."""
    low, high = MAXNREG_RANGE
    if maxnreg is not None and (type(maxnreg) is not int or not low <= maxnreg <= high):
        raise ValueError(f"maxnreg must be None or an integer from {low} to {high}, "
                         f"got {maxnreg!r}")


def check_num_warps(num_warps: int) -> None:
    """Raises ValueError unless ``num_warps`` is 1, 2, 4, 8 or 16 (an int:
    4.0 == 4, but would be written into the IR as a float)."""
    if (not isinstance(num_warps, int) or isinstance(num_warps, bool)
            or num_warps not in (1, 2, 4, 8, 16)):
        raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16, got {num_warps!r}")


def check_num_stages(num_stages: int) -> None:
    """Raises ValueError unless ``num_stages`` (the launch's default for
    ``sl.range`` loops) is an int >= 1."""
    if not is_num_stages(num_stages):
        raise ValueError(f"num_stages must be an integer >= 1, got {num_stages!r}")


#: Where TMA tensor maps may be built (``sage.tensor_maps``).
TENSOR_MAP_PLACES = ("host", "device")


def check_tensor_maps(tensor_maps: str | None) -> None:
    """Raises ValueError unless ``tensor_maps`` is "host", "device" or None."""
    if tensor_maps is not None and tensor_maps not in TENSOR_MAP_PLACES:
        raise ValueError(f"tensor_maps must be 'host' or 'device', got {tensor_maps!r}")


#: The largest thread-block cluster (the portable one: sage.num_ctas).
MAX_NUM_CTAS = 8


def check_num_ctas(num_ctas: int) -> None:
    """Raises ValueError unless ``num_ctas`` is an int from 1 to :data:`MAX_NUM_CTAS`."""
    if type(num_ctas) is not int or not 1 <= num_ctas <= MAX_NUM_CTAS:
        raise ValueError(f"num_ctas must be an integer from 1 to {MAX_NUM_CTAS}, "
                         f"got {num_ctas!r}")


def check_launch_options(num_warps: int, maxnreg: int | None, num_stages: int,
                         tensor_maps: str | None = None, num_ctas: int = 1) -> None:
    """Raises ValueError naming the first launch option out of range."""
    check_num_warps(num_warps)
    check_maxnreg(maxnreg)
    check_num_stages(num_stages)
    check_tensor_maps(tensor_maps)
    check_num_ctas(num_ctas)


def _symbol(name: str) -> str:
    return f"@{name}" if re.fullmatch(r"[A-Za-z_][\w$.]*", name) else f'@"{name}"'


def _parameter(name: str, spec: ArgSpec) -> str:
    hints = []
    if spec.alignment is not None:
        hints.append(f"{ALIGNMENT_ATTR} = {spec.alignment} : i64")
    if spec.divisibility is not None:
        hints.append(f"{DIVISIBILITY_ATTR} = {spec.divisibility} : i64")
    attrs = f" {{{', '.join(hints)}}}" if hints else ""
    return f"%{name}: {spec.type.mlir}{attrs}"


def trace(fn: Callable, arg_specs: Sequence[ArgSpec], constexprs: Mapping[str, object],
          *, name: str | None = None, arch: str = "sm_90a", num_warps: int = 4,
          maxnreg: int | None = None, num_stages: int = 1,
          tensor_maps: str | None = None, num_ctas: int = 1) -> str:
    """The sage IR module of ``fn`` specialised to ``arg_specs`` and ``constexprs``.

    ``arg_specs`` describe the non-constexpr parameters in order. The text is
    deterministic (same inputs, same bytes) and every op carries the
    location of the kernel line that produced it. ``maxnreg`` caps the
    registers per thread (``sage.maxnreg``: more programs per SM, spills
    where the kernel needs more); None lets ptxas take what it needs.
    ``num_stages`` is the stages of every ``sl.range`` loop that does not
    pass its own (recorded on each loop's ``scf.for``; 1: not pipelined).
    ``tensor_maps`` says where the TMA tensor maps are built: ``"host"``
    (encoded by the launcher where the kernel's arguments determine them;
    None means the same) or ``"device"`` (``sage.tensor_maps``).
    ``num_ctas`` > 1 launches the programs in thread-block clusters of that
    many consecutive programs along grid axis 0 (``sage.num_ctas``; their
    ``sl.cluster_barrier`` waits for one another).

    Raises:
        CompilationError: the kernel is invalid (message starts with file:line).
        ValueError: ``arch``, ``num_warps``, ``maxnreg``, ``num_stages``,
            ``tensor_maps`` or ``num_ctas`` is not supported.
    """
    if arch not in TARGETS:
        raise ValueError(f"arch must be one of {', '.join(TARGETS)}, got {arch!r}")
    check_launch_options(num_warps, maxnreg, num_stages, tensor_maps, num_ctas)
    signature = kernel_signature(fn)
    check_arity(fn, signature, len(arg_specs), "argument specs")
    constants = constexpr_values(fn, signature, constexprs)
    builder = IRBuilder(num_ctas, arch)
    params, arguments = [], []
    for param, spec in zip(signature.runtime, arg_specs):
        if not isinstance(spec, ArgSpec):
            raise error(f"argument '{param}' needs an sl.ArgSpec, got {spec!r}", definition(fn))
        params.append(_parameter(param, spec))
        arguments.append(Value(spec.type, builder.argument(param)))
    with using_backend(builder), launch_num_stages(num_stages):
        run_kernel(fn, signature, arguments, constants)
    body = "".join(f"    {line}\n" for line in builder.body_lines())
    extra = "" if maxnreg is None else f", sage.maxnreg = {maxnreg} : i32"
    if tensor_maps == "device":
        extra += ', sage.tensor_maps = "device"'
    if num_ctas > 1:
        extra += f", sage.num_ctas = {num_ctas} : i32"
    return (f'module attributes {{sage.target = "{arch}", sage.num_warps = {num_warps} : i32'
            f"{extra}}} {{\n"
            f"  func.func {_symbol(name or fn.__name__)}({', '.join(params)}) "
            f"attributes {{sage.kernel}} {{\n"
            f"{body}"
            f"    return\n"
            f"  }} {definition(fn).mlir}\n"
            f"}}\n")

