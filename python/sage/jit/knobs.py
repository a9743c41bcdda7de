"""Every environment switch of sage, in one typed registry.

Each knob names its environment variable, parses it strictly (a typo is an
error, never silently ignored), and says whether it changes compiled output;
those that do enter the JIT's cache key (:func:`output_environment`). An
empty value means unset. ``docs/jit.md`` documents each one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

#: The stages SAGE_DUMP can write, in pipeline order.
DUMP_STAGES = ("ir", "passes", "mlir", "llvm", "ptx", "cubin", "ptxas")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class KnobError(ValueError):
    """An environment variable of sage holds a value it does not accept."""


def parse_bool(raw: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case); nothing else."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("expected one of 1, 0, true, false, yes, no, on, off")


def parse_path(raw: str) -> Path:
    """A path; ``~`` is expanded."""
    return Path(raw).expanduser()


def parse_stages(raw: str) -> frozenset[str]:
    """A comma-separated subset of :data:`DUMP_STAGES`, or ``all``."""
    items = {item.strip().lower() for item in raw.split(",") if item.strip()}
    if items == {"all"}:
        return frozenset(DUMP_STAGES)
    unknown = sorted(items - set(DUMP_STAGES))
    if unknown or not items:
        raise ValueError(f"unknown stage(s) {unknown}; expected a comma-separated "
                         f"subset of {', '.join(DUMP_STAGES)}, or all")
    return frozenset(items)


def parse_cubin(raw: str) -> str:
    """``auto`` (a cubin when ptxas is found), or a boolean."""
    if raw.strip().lower() == "auto":
        return "auto"
    return "1" if parse_bool(raw) else "0"


def parse_tensor_maps(raw: str) -> str:
    """``host`` or ``device`` (any case)."""
    from sage.language.tracer import TENSOR_MAP_PLACES  # numpy: imported on use
    value = raw.strip().lower()
    if value not in TENSOR_MAP_PLACES:
        raise ValueError(f"expected one of {', '.join(TENSOR_MAP_PLACES)}")
    return value


def _default_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "sage"


@dataclass(frozen=True)
class Knob(Generic[T]):
    """One environment switch: its variable, parser, default and meaning."""

    env: str
    parse: Callable[[str], T]
    default: Callable[[], T]
    doc: str
    affects_output: bool = False

    def raw(self) -> str:
        """The variable's text ('' when unset)."""
        return os.environ.get(self.env, "").strip()

    def get(self) -> T:
        """The parsed value, or the default when unset or empty.

        Raises:
            KnobError: naming the variable, its value and what it accepts.
        """
        raw = os.environ.get(self.env)  # read on every launch: keep it short
        if not raw or not raw.strip():
            return self.default()
        raw = raw.strip()
        try:
            return self.parse(raw)
        except ValueError as error:
            raise KnobError(f"{self.env}={raw!r}: {error}") from None


class Knobs:
    """The registry: one attribute per knob (``knobs.dump.get()``)."""

    dump = Knob("SAGE_DUMP", parse_stages, frozenset,
                "Write these stages of every kernel the JIT loads (compiled or "
                "from the cache) under SAGE_DUMP_DIR: " + ",".join(DUMP_STAGES)
                + " or all.")
    dump_dir = Knob("SAGE_DUMP_DIR", parse_path, lambda: Path("sage-dump"),
                    "Where SAGE_DUMP writes (default ./sage-dump), one folder "
                    "per kernel specialisation.")
    always_compile = Knob("SAGE_ALWAYS_COMPILE", parse_bool, lambda: False,
                          "Skip the in-memory and disk caches: compile every "
                          "launch (entries are still written).")
    override_dir = Knob("SAGE_OVERRIDE_DIR", parse_path, lambda: None,
                        "Compile <kernel>.mlir or load <kernel>.ptx found here "
                        "instead of the traced kernel.", affects_output=True)
    cache_dir = Knob("SAGE_CACHE_DIR", parse_path, _default_cache_dir,
                     "The disk cache (default $XDG_CACHE_HOME/sage, else "
                     "~/.cache/sage).")
    interpret = Knob("SAGE_INTERPRET", parse_bool, lambda: False,
                     "Run kernels on the CPU with sage.language.interpret "
                     "(numpy) instead of the GPU.")
    autotune_cache = Knob("SAGE_AUTOTUNE_CACHE", parse_bool, lambda: True,
                          "Keep autotuning winners on disk under SAGE_CACHE_DIR/autotune "
                          "(0: every process tunes again, nothing is read or written).")
    print_autotuning = Knob("SAGE_PRINT_AUTOTUNING", parse_bool, lambda: False,
                            "Print to stderr how each autotuned kernel chose its config "
                            "for a new key: every config's time or failure, the winner.")
    tune_attention = Knob("SAGE_TUNE_ATTENTION", parse_bool, lambda: True,
                          "Choose the SageBwd forward's plan per problem by timing its "
                          "candidates on the problem's first call (0: always the default "
                          "plan). Read when a problem's plan is first made.")
    cubin = Knob("SAGE_CUBIN", parse_cubin, lambda: "auto",
                 "Assemble a cubin with ptxas: auto (when ptxas is found), 1 "
                 "(required) or 0 (load PTX; the driver compiles it).",
                 affects_output=True)
    ptxas = Knob("SAGE_PTXAS", parse_path, lambda: None,
                 "The ptxas to run (default: on PATH, $CUDA_HOME/bin, "
                 "/usr/local/cuda/bin).", affects_output=True)
    tensor_maps = Knob("SAGE_TENSOR_MAPS", parse_tensor_maps, lambda: "host",
                       "Where kernels' TMA tensor maps are built: host (the launcher "
                       "encodes each map the kernel's arguments determine; the rest "
                       "are built on the device) or device (every map by every "
                       "program). Read when a kernel is compiled.",
                       affects_output=True)
    compiler_library = Knob("SAGE_COMPILER_LIBRARY", parse_path, lambda: None,
                            "libsage_compiler.so to load (default: the installed "
                            "package's sage/lib, else the build tree's build/lib).")
    binding_dir = Knob("SAGE_BINDING_DIR", parse_path, lambda: None,
                       "Where the native binding _sage*.so is when the "
                       "package has none (default: the build tree's "
                       "build/python).")

    def all(self) -> list[Knob]:
        """Every knob, in declaration order."""
        return [value for value in vars(type(self)).values() if isinstance(value, Knob)]

    def check(self) -> None:
        """Parses every knob; raises :class:`KnobError` on the first bad one."""
        for knob in self.all():
            knob.get()

    def output_environment(self) -> tuple[tuple[str, str], ...]:
        """(variable, value) of every set knob that changes compiled output."""
        return tuple((knob.env, knob.raw()) for knob in self.all()
                     if knob.affects_output and knob.raw())


knobs = Knobs()
