"""One specialisation of a kernel: trace, compile (or take from the disk
cache), dump, and the compiled product.

The disk-cache key is a SHA-256 over:

- the compiler's identity: the library's ``sage_version()``, a hash of the
  library file, and a hash of the Python sources of ``sage.compiler``,
  ``sage.jit``, ``sage.language`` and ``sage.runtime``;
- the traced IR text, which holds the kernel's body, its specialisation
  (argument types, alignment/divisibility promises, constexpr values), the
  target and the launch options: the warps, the register cap and each
  loop's stages (or the text of an override file);
- the options (arch, warps, PTX ISA version, cubin or not) and the ptxas
  version when a cubin is made;
- every set environment knob that changes compiled output
  (:meth:`sage.jit.knobs.Knobs.output_environment`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sage.compiler.library import (DEFAULT_PTX_VERSION, CompileOptions, CompilerLibrary,
                                   default_library)
from sage.jit.cache import FileCache
from sage.jit.dump import write_dumps
from sage.jit.knobs import knobs
from sage.jit.options import DEFAULT_NUM_STAGES, LaunchOptions, default_options
from sage.jit.specialize import ArgKey, Param, arg_specs
from sage.runtime.ptx import KernelInfo, parse_kernel_header

_PACKAGE = Path(__file__).resolve().parents[1]
#: The Python packages whose sources are part of the compiler's identity.
_IDENTITY_PACKAGES = ("compiler", "jit", "language", "runtime")
#: The PTX ISA version (x10) the JIT compiles with: the compiler's default.
PTX_VERSION = DEFAULT_PTX_VERSION


@functools.lru_cache(maxsize=None)
def python_sources_hash() -> str:
    """SHA-256 over the Python sources that shape compiled kernels."""
    digest = hashlib.sha256()
    for package in _IDENTITY_PACKAGES:
        for path in sorted((_PACKAGE / package).rglob("*.py")):
            digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_hash(library: CompilerLibrary, cache: FileCache) -> str:
    """SHA-256 of the library file, remembered in the cache by the file's
    path, size, modification time and inode (hashing ~70 MB costs ~70 ms
    per process; a rebuilt or replaced file gets a new entry)."""
    stat = library.path.resolve().stat()
    memo = hashlib.sha256(f"{library.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|"
                          f"{stat.st_ino}".encode()).hexdigest()
    known = cache.get(memo)
    if known is not None and len(known.get("sha256", b"")) == 64:
        return known["sha256"].decode()
    digest = library.file_hash
    cache.put(memo, {"sha256": digest.encode()})
    return digest


def compiler_identity(library: CompilerLibrary, cache: FileCache) -> dict[str, str]:
    """Everything that identifies the compiler itself."""
    return {"version": library.version, "library": library_hash(library, cache),
            "python": python_sources_hash()}


def cache_key(library: CompilerLibrary, cache: FileCache, source: str, source_kind: str,
              options: CompileOptions) -> str:
    """The disk-cache key of compiling ``source`` with ``options``."""
    fields = {
        "compiler": compiler_identity(library, cache),
        "source_kind": source_kind,
        "source": hashlib.sha256(source.encode()).hexdigest(),
        "options": {"arch": options.arch, "num_warps": options.num_warps,
                    "ptx_version": options.ptx_version, "cubin": options.emit_cubin},
        "ptxas": library.ptxas_version() if options.emit_cubin else None,
        "environment": knobs.output_environment(),
    }
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclass
class CompiledKernel:
    """A compiled specialisation: its products and what it was made for.

    ``stages`` holds every product by SAGE_DUMP stage name (``ir``, ``ptx``,
    ``cubin``, ...); ``origin`` says where it came from: "compiled",
    "cache", or "override:<path>". ``num_warps``, ``maxnreg``,
    ``num_stages``, ``tensor_maps`` and ``num_ctas`` are its launch options,
    together :attr:`options`.
    """

    name: str
    key: str
    arch: str
    num_warps: int
    maxnreg: int | None
    params: tuple[Param, ...]
    arg_keys: tuple[ArgKey, ...]
    constexprs: dict[str, Any]
    stages: dict[str, bytes]
    origin: str
    num_stages: int = DEFAULT_NUM_STAGES
    tensor_maps: str | None = None
    num_ctas: int = 1
    info: KernelInfo = field(init=False)
    #: The launch options it was compiled for (made once: launches compare them).
    options: LaunchOptions = field(init=False, repr=False)
    _loaded: dict[int, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.info = parse_kernel_header(self.ptx)[self.name]
        self.options = LaunchOptions(self.num_warps, self.maxnreg, self.num_stages,
                                     self.tensor_maps, self.num_ctas)

    @property
    def ir(self) -> str:
        """The sage IR the kernel was compiled from."""
        return self.stages["ir"].decode()

    @property
    def ptx(self) -> str:
        return self.stages["ptx"].decode()

    @property
    def cubin(self) -> bytes:
        """The cubin, or b"" when the PTX is loaded (JIT-compiled by the driver)."""
        return self.stages.get("cubin", b"")

    @property
    def signature(self) -> str:
        """One launch letter per argument the launcher passes (P, i, l, f):
        the runtime arguments, then a P for the global scratch pointer when
        the kernel has one (``info.global_scratch`` > 0). The host tensor
        maps (``info.tensor_maps``) follow; the native launcher computes them
        from these."""
        letters = "".join(key.letter for key in self.arg_keys)
        return letters + "P" if self.info.global_scratch else letters

    def load(self, device: int) -> Any:
        """The kernel loaded on ``device`` (a ``sage._sage.Kernel``; once per
        device). A cubin the driver rejects falls back to the PTX."""
        kernel = self._loaded.get(device)
        if kernel is None:
            from sage.compiler.binding import load_binding
            binding = load_binding()

            def load(image: bytes) -> Any:
                return binding.Kernel(image, self.name, device, self.info.threads,
                                      self.info.shared_memory, self.signature,
                                      [m.spec() for m in self.info.tensor_maps],
                                      self.info.cluster, self.info.early_launch)
            if self.cubin:
                try:
                    kernel = load(self.cubin)
                except binding.CudaError as error:
                    print(f"sage: {self.name}: the driver rejected the cubin ({error}); "
                          "loading the PTX", file=sys.stderr)
            if kernel is None:
                kernel = load(self.stages["ptx"])
            self._loaded[device] = kernel
        return kernel


def _override(name: str) -> tuple[str, Path] | None:
    """("ptx" | "mlir", path) of an override file for kernel ``name``."""
    folder = knobs.override_dir.get()
    if folder is None:
        return None
    for kind in ("ptx", "mlir"):
        path = folder / f"{name}.{kind}"
        if path.is_file():
            return kind, path
    return None


def _wants_cubin(library: CompilerLibrary) -> bool:
    choice = knobs.cubin.get()
    return choice == "1" or (choice == "auto" and library.find_ptxas() is not None)


def compile_ir(ir: str, name: str, arch: str, num_warps: int,
               make: Callable[..., CompiledKernel],
               library: CompilerLibrary | None = None) -> CompiledKernel:
    """Compiles traced IR (or its override), through the disk cache, and
    writes the dumps SAGE_DUMP asks for. ``make(key=, stages=, origin=)``
    builds the result."""
    library = library or default_library()
    knobs.check()
    stages: dict[str, bytes] = {"ir": ir.encode()}
    source, source_kind, origin = ir, "traced", "compiled"
    override = _override(name)
    if override:
        kind, path = override
        source, source_kind, origin = path.read_text(), f"override-{kind}", f"override:{path}"
        print(f"sage: kernel {name}: using the override {path}", file=sys.stderr)
    # An edited module keeps its own sage.target / sage.num_warps.
    options = CompileOptions(arch="" if override else arch,
                             num_warps=0 if override else num_warps,
                             ptx_version=PTX_VERSION,
                             emit_cubin=_wants_cubin(library) and source_kind != "override-ptx",
                             capture_passes="passes" in knobs.dump.get(),
                             source_name=f"{name}.mlir" if not override else str(override[1]))
    cache = FileCache(knobs.cache_dir.get())
    key = cache_key(library, cache, source, source_kind, options)
    if source_kind == "override-ptx":
        stages["ptx"] = source.encode()
    else:
        cached = None if knobs.always_compile.get() else cache.get(key)
        if cached is not None and (not options.capture_passes or cached.get("passes")):
            stages, origin = cached, "cache"
        else:
            out = library.compile_all(source, options)
            stages.update({"passes": out.passes.encode(), "mlir": out.lowered_mlir.encode(),
                           "llvm": out.llvm_ir.encode(), "ptx": out.ptx.encode(),
                           "cubin": out.cubin, "ptxas": out.ptxas_log.encode()})
            stages = {stage: data for stage, data in stages.items() if data}
            cache.put(key, stages)
    write_dumps(stages, name, key, arch, num_warps, PTX_VERSION, origin)
    return make(key=key, stages=stages, origin=origin)


def trace_specialization(fn: Callable, name: str, arg_keys: tuple[ArgKey, ...],
                         constexprs: dict[str, Any], arch: str,
                         options: LaunchOptions | None = None) -> str:
    """The sage IR of one specialisation of ``fn`` (no compilation);
    ``options`` default to a launch's defaults (``tensor_maps`` None:
    SAGE_TENSOR_MAPS)."""
    import sage.language as sl

    kwargs = (options or default_options()).trace_kwargs()
    kwargs["tensor_maps"] = kwargs["tensor_maps"] or knobs.tensor_maps.get()
    return sl.trace(fn, arg_specs(arg_keys), constexprs, name=name, arch=arch, **kwargs)


def compile_specialization(fn: Callable, name: str, params: tuple[Param, ...],
                           arg_keys: tuple[ArgKey, ...], constexprs: dict[str, Any],
                           arch: str, options: LaunchOptions | None = None) -> CompiledKernel:
    """Traces ``fn`` for one specialisation and compiles it (the launch
    options, the warps, the register cap, the loops' stages and where the
    tensor maps are built, are recorded in the traced IR)."""
    options = options or default_options()
    ir = trace_specialization(fn, name, arg_keys, constexprs, arch, options)

    def make(**products: Any) -> CompiledKernel:
        return CompiledKernel(name=name, arch=arch, params=params, arg_keys=arg_keys,
                              constexprs=dict(constexprs), **options.trace_kwargs(),
                              **products)
    return compile_ir(ir, name, arch, options.num_warps, make)
