"""Helpers shared by the benchmarks (bench/accuracy.py, bench/attention_speed.py, ...).

Torch-free: markdown tables, the command line's outputs and case selection,
a provider at a tile plan (:class:`Variant`), the JSON + markdown outputs and
the report, a wall-clock budget, and the run's environment (torch is imported
only if it is already loaded, so the CPU-only modes and tests never need it).
The GPU timing is in bench/timing.py.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def add_python_path() -> None:
    """Makes ``import sage`` work from a source checkout (``python/``)."""
    path = str(REPO / "python")
    if path not in sys.path:
        sys.path.insert(0, path)


#: The plan suffix that times a sage provider with SAGE_TENSOR_MAPS=device
#: (every program builds its TMA tensor maps) instead of host-encoded maps.
DEVICE_MAPS = ":dm"


def split_device_maps(spec: str) -> tuple[str, bool]:
    """``"PLAN:dm"`` -> ("PLAN", True); any other plan -> (plan, False)."""
    if spec.endswith(DEVICE_MAPS):
        return spec[: -len(DEVICE_MAPS)], True
    return spec, False


def with_environment(fn: Callable[[], Any], name: str, value: str) -> Callable[[], Any]:
    """``fn``, run with the environment variable ``name`` set to ``value``
    (as it was again afterwards)."""
    def run() -> Any:
        previous = os.environ.get(name)
        os.environ[name] = value
        try:
            return fn()
        finally:
            if previous is None:
                del os.environ[name]
            else:
                os.environ[name] = previous
    return run


def with_tensor_maps(fn: Callable[[], Any], device_maps: bool) -> Callable[[], Any]:
    """``fn``, run with SAGE_TENSOR_MAPS=device when ``device_maps`` (the JIT
    reads it per launch, so the two builds of a kernel coexist in one process)."""
    return with_environment(fn, "SAGE_TENSOR_MAPS", "device") if device_maps else fn


def log(text: str) -> None:
    """Prints a progress line at once (the device tool returns the output's tail)."""
    print(text, flush=True)


def fmt(value: Any, digits: int = 4) -> str:
    """A table cell: None as "-"; floats in [0.1, 1) with ``digits`` decimals (cosines
    next to the paper's), others with ``digits`` significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.{max(digits - 1, 1)}e}"
        if abs(value) >= 1 or abs(value) < 0.1:
            return f"{value:.{digits}g}"
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
                   right: Sequence[bool] | None = None) -> str:
    """A GitHub markdown table; cells go through :func:`fmt`.

    ``right`` says which columns are right-aligned (default: all but the first).
    """
    right = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |",
             "| " + " | ".join("---:" if r else "---" for r in right) + " |"]
    for row in rows:
        cells = [fmt(cell) if not isinstance(cell, str) else cell for cell in row]
        if len(cells) != len(headers):
            raise ValueError(f"row has {len(cells)} cells, table has {len(headers)} columns")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def notes(items: Sequence[str]) -> list[str]:
    """The lines of a report's "Notes:" section listing ``items`` (none without items)."""
    return ["", "Notes:", "", *items] if items else []


def matches(name: str, patterns: Sequence[str] | None) -> bool:
    """Whether case ``name`` is selected by ``--cases`` patterns.

    A pattern selects a case if it is a substring of the name or an
    fnmatch glob matching it; no patterns select everything.
    """
    if not patterns:
        return True
    return any(p in name or fnmatch.fnmatch(name, p) for p in patterns)


def split_patterns(text: str | None) -> list[str]:
    """``"a,b, c"`` -> ``["a", "b", "c"]`` (None or "" -> [])."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


@dataclass(frozen=True)
class AttentionCase:
    """One attention shape: q, k, v (batch, heads, n, d), bf16 (the attention
    speed scripts' cases: bench/attention_speed.py, bench/flash_speed.py)."""

    n: int
    d: int
    causal: bool
    batch: int = 4
    heads: int = 32

    @property
    def name(self) -> str:
        """E.g. ``d128-n4096-causal`` (what ``--cases`` matches)."""
        return f"d{self.d}-n{self.n}-{'causal' if self.causal else 'full'}"


@dataclass(frozen=True)
class Variant:
    """A provider at a tile plan (``tiles`` None: its default plan), as the speed
    scripts that compare plans time it (bench/gemm_speed.py, bench/flash_speed.py)."""

    provider: str
    tiles: str | None = None

    @property
    def name(self) -> str:
        """The provider's name, e.g. ``sage``; ``sage@128x64:2:8:v`` at another plan."""
        return self.provider if self.tiles is None else f"{self.provider}@{self.tiles}"


class BenchmarkParser(argparse.ArgumentParser):
    """A benchmark's command line: the JSON and markdown output paths, ``--quick``,
    ``--cases`` (see :func:`matches`) and comma-separated subset options such as
    ``--providers``, which :meth:`parse_args` checks against their allowed values."""

    def __init__(self, description: str, *, markdown_help: str, quick_help: str,
                 cases_example: str, subsets: dict[str, Sequence[str]]) -> None:
        super().__init__(description=description)
        self.subsets = dict(subsets)
        self.add_argument("json", type=Path, help="where the JSON results go")
        self.add_argument("markdown", type=Path, help=markdown_help)
        self.add_argument("--quick", action="store_true", help=quick_help)
        self.add_argument("--cases", type=split_patterns, default=None,
                          help="comma-separated substrings/globs of case names, e.g. "
                               f"'{cases_example}'")
        for option, allowed in self.subsets.items():
            self.add_argument(option, type=split_patterns, default=list(allowed),
                              help=f"comma-separated subset of {','.join(allowed)}")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """``ArgumentParser.parse_args``; exits through ``error`` if a subset option
        names a value it does not allow."""
        options = super().parse_args(args, namespace)
        for option, allowed in self.subsets.items():
            bad = [x for x in getattr(options, option.lstrip("-").replace("-", "_"))
                   if x not in allowed]
            if bad:
                self.error(f"{option}: unknown {bad}; expected a subset of {','.join(allowed)}")
        return options


class Budget:
    """A wall-clock budget for a whole script: what is left, and whether a
    job projected to take ``seconds`` still fits."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.start = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since the budget started."""
        return time.monotonic() - self.start

    def left(self) -> float:
        """Seconds left (may be negative)."""
        return self.seconds - self.elapsed()

    def fits(self, seconds: float) -> bool:
        """Whether ``seconds`` more still fit in the budget."""
        return seconds <= self.left()


def git_commit() -> str | None:
    """The checkout's commit (with ``+dirty`` when the tree has changes), or None."""
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def environment() -> dict[str, Any]:
    """Python, numpy, git commit, and (when torch is loaded) torch, CUDA and the device."""
    import numpy as np

    env: dict[str, Any] = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "python": platform.python_version(), "numpy": np.__version__,
                           "commit": git_commit(), "host": platform.node()}
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = torch.__version__
        env["cuda"] = getattr(torch.version, "cuda", None)
        if torch.cuda.is_available():
            env["device"] = torch.cuda.get_device_name()
            env["cudnn"] = torch.backends.cudnn.version()
    try:
        import triton  # noqa: PLC0415
        env["triton"] = triton.__version__
    except ImportError:
        pass
    return env


def write_outputs(json_path: Path | None, md_path: Path | None, results: dict[str, Any],
                  markdown: str) -> None:
    """Writes ``results`` as JSON and ``markdown`` as a file (either path may be None)."""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    if md_path is not None:
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(markdown.rstrip() + "\n")


#: How :func:`report_header` names the versions of ``environment()``.
VERSION_LABELS = {"torch": "torch", "cudnn": "cuDNN", "triton": "Triton"}


def report_header(results: dict[str, Any], title: str, script: str,
                  versions: Sequence[str] = ("torch", "cudnn"), command_note: str = "") -> str:
    """A report's first lines, from ``results`` after :func:`write_report` has filled in
    its environment and time: ``## TITLE (date, device, versions, commit, time)`` and the
    command (``python3 bench/SCRIPT ARGV``, then ``command_note``)."""
    env = results["environment"]
    facts = [env["date_utc"], env.get("device", "-"),
             *(f"{VERSION_LABELS[name]} {env.get(name, '-')}" for name in versions),
             f"commit {env['commit']}", f"{results['elapsed_s']:.0f} s"]
    command = f"`python3 bench/{script} {' '.join(results['argv'])}`"
    return (f"## {title} ({', '.join(facts)})\n\nCommand: {command}"
            + (f" {command_note}" if command_note else ""))


def write_report(results: dict[str, Any], json_path: Path | None, md_path: Path | None,
                 budget: Budget, header: Callable[[dict[str, Any]], str], body: str) -> int:
    """Ends a run: records its environment and elapsed time in ``results``, writes them
    as JSON and ``header(results)`` + ``body`` as markdown (body behind a "Run failed"
    line when ``results`` has an error), prints the markdown, and returns the exit
    status (1 after an error)."""
    results["environment"] = environment()
    results["elapsed_s"] = budget.elapsed()
    if "error" in results:
        body = f"**Run failed:** {results['error']}\n\n" + body
    markdown = header(results) + "\n\n" + body
    write_outputs(json_path, md_path, results, markdown)
    print("\n" + markdown)
    return 1 if "error" in results else 0


def error_text(exc: BaseException, limit: int = 400) -> str:
    """``Type: message`` of an exception, cut to ``limit`` characters."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
