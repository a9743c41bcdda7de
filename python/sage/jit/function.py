"""``@sage.jit``: a kernel function that compiles itself per specialisation
and launches on the GPU (or runs in the interpreter with SAGE_INTERPRET=1).

    @sage.jit
    def add(x, y, out, n, BLOCK: sl.constexpr): ...

    add[(triton_cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    add[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, n, BLOCK=128)
    ptx = add.compile(x, y, out, n, BLOCK=128).ptx      # no launch
    add[grid](x, y, out, n, BLOCK=128, num_warps=8, num_stages=3)  # launch options
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import replace
from typing import Any, Callable, Iterable

from sage.jit.compiler import CompiledKernel, compile_specialization, trace_specialization
from sage.jit.knobs import knobs
from sage.jit.launcher import (check_pointer, current_device, current_stream,
                               global_scratch, grid_dims, pointer_of)
from sage.jit.options import LaunchOptions, pop_launch_options
from sage.jit.specialize import (ArgKey, ArgumentError, Param, arch_for_capability,
                                 kernel_params, pointer_key, scalar_key)


@functools.lru_cache(maxsize=None)
def device_arch(device: int) -> str:
    """The compile target of a CUDA device (sm_90 -> sm_90a)."""
    from sage.compiler.binding import load_binding
    return arch_for_capability(*load_binding().device_capability(device))


class BoundCall:
    """One call's arguments, split and keyed (see :meth:`JITFunction.bind`)."""

    __slots__ = ("values", "constexprs", "keys", "launch_args", "device", "options")

    def __init__(self, values: dict[str, Any], constexprs: dict[str, Any],
                 keys: tuple[ArgKey, ...], launch_args: tuple, device: int | None,
                 options: LaunchOptions):
        self.values, self.constexprs, self.keys = values, constexprs, keys
        self.launch_args, self.device, self.options = launch_args, device, options

    @property
    def num_warps(self) -> int:
        return self.options.num_warps

    @property
    def maxnreg(self) -> int | None:
        return self.options.maxnreg

    @property
    def num_stages(self) -> int:
        return self.options.num_stages


class JITFunction:
    """A kernel function under ``@sage.jit``.

    Args:
        fn: the kernel body, written with ``sage.language``.
        do_not_specialize: runtime parameters (names or positions) whose
            alignment/divisibility is not specialised on.
        strided: pointer parameters that accept non-contiguous tensors.
        name: the kernel's symbol name (default ``fn.__name__``).
    """

    def __init__(self, fn: Callable, *, do_not_specialize: Iterable[str | int] = (),
                 strided: Iterable[str | int] = (), name: str | None = None):
        self.fn = fn
        self.name = name or fn.__name__
        self.params: tuple[Param, ...] = kernel_params(fn, do_not_specialize, strided)
        self.runtime_params = tuple(p for p in self.params if not p.constexpr)
        self._positions = {p.name: p.index for p in self.params}
        self._names = tuple(p.name for p in self.params)
        self._constexpr_names = tuple(p.name for p in self.params if p.constexpr)
        self._kernels: dict[tuple, CompiledKernel] = {}
        functools.update_wrapper(self, fn)

    # -- binding arguments ---------------------------------------------------

    def split(self, args: tuple, kwargs: dict[str, Any]
              ) -> tuple[dict[str, Any], dict[str, Any], LaunchOptions]:
        """(every argument by name, the constexprs, the launch options) of a
        call; defaults fill what is not given.

        Raises:
            ArgumentError: for too many, unknown, repeated or missing arguments.
            ValueError: for a launch option out of range (``num_warps``,
                ``maxnreg``, ``num_stages``).
        """
        options = pop_launch_options(kwargs)
        if len(args) > len(self.params):
            raise ArgumentError(f"{self.name} takes {len(self.params)} arguments, got "
                                f"{len(args)}")
        values = dict(zip(self._names, args))
        if kwargs or len(args) < len(self.params):
            for name, value in kwargs.items():
                if name not in self._positions:
                    raise ArgumentError(f"{self.name} has no parameter {name!r}")
                if name in values:
                    raise ArgumentError(f"{self.name}: argument {name} given twice")
                values[name] = value
            for param in self.params:
                if param.name not in values:
                    if param.default is inspect.Parameter.empty:
                        raise ArgumentError(f"{self.name}: missing argument {param.name}")
                    values[param.name] = param.default
        constexprs = {name: values[name] for name in self._constexpr_names}
        return values, constexprs, options

    def bind(self, args: tuple, kwargs: dict[str, Any], *, check_device: bool = True
             ) -> BoundCall:
        """Splits a call (:meth:`split`), computes the specialisation key of
        each runtime argument and checks it.

        Raises:
            ArgumentError: naming the argument that does not fit.
        """
        values, constexprs, options = self.split(args, kwargs)
        keys, launch_args = [], []
        device = None  # the first pointer's device; every other must match
        for param in self.runtime_params:
            value = values[param.name]
            kind = type(value)
            pointer = None if kind is int or kind is float else pointer_of(value)
            if pointer is None:
                keys.append(scalar_key(param, value))
                launch_args.append(value)
                continue
            if pointer.dtype is None:
                raise ArgumentError(f"{self.name}: argument {param.name} has a dtype "
                                    "sage does not handle (int8, int32, int64, "
                                    "float16, bfloat16, float32)")
            keys.append(pointer_key(param, pointer.dtype, pointer.address))
            launch_args.append(pointer.address)
            if check_device:
                if device is None:
                    device = pointer.device if pointer.device >= 0 else current_device()
                if pointer.device != device or not (pointer.contiguous or param.strided):
                    check_pointer(self.name, param.name, pointer, device, param.strided)
        if check_device and device is None:
            device = current_device()
        return BoundCall(values, constexprs, tuple(keys), tuple(launch_args), device,
                         options)

    # -- compiling -------------------------------------------------------------

    def _compiled(self, call: BoundCall, arch: str) -> CompiledKernel:
        """The kernel of this call's specialisation (a launch without a
        ``tensor_maps`` option follows SAGE_TENSOR_MAPS, which a process may
        switch)."""
        key = (call.keys, tuple(call.constexprs.items()), call.options, arch,
               call.options.tensor_maps or knobs.tensor_maps.get())
        kernel = None if knobs.always_compile.get() else self._kernels.get(key)
        if kernel is None:
            kernel = compile_specialization(self.fn, self.name, self.params, call.keys,
                                            call.constexprs, arch, call.options)
            self._kernels[key] = kernel
        return kernel

    def _launch(self, kernel: CompiledKernel, grid: Any, call: BoundCall, arch: str) -> None:
        """Launches ``kernel``; a launch whose host tensor map would have an
        empty dimension (K = 0, say), which the driver cannot encode, runs
        the specialisation with device-built maps instead (same result)."""
        try:
            launch(kernel, grid, call)
        except ValueError as error:
            from sage.compiler.binding import load_binding
            if not isinstance(error, load_binding().EmptyTensorMapError):
                raise
            device = BoundCall(call.values, call.constexprs, call.keys, call.launch_args,
                               call.device, replace(call.options, tensor_maps="device"))
            launch(self._compiled(device, arch), grid, device)

    def compile(self, *args: Any, arch: str | None = None, **kwargs: Any
                ) -> SpecializedKernel:
        """Compiles the specialisation these arguments select, without a
        launch. ``arch`` defaults to the current device's; pass it (e.g.
        "sm_90a") to compile without a GPU, with numpy arrays standing for
        tensors. The result launches with ``[grid](...)`` but only for
        arguments of this specialisation."""
        call = self.bind(args, dict(kwargs), check_device=arch is None)
        return SpecializedKernel(self, self._compiled(call, arch or device_arch(call.device)))

    def ir(self, *args: Any, arch: str | None = None, **kwargs: Any) -> str:
        """The sage IR of the specialisation these arguments select (traced
        only, not compiled); ``arch`` as in :meth:`compile`."""
        call = self.bind(args, dict(kwargs), check_device=arch is None)
        return trace_specialization(self.fn, self.name, call.keys, call.constexprs,
                                    arch or device_arch(call.device), call.options)

    # -- launching -------------------------------------------------------------

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        """``kernel[grid](*args, num_warps=4, maxnreg=None, num_stages=1, **constexprs)``:
        ``num_stages`` is the stages of every ``sl.range`` loop that passes
        none itself."""
        if type(grid) is tuple and 1 <= len(grid) < 3:  # padded once, not per launch
            grid = grid + (1,) * (3 - len(grid))
        return functools.partial(self.run, grid)

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> None:
        """Launches on ``grid`` (a tuple, or a callable of the arguments by
        name) on the current PyTorch stream of the arguments' device."""
        if knobs.interpret.get():
            self.interpret(grid, *args, **kwargs)
            return
        call = self.bind(args, kwargs)
        arch = device_arch(call.device)
        self._launch(self._compiled(call, arch), grid, call, arch)

    def interpret(self, grid: Any, *args: Any, **kwargs: Any) -> None:
        """Runs the launch on the CPU with :func:`sage.language.interpret`
        (what :meth:`run` does under ``SAGE_INTERPRET=1``): numpy arrays,
        ``sl.Buffer`` or torch tensors, written in place. The launch options
        are checked and ignored: warps, registers and stages never change
        results."""
        from sage.jit.interpret import interpret
        values, constexprs, _ = self.split(args, dict(kwargs))
        interpret(self.fn, self.runtime_params, grid_dims(grid, values), values, constexprs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.name} is a sage kernel: launch it with "
                        f"{self.name}[grid](...)")

    def __repr__(self) -> str:
        return f"<sage.jit kernel {self.name}>"


class SpecializedKernel:
    """One compiled specialisation of a :class:`JITFunction`
    (``kernel.compile(...)``): its products (``.ir``, ``.ptx``, ``.cubin``,
    ``.stages``, ``.info``, ``.key``, ``.origin``) and a launcher that
    rejects arguments of another specialisation instead of recompiling."""

    def __init__(self, function: JITFunction, compiled: CompiledKernel):
        self.function = function
        self.compiled = compiled

    def __getattr__(self, name: str) -> Any:
        return getattr(self.compiled, name)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return functools.partial(self.run, grid)

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> None:
        """Launches after checking the arguments against the specialisation.

        Raises:
            ArgumentError: naming the first argument that differs (a dtype, a
                pointer no longer 16-byte aligned, an integer no longer
                divisible by 16, a constexpr value, a launch option).
        """
        call = self.function.bind(args, kwargs)
        kernel, name = self.compiled, self.function.name
        for param, want, got in zip(self.function.runtime_params, kernel.arg_keys,
                                    call.keys):
            if want != got:
                raise ArgumentError(f"{name}: argument {param.name} does not match the "
                                    f"compiled specialisation: {describe(want)} expected, "
                                    f"got {describe(got)}")
        if call.constexprs != kernel.constexprs or call.options != kernel.options:
            raise ArgumentError(f"{name}: compiled for constexprs {kernel.constexprs}, "
                                f"{kernel.options.describe()}, called with {call.constexprs}, "
                                f"{call.options.describe()}")
        if device_arch(call.device) != kernel.arch:
            raise ArgumentError(f"{name}: compiled for {kernel.arch}, device "
                                f"cuda:{call.device} is {device_arch(call.device)}")
        self.function._launch(kernel, grid, call, kernel.arch)


def describe(key: ArgKey) -> str:
    """An argument key in words (for errors)."""
    if key.kind == "pointer":
        return (f"a {'16-byte aligned ' if key.multiple else ''}pointer to {key.dtype}")
    return f"{'a multiple of 16 ' if key.multiple else ''}{key.kind}"


def launch(kernel: CompiledKernel, grid: Any, call: BoundCall) -> None:
    """Launches a compiled kernel with bound arguments; a kernel with global
    scratch gets its memory (programs x ``info.global_scratch`` bytes) as the
    last argument."""
    dims = grid_dims(grid, call.values)
    if 0 in dims:
        return
    args = call.launch_args
    scratch = kernel.info.global_scratch
    if scratch:
        # Device-built TMA tensor maps need a home in global memory. `owner`
        # lives until the launch is enqueued; the allocator is stream-ordered.
        owner, address = global_scratch(call.device, dims[0] * dims[1] * dims[2] * scratch)
        args += (address,)
    kernel.load(call.device).launch(dims[0], dims[1], dims[2],
                                    current_stream(call.device), args)


def jit(fn: Callable | None = None, *, do_not_specialize: Iterable[str | int] = (),
        strided: Iterable[str | int] = (), name: str | None = None) -> Any:
    """Decorator: ``@sage.jit`` or ``@sage.jit(do_not_specialize=("n",))``.

    Raises:
        ValueError: when ``do_not_specialize``/``strided`` names an unknown or
            constexpr parameter.
    """
    def wrap(function: Callable) -> JITFunction:
        return JITFunction(function, do_not_specialize=do_not_specialize, strided=strided,
                           name=name)
    return wrap(fn) if fn is not None else wrap
