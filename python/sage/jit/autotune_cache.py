"""The on-disk record of autotuning winners, next to the kernel cache.

An entry lives in a :class:`~sage.jit.cache.FileCache` under
``<SAGE_CACHE_DIR>/autotune`` (atomic writes, checksummed: a damaged entry
is a miss). Its key is a SHA-256 over everything a winner depends on:

- the kernel: its name and a hash of its source (and of the helpers' sources
  a tuner names: :func:`kernel_identity`);
- the config space: ``repr`` of every config benchmarked, in order (its
  kwargs and the launch options it sets: ``num_warps``, ``maxnreg``,
  ``num_stages``);
- the key: the values of the ``key`` arguments (a tensor's shape and dtype)
  and the dtypes of the tensor arguments;
- the device: its name and compute capability ("interpreter" under
  SAGE_INTERPRET=1);
- the compiler: :func:`sage.jit.compiler.compiler_identity` (the interpreter:
  the hash of sage's Python sources), and the knobs that change compiled
  output.

The entry holds the index of the winner in the config space, every config's
time and every failure. An entry whose contents do not match the config
space it was looked up with is ignored (and replaced by the next tuning).
:func:`recorded_or_benchmarked` is the read-else-benchmark-and-write step
that ``@sage.autotune`` and the SageBwd forward's plan tuner
(:mod:`sage.kernels.sagebwd.tuning`) share.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import marshal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import sage.jit.compiler as jit_compiler
from sage.compiler.library import default_library
from sage.jit.cache import FileCache
from sage.jit.knobs import knobs

#: The folder under SAGE_CACHE_DIR holding the winners. Kernel entries live in
#: two-hex-digit folders there, so this name never meets one of theirs.
FOLDER = "autotune"
#: The one blob of an entry.
_BLOB = "winner.json"


@dataclass
class Record:
    """One tuning result: ``best`` indexes the config space; ``timings`` has
    one time (ms) per config, None for a config that failed, whose message
    is in ``failures``."""

    best: int
    timings: list[float | None]
    failures: dict[int, str] = field(default_factory=dict)


def _source(code: Any) -> bytes:
    """The source of a function or module (a function's code object when the
    source cannot be read, as for a function made by ``exec``)."""
    try:
        return inspect.getsource(code).encode()
    except (OSError, TypeError):
        return marshal.dumps(code.__code__)


def kernel_identity(fn: Callable, name: str, helpers: Sequence[Any] = ()) -> dict[str, str]:
    """The kernel's name and a hash of its source, and of the sources of
    ``helpers`` (modules or functions it calls whose changes should tune it
    again; none: the hash of ``fn``'s source alone)."""
    digest = hashlib.sha256(_source(fn))
    for helper in helpers:
        digest.update(_source(helper))
    return {"name": name, "source": digest.hexdigest()}


def _device_name(device: int) -> str:
    """The device's marketing name from torch or CuPy, whichever is imported
    ("" with neither: the binding does not report names). Two cards of one
    capability (an H100 PCIe and an SXM) tune differently."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return str(torch.cuda.get_device_name(device))
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        name = cupy.cuda.runtime.getDeviceProperties(device)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    return ""


def device_identity(device: int | None) -> dict[str, str]:
    """What identifies the device a tuning ran on (None: the interpreter)."""
    if device is None:
        return {"kind": "interpreter"}
    from sage.compiler.binding import load_binding
    major, minor = load_binding().device_capability(device)
    return {"kind": "cuda", "name": _device_name(device), "capability": f"{major}.{minor}"}


def compiler_identity(interpreting: bool) -> dict[str, str]:
    """What identifies the code that ran the configs: the compiler (library
    and Python sources), or under the interpreter sage's Python sources."""
    if interpreting:
        return {"interpreter": jit_compiler.python_sources_hash()}
    return jit_compiler.compiler_identity(default_library(),
                                          FileCache(knobs.cache_dir.get()))


def entry_key(kernel: dict[str, str], configs: Sequence[Any], key: tuple,
              device: dict[str, str], compiler: dict[str, str]) -> str:
    """The disk key of one tuning (see the module's docstring)."""
    fields = {"kernel": kernel, "configs": [repr(config) for config in configs],
              "key": [repr(value) for value in key], "device": device, "compiler": compiler,
              "environment": knobs.output_environment()}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


class WinnerCache:
    """Tuning records under ``root`` (default ``<SAGE_CACHE_DIR>/autotune``)."""

    def __init__(self, root: str | Path | None = None):
        self.files = FileCache(root if root is not None else knobs.cache_dir.get() / FOLDER)

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives."""
        return self.files.path(key)

    def get(self, key: str, configs: Sequence[Any]) -> Record | None:
        """The record of ``key`` for this config space, or None when absent,
        damaged, or written for other configs."""
        blobs = self.files.get(key)
        if blobs is None or _BLOB not in blobs:
            return None
        try:
            entry = json.loads(blobs[_BLOB])
            record = Record(best=entry["best"], timings=list(entry["timings"]),
                            failures={int(i): str(m) for i, m in entry["failures"].items()})
            reprs = entry["configs"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if (reprs != [repr(config) for config in configs] or type(record.best) is not int
                or not 0 <= record.best < len(configs) or len(record.timings) != len(configs)
                or record.timings[record.best] is None):
            return None
        return record

    def put(self, key: str, configs: Sequence[Any], record: Record,
            description: dict[str, Any]) -> Path:
        """Writes the record of ``key`` (atomically; ``description`` is kept
        for people reading the entry)."""
        entry = {**description, "configs": [repr(config) for config in configs],
                 "best": record.best, "timings": record.timings,
                 "failures": {str(i): message for i, message in record.failures.items()}}
        return self.files.put(key, {_BLOB: json.dumps(entry, indent=1).encode()})


def recorded_or_benchmarked(configs: Sequence[Any], entry: Callable[[], str],
                            benchmark: Callable[[], Record] | None,
                            description: dict[str, Any]) -> tuple[Record, str] | None:
    """A tuning's record and how it was had: the disk cache's entry for
    ``configs`` under the key ``entry()`` (when SAGE_AUTOTUNE_CACHE is on),
    else ``benchmark()``'s, written there when the cache is on
    (``description``: kept in the entry for people reading it).

    Returns:
        (record, how): how is ``from PATH`` or ``benchmarked in S s`` (with
        ``, written to PATH``); None when there is no entry to read and no
        ``benchmark`` (timing is impossible where it is asked).
    """
    store = WinnerCache() if knobs.autotune_cache.get() else None
    key = entry() if store is not None else ""
    if store is not None:
        record = store.get(key, configs)
        if record is not None:
            return record, f"from {store.path(key)}"
    if benchmark is None:
        return None
    start = time.perf_counter()
    record = benchmark()
    how = f"benchmarked in {time.perf_counter() - start:.2f} s"
    if store is not None:
        how += f", written to {store.put(key, configs, record, description)}"
    return record, how
