"""Helpers shared by the attention benchmarks (bench/accuracy.py, bench/attention_speed.py).

Torch-free: markdown tables, the JSON + markdown outputs, a wall-clock
budget, and the run's environment (torch is imported only if it is already
loaded, so the CPU-only modes and tests never need it).
"""

from __future__ import annotations

import fnmatch
import json
import math
import platform
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def add_python_path() -> None:
    """Makes ``import sage`` work from a source checkout (``python/``)."""
    path = str(REPO / "python")
    if path not in sys.path:
        sys.path.insert(0, path)


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


def error_text(exc: BaseException, limit: int = 400) -> str:
    """``Type: message`` of an exception, cut to ``limit`` characters."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
