"""SAGE_INTERPRET=1: a ``@sage.jit`` launch runs ``sage.language.interpret``
on the CPU instead of the GPU.

Pointer arguments may be numpy arrays, ``sl.Buffer`` (bf16 as float32) or
torch tensors (any device, any strides): a tensor's memory,
from its first element to its last, is copied to a numpy array (bf16
through float32), the kernel runs, and the array is copied back into the
tensor, so the caller sees its outputs written in place as on the GPU.
"""

from __future__ import annotations

from typing import Any, Callable

from sage.jit.specialize import Param


def _torch_to_host(name: str, tensor: Any) -> tuple[Any, Callable[[], None]]:
    """A numpy view (or ``sl.Buffer`` for bf16) of a tensor's contents and
    the function that writes it back."""
    import sage.language as sl
    import torch

    tensor = tensor.detach()
    if not tensor.is_contiguous():
        # The kernel addresses a strided tensor from its first element through
        # its strides: hand it the memory from there to the last element
        # (torch strides are never negative).
        extent = 1 + sum((size - 1) * stride
                         for size, stride in zip(tensor.shape, tensor.stride()))
        tensor = tensor.as_strided((extent,), (1,))
    bf16 = tensor.dtype == torch.bfloat16
    host = tensor.to("cpu", torch.float32 if bf16 else tensor.dtype).numpy().copy()

    def write_back() -> None:
        tensor.copy_(torch.from_numpy(host).to(tensor.device, tensor.dtype))
    return (sl.Buffer(host, sl.bfloat16) if bf16 else host), write_back


def _is_torch_tensor(value: Any) -> bool:
    return any(base.__module__.startswith("torch") and base.__name__ == "Tensor"
               for base in type(value).__mro__)


def interpret(fn: Callable, runtime_params: tuple[Param, ...], grid: tuple[int, int, int],
              values: dict[str, Any], constexprs: dict[str, Any], num_ctas: int = 1) -> None:
    """Runs ``fn`` in the interpreter with the call's arguments (in clusters
    of ``num_ctas`` programs along grid axis 0)."""
    import sage.language as sl

    args, write_backs = [], []
    for param in runtime_params:
        value = values[param.name]
        if _is_torch_tensor(value):
            value, write_back = _torch_to_host(param.name, value)
            write_backs.append(write_back)
        args.append(value)
    sl.interpret(fn, grid, args, constexprs, num_ctas)
    for write_back in write_backs:
        write_back()
