"""``@sage.jit``: a kernel function that compiles itself per specialisation
and launches on the GPU (or runs in the interpreter with SAGE_INTERPRET=1).

    @sage.jit
    def add(x, y, out, n, BLOCK: sl.constexpr): ...

    add[(triton_cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    add[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, n, BLOCK=128)
    ptx = add.compile(x, y, out, n, BLOCK=128).ptx      # no launch
    add[grid](x, y, out, n, BLOCK=128, num_warps=8, num_stages=3)  # launch options
    fast = add.launcher(BLOCK=128, num_warps=8)   # constexprs and options fixed once
    fast[grid](x, y, out, n)                      # runtime arguments only

A warm launch does little besides reading its arguments: :class:`Launcher`
keeps the kernel of each *signature* (every runtime argument's type, dtype,
address modulo 16, integer class and divisibility, and the device), so a
launch like an earlier one skips binding, keying and checking; any other
launch takes the full path (:meth:`JITFunction.bind`), which checks it.
"""

from __future__ import annotations

import functools
import inspect
import sys
from dataclasses import replace
from typing import Any, Callable, Iterable

from sage.jit.compiler import CompiledKernel, compile_specialization, trace_specialization
from sage.jit.knobs import knobs
from sage.jit.launcher import (check_pointer, current_device, current_stream,
                               global_scratch, grid_dims, pointer_of)
from sage.jit.options import LaunchOptions, pop_launch_options
from sage.jit.specialize import (_I32_MAX, _I32_MIN, _I64_MAX, _I64_MIN,
                                 SPECIALIZE_MULTIPLE, ArgKey, ArgumentError, Param,
                                 arch_for_capability, kernel_params, pointer_key, scalar_key)


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
        self._runtime_names = tuple(p.name for p in self.runtime_params)
        # run() hands positional arguments to a Launcher only where they are
        # exactly the runtime parameters (the constexprs come after them).
        self._runtime_leading = all(not p.constexpr
                                    for p in self.params[:len(self.runtime_params)])
        self._kernels: dict[tuple, CompiledKernel] = {}
        #: One Launcher per set of keyword arguments (_keywords_memo).
        self._launchers: dict[tuple, Launcher] = {}
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
            if not _empty_tensor_map(error):
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
        return functools.partial(self.run, _padded(grid))

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> None:
        """Launches on ``grid`` (a tuple, or a callable of the arguments by
        name) on the current PyTorch stream of the arguments' device.

        A call that gives the runtime arguments positionally and the rest by
        keyword (the usual form) goes through the :class:`Launcher` of its
        keywords, which keeps its kernel by signature."""
        if len(args) == len(self._runtime_names) and self._runtime_leading:
            launcher = self._launcher_of(kwargs)
            if launcher is not None:
                launcher.run(grid, *args)
                return
        self._run_bound(grid, args, kwargs)

    def _run_bound(self, grid: Any, args: tuple, kwargs: dict[str, Any]
                   ) -> CompiledKernel | None:
        """:meth:`run` by the full path: binds and checks every argument;
        returns the kernel it launched (None when it interpreted)."""
        if knobs.interpret.get():
            self.interpret(grid, *args, **kwargs)
            return None
        call = self.bind(args, kwargs)
        arch = device_arch(call.device)
        kernel = self._compiled(call, arch)
        self._launch(kernel, grid, call, arch)
        return kernel

    def launcher(self, **kwargs: Any) -> Launcher:
        """This kernel with its constexprs and launch options fixed (defaults
        fill those not given): ``launcher[grid](*runtime_args)``. One object
        per set of keywords (values and types), shared with :meth:`run`.

        Raises:
            ArgumentError: for an unknown parameter, a runtime parameter, or a
                missing constexpr.
            ValueError: for a launch option out of range.
        """
        try:
            memo = _keywords_memo(kwargs)
            launcher = self._launchers.get(memo)
        except TypeError:  # an unhashable value: a launcher of its own
            memo = launcher = None
        if launcher is None:
            for name in kwargs:
                if name in self._runtime_names:
                    raise ArgumentError(f"{self.name}: {name} is a runtime argument; a "
                                        "launcher fixes the constexprs and launch "
                                        "options only")
            # split() checks the keywords as a launch would (None stands for
            # each runtime value).
            _, constexprs, options = self.split(
                (), {**dict.fromkeys(self._runtime_names), **kwargs})
            launcher = Launcher(self, dict(kwargs), constexprs, options)
            if memo is not None:
                self._launchers[memo] = launcher
        return launcher

    def _launcher_of(self, kwargs: dict[str, Any]) -> Launcher | None:
        """:meth:`launcher` of run()'s keywords, or None where they make none
        (the full path then raises what is wrong, in its own order)."""
        try:
            return self._launchers[_keywords_memo(kwargs)]
        except TypeError:  # an unhashable value, which the full path reports
            return None
        except KeyError:
            pass
        try:
            return self.launcher(**kwargs)
        except Exception:  # noqa: BLE001 - the full path reports it
            return None

    def interpret(self, grid: Any, *args: Any, **kwargs: Any) -> None:
        """Runs the launch on the CPU with :func:`sage.language.interpret`
        (what :meth:`run` does under ``SAGE_INTERPRET=1``): numpy arrays,
        ``sl.Buffer`` or torch tensors, written in place. The launch options
        are checked; warps, registers and stages never change results, and
        ``num_ctas`` runs the programs in clusters as a launch does."""
        from sage.jit.interpret import interpret
        values, constexprs, options = self.split(args, dict(kwargs))
        interpret(self.fn, self.runtime_params, grid_dims(grid, values), values, constexprs,
                  options.num_ctas)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.name} is a sage kernel: launch it with "
                        f"{self.name}[grid](...)")

    def __repr__(self) -> str:
        return f"<sage.jit kernel {self.name}>"


def _keywords_memo(kwargs: dict[str, Any]) -> tuple:
    """The key of a launch's keywords among launchers: names, values and the
    values' types (True == 1 must not find 1's launcher).

    Raises:
        TypeError: for an unhashable value.
    """
    key = (tuple(kwargs.items()), tuple(map(type, kwargs.values())))
    hash(key)
    return key


#: Signature codes of scalar arguments: i32 or i64 (by value), divisible by 16
#: or not, f32. A tensor's code is its dtype object; its address modulo 16
#: follows the device at the end, unless every address is 16-byte aligned.
_I32, _I32_DIV16, _I64, _I64_DIV16, _FLOAT = range(5)


class Launcher:
    """A :class:`JITFunction` with its constexprs and launch options fixed
    (:meth:`JITFunction.launcher`): ``launcher[grid](*runtime_args)`` takes
    the runtime arguments alone, in the order of the kernel's runtime
    parameters.

    Which kernel a launch runs, and whether its arguments pass the checks,
    is a function of its *signature*: per argument its type, and a torch
    tensor's dtype and address modulo 16, an int's range (i32 or i64) and
    divisibility by 16; the device of the tensors (all on one device,
    contiguous where the parameter is not ``strided``). The first launch of
    a signature takes the full path (:meth:`JITFunction.bind`: keys, checks,
    compilation); once it launched, its kernel is kept by signature, and
    later launches of that signature only read their arguments and launch
    (while SAGE_TENSOR_MAPS, where the options leave it open, is what it
    was then). Any other launch (another argument type, such as a numpy
    array or a tensor subclass; a CPU tensor; tensors on two devices; a
    non-contiguous tensor where one is needed) takes the full path, which
    raises where the arguments are wrong. SAGE_INTERPRET and
    SAGE_ALWAYS_COMPILE are read on every launch.
    """

    __slots__ = ("function", "kwargs", "constexprs", "options", "_names", "_contiguous",
                 "_kernels", "_tensor")

    def __init__(self, function: JITFunction, kwargs: dict[str, Any],
                 constexprs: dict[str, Any], options: LaunchOptions):
        self.function, self.kwargs = function, kwargs
        self.constexprs, self.options = constexprs, options
        self._names = function._runtime_names
        # Whether each runtime argument must be contiguous (a non-strided pointer).
        self._contiguous = tuple(not p.strided for p in function.runtime_params)
        #: signature -> (the kernel its first launch ran, SAGE_TENSOR_MAPS then).
        self._kernels: dict[tuple, tuple[CompiledKernel, str | None]] = {}
        self._tensor = _tensor_type()

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return functools.partial(self.run, _padded(grid))

    def __repr__(self) -> str:
        return f"<sage.jit launcher {self.function.name} {self.kwargs}>"

    def run(self, grid: Any, *args: Any) -> None:
        """Launches on ``grid`` with the runtime arguments ``args``.

        Raises:
            ArgumentError: for a wrong number of arguments, and as
                :meth:`JITFunction.run` for the arguments themselves.
        """
        self.launch(grid, args)

    def launch(self, grid: Any, args: tuple) -> None:
        """:meth:`run` with the runtime arguments as one tuple."""
        if len(args) != len(self._names):
            raise ArgumentError(f"{self.function.name} takes {len(self._names)} runtime "
                                f"arguments ({', '.join(self._names)}), got {len(args)}")
        if knobs.interpret.get():
            self._run_bound(grid, args)
            return
        read = self._read(args)
        entry = None if read is None else self._kernels.get(read[0])
        # The knobs are read where the full path reads them: after the
        # arguments passed their checks (a known signature).
        if entry is None or knobs.always_compile.get() or (
                self.options.tensor_maps is None and entry[1] != knobs.tensor_maps.get()):
            kernel = self._run_bound(grid, args)
            if read is not None and kernel is not None:
                # Bound, checked and launched: its signature is good.
                maps = self.options.tensor_maps or knobs.tensor_maps.get()
                self._kernels[read[0]] = (kernel, maps)
            return
        _, device, launch_args = read
        dims = grid_dims(grid, self._meta(args) if callable(grid) else None)
        try:
            enqueue(entry[0], dims, device, launch_args)
        except ValueError as error:
            if not _empty_tensor_map(error):
                raise
            self._run_bound(grid, args)  # nothing was launched; it falls back to device maps

    def interpret(self, grid: Any, *args: Any) -> None:
        """Runs the launch in the interpreter (:meth:`JITFunction.interpret`)."""
        self.function.interpret(grid, **self._by_name(args))

    def _read(self, args: tuple) -> tuple[tuple, int, tuple] | None:
        """(signature, device, launch arguments) of a launch, or None where
        the full path must judge its arguments."""
        codes: list[Any] = []
        launch_args = []
        code, push = codes.append, launch_args.append
        device = None
        addresses = 0  # every address or'ed: their alignment at once
        tensor = self._tensor
        for value, contiguous in zip(args, self._contiguous):
            kind = type(value)
            if kind is tensor:
                here = value.get_device()
                if here != device:
                    if device is not None or here < 0:  # two devices, or host memory
                        return None
                    device = here
                if contiguous and not value.is_contiguous():
                    return None
                address = value.data_ptr()
                addresses |= address
                code(value.dtype)
                push(address)
            elif kind is int:
                if _I32_MIN <= value <= _I32_MAX:
                    code(_I32_DIV16 if value % SPECIALIZE_MULTIPLE == 0 else _I32)
                elif _I64_MIN <= value <= _I64_MAX:
                    code(_I64_DIV16 if value % SPECIALIZE_MULTIPLE == 0 else _I64)
                else:
                    return None
                push(value)
            elif kind is float:
                code(_FLOAT)
                push(value)
            else:
                return None
        if device is None:
            device = current_device()
        code(device)
        if addresses % SPECIALIZE_MULTIPLE:  # not all aligned: each address's own
            code(tuple(address % SPECIALIZE_MULTIPLE
                       for value, address in zip(args, launch_args)
                       if type(value) is tensor))
        return tuple(codes), device, tuple(launch_args)

    def _meta(self, args: tuple) -> dict[str, Any]:
        """Every argument by name, for a callable grid."""
        meta = dict(zip(self._names, args))
        meta.update(self.constexprs)
        return meta

    def _by_name(self, args: tuple) -> dict[str, Any]:
        """The keywords of a launch with every argument by name."""
        kwargs = dict(zip(self._names, args))
        kwargs.update(self.kwargs)
        return kwargs

    def _run_bound(self, grid: Any, args: tuple) -> CompiledKernel | None:
        """The full path (:meth:`JITFunction.run`'s), the arguments by name."""
        self._tensor = _tensor_type()  # torch may have been imported since
        return self.function._run_bound(grid, (), self._by_name(args))


def _padded(grid: Any) -> Any:
    """A tuple grid of 1 or 2 sizes padded to 3 (once, not per launch)."""
    if type(grid) is tuple and 1 <= len(grid) < 3:
        return grid + (1,) * (3 - len(grid))
    return grid


def _tensor_type() -> type:
    """``torch.Tensor`` once torch is imported (launchers read such arguments
    themselves), else a type no argument has."""
    torch = sys.modules.get("torch")
    return torch.Tensor if torch is not None else _NoTensor


class _NoTensor:
    """Stands for ``torch.Tensor`` before torch is imported."""


def _empty_tensor_map(error: ValueError) -> bool:
    """Whether a launch failed because a host tensor map would have an empty
    dimension (the specialisation with device-built maps then runs instead)."""
    from sage.compiler.binding import load_binding
    return isinstance(error, load_binding().EmptyTensorMapError)


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
    """Launches a compiled kernel with bound arguments (:func:`enqueue`)."""
    enqueue(kernel, grid_dims(grid, call.values), call.device, call.launch_args)


def enqueue(kernel: CompiledKernel, dims: tuple[int, int, int], device: int,
            args: tuple) -> None:
    """Launches ``kernel`` on ``dims`` programs (nothing when one is 0) with
    its launch arguments (addresses and scalars) on the current stream of
    ``device``; a kernel with global scratch gets its memory (programs x
    ``info.global_scratch`` bytes) as the last argument."""
    if 0 in dims:
        return
    scratch = kernel.info.global_scratch
    if scratch:
        # Device-built TMA tensor maps need a home in global memory. `owner`
        # lives until the launch is enqueued; the allocator is stream-ordered.
        owner, address = global_scratch(device, dims[0] * dims[1] * dims[2] * scratch)
        args += (address,)
    kernel.load(device).launch(dims[0], dims[1], dims[2], current_stream(device), args)


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
