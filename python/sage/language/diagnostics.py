"""Errors with the user's file and line, and MLIR locations of kernel code.

The user location of an op is the innermost Python frame outside this
package: the kernel line (or the inlined helper line) that called ``sl.*``.
"""

from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType

from sage.compiler import CompilationError as _LibraryError

_PACKAGE_DIR = str(Path(__file__).resolve().parent)
_POSITIONS: dict[CodeType, list] = {}


class CompilationError(_LibraryError):
    """A kernel is invalid: the message starts with ``file:line:col:``."""


@dataclass(frozen=True)
class Location:
    """A place in user code; ``column`` counts from 1 (0 when unknown)."""

    file: str
    line: int
    column: int

    @property
    def mlir(self) -> str:
        escaped = self.file.replace("\\", "\\\\").replace('"', '\\"')
        return f'loc("{escaped}":{self.line}:{self.column})'

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def _column(frame: FrameType) -> int:
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        positions = _POSITIONS[code] = list(code.co_positions())
    index = frame.f_lasti // 2
    if 0 <= index < len(positions) and positions[index][2] is not None:
        return positions[index][2] + 1
    return 0


def _user_frame() -> FrameType | None:
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return frame


def user_location() -> Location | None:
    """Where user code called into the language (``None`` outside a kernel)."""
    frame = _user_frame()
    if frame is None:
        return None
    return Location(frame.f_code.co_filename, frame.f_lineno, _column(frame))


def error(message: str, location: Location | None = None) -> CompilationError:
    """A :class:`CompilationError` at ``location`` (default: the calling user line).

    The message reads ``file:line:col: error: message`` followed by the line
    of source.
    """
    where = location or user_location()
    if where is None:
        return CompilationError(f"error: {message}")
    source = linecache.getline(where.file, where.line).rstrip()
    text = f"{where}: error: {message}"
    return CompilationError(f"{text}\n    {source.strip()}" if source else text)
