"""From Python arguments to a kernel launch: tensors, devices, streams, grids,
global scratch.

Pointer arguments are torch tensors (when torch is importable), objects with
``__cuda_array_interface__`` (CuPy, Numba, ...) or objects with
``data_ptr()`` and a ``dtype``. Every one is checked: on a CUDA device, all on
the same device, of a dtype sage knows, contiguous unless the parameter is
declared ``strided``. Launches go to the current PyTorch stream of the device
(the default stream without torch).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, NamedTuple

from sage.jit.specialize import ArgumentError

#: torch dtype names and CUDA-array-interface type strings -> sage dtypes.
_DTYPE_NAMES = {
    "int8": "int8", "int32": "int32", "int64": "int64", "float16": "float16",
    "bfloat16": "bfloat16", "float32": "float32", "half": "float16", "float": "float32",
}
_TYPESTRS = {"|i1": "int8", "<i4": "int32", "<i8": "int64", "<f2": "float16",
             "<f4": "float32"}
#: The element size (bytes) of each CUDA-array-interface type string.
_TYPESTR_BYTES = {typestr: int(typestr[2:]) for typestr in _TYPESTRS}


class Pointer(NamedTuple):
    """A pointer argument as the launcher sees it. ``device`` is the CUDA
    device ordinal, -1 for host memory."""

    dtype: str | None
    address: int
    device: int
    contiguous: bool


_DTYPE_CACHE: dict[Any, str | None] = {}


def _dtype_name(dtype: Any) -> str | None:
    """sage's name of a torch/numpy dtype object (memoised: launches call it)."""
    try:
        return _DTYPE_CACHE[dtype]
    except KeyError:
        name = _DTYPE_NAMES.get(str(dtype).rsplit(".", 1)[-1])
        _DTYPE_CACHE[dtype] = name
        return name
    except TypeError:  # unhashable
        return _DTYPE_NAMES.get(str(dtype).rsplit(".", 1)[-1])


def _torch_pointer(value: Any) -> Pointer:
    return Pointer(_dtype_name(value.dtype), value.data_ptr(), value.get_device(),
                   value.is_contiguous())


def _pointer_device(address: int) -> int:
    from sage.compiler.binding import load_binding
    return load_binding().pointer_device(address)


def _array_interface_pointer(value: Any) -> Pointer:
    interface = value.__cuda_array_interface__
    address = interface["data"][0]
    shape, strides = interface["shape"], interface.get("strides")
    dtype = _TYPESTRS.get(interface["typestr"])
    contiguous = strides is None
    if strides is not None and dtype is not None:
        expected, step = [], _TYPESTR_BYTES[interface["typestr"]]
        for extent in reversed(shape):
            expected.append(step)
            step *= extent
        contiguous = tuple(strides) == tuple(reversed(expected))
    return Pointer(dtype, address, _pointer_device(address), contiguous)


def _data_ptr_pointer(value: Any) -> Pointer:
    address = value.data_ptr()
    contiguous = getattr(value, "is_contiguous", lambda: True)()
    return Pointer(_dtype_name(getattr(value, "dtype", None)), address,
                   _pointer_device(address), contiguous)


def _host_array_pointer(value: Any) -> Pointer:
    """A numpy array (host memory: fine for compile(arch=...) and the
    interpreter, rejected for a launch)."""
    interface = value.__array_interface__
    return Pointer(_TYPESTRS.get(interface["typestr"]), interface["data"][0], -1,
                   bool(value.flags.c_contiguous))


def _buffer_pointer(value: Any) -> Pointer:
    """A ``sage.language.Buffer`` (a numpy array holding, e.g., bf16 values)."""
    pointer = _host_array_pointer(value.array)
    return pointer._replace(dtype=value.dtype.name)


_HANDLERS: dict[type, Callable[[Any], Pointer] | None] = {}


def pointer_of(value: Any) -> Pointer | None:
    """The pointer an argument stands for, or None for a non-tensor."""
    kind = type(value)
    handler = _HANDLERS.get(kind, ...)
    if handler is ...:
        if any(base.__module__.startswith("torch") and base.__name__ == "Tensor"
               for base in kind.__mro__):
            handler = _torch_pointer
        elif hasattr(kind, "__cuda_array_interface__"):
            handler = _array_interface_pointer
        elif hasattr(kind, "__array_interface__") and hasattr(kind, "flags"):
            handler = _host_array_pointer
        elif kind.__name__ == "Buffer" and kind.__module__.startswith("sage.language"):
            handler = _buffer_pointer
        elif hasattr(kind, "data_ptr"):
            handler = _data_ptr_pointer
        else:
            handler = None
        _HANDLERS[kind] = handler
    return handler(value) if handler else None


def check_pointer(kernel: str, name: str, pointer: Pointer, device: int,
                  strided: bool) -> None:
    """Raises :class:`ArgumentError` naming the argument when the pointer is
    on the host, on another device than ``device``, of an unknown dtype, or
    non-contiguous (unless ``strided``)."""
    where = f"{kernel}: argument {name}"
    if pointer.device < 0:
        raise ArgumentError(f"{where} is not in CUDA device memory (a CPU tensor?); "
                            "move it to the GPU or run with SAGE_INTERPRET=1")
    if pointer.device != device:
        raise ArgumentError(f"{where} is on cuda:{pointer.device}, other arguments "
                            f"on cuda:{device}")
    if pointer.dtype is None:
        raise ArgumentError(f"{where} has a dtype sage does not handle (it knows "
                            "int8, int32, int64, float16, bfloat16, float32)")
    if not pointer.contiguous and not strided:
        raise ArgumentError(f"{where} is not contiguous; pass .contiguous() or "
                            "declare the parameter strided (sage.jit(strided=...))")


def current_device() -> int:
    """PyTorch's current CUDA device, else 0 (also when torch sees no GPU)."""
    torch = sys.modules.get("torch")
    return torch.cuda.current_device() \
        if torch is not None and torch.cuda.is_available() else 0


def _raw_stream_function() -> Callable[[int], int]:
    torch = sys.modules.get("torch")
    if torch is None:
        return lambda device: 0
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


def current_stream(device: int) -> int:
    """The current PyTorch stream of ``device`` as an integer handle (0, the
    legacy default stream, without torch)."""
    return _raw_stream_function()(device)


#: The alignment (bytes) the global scratch must have: each program's part
#: starts at a multiple of 128 bytes, and a TMA tensor map needs 64.
SCRATCH_ALIGNMENT = 128


def global_scratch(device: int, nbytes: int) -> tuple[Any, int]:
    """(owner, address) of ``nbytes`` of uninitialised memory on ``device``
    for a kernel's global scratch (see :mod:`sage.runtime.ptx`). The caller
    keeps ``owner`` alive until the launch is enqueued; dropping it after is
    safe because torch's caching allocator (and CuPy's pool) is
    stream-ordered: the memory is only handed out again to work queued after
    the kernel on the same stream.

    Raises:
        RuntimeError: when neither torch nor CuPy is imported (the binding
            allocates no memory of its own).
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        owner = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", device))
        address = owner.data_ptr()
    else:
        cupy = sys.modules.get("cupy")
        if cupy is None:
            raise RuntimeError("this kernel needs global scratch memory (TMA tensor "
                               "maps), which sage allocates with torch or CuPy: "
                               "import one of them")
        with cupy.cuda.Device(device):
            owner = cupy.empty(nbytes, dtype=cupy.uint8)
        address = owner.data.ptr
    if address % SCRATCH_ALIGNMENT:
        raise RuntimeError(f"global scratch at {address:#x} is not "
                           f"{SCRATCH_ALIGNMENT}-byte aligned")
    return owner, address


def grid_dims(grid: Any, meta: dict[str, Any]) -> tuple[int, int, int]:
    """A launch grid from a tuple of 1-3 ints or a callable of the
    arguments (``grid=lambda meta: (triton_cdiv(meta["n"], meta["BLOCK"]),)``).

    Raises:
        ValueError: for an empty, too long or non-positive grid.
    """
    if type(grid) is tuple and len(grid) == 3:
        if type(grid[0]) is int and type(grid[1]) is int and type(grid[2]) is int \
                and min(grid) >= 0:
            return grid
    if callable(grid):
        grid = grid(meta)
    if isinstance(grid, int):
        grid = (grid,)
    dims = tuple(int(d) for d in grid)
    if not 1 <= len(dims) <= 3 or min(dims) < 0:
        raise ValueError(f"a grid is 1 to 3 non-negative sizes, got {grid!r}")
    return dims + (1,) * (3 - len(dims))
