"""The on-disk cache of compiled kernels.

An entry is one file holding named blobs (PTX, cubin, IR, ...). It is written
to a temporary file in the same folder and renamed into place
(``os.replace``), so a reader sees either no entry or a complete one, and
concurrent writers of one key each rename a complete file (the last wins).
Each entry carries a SHA-256 of its contents: a truncated or corrupted entry
is detected, removed and reported as a miss, never trusted.

Layout: ``<root>/<key[:2]>/<key>.sage``, with the file made of a magic line,
one line of JSON (``{"sha256": ..., "blobs": [[name, size], ...]}``) and the
blobs back to back.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

_MAGIC = b"sage-cache-entry 1\n"


class FileCache:
    """Entries of named blobs under ``root``, keyed by hex strings."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives."""
        return self.root / key[:2] / f"{key}.sage"

    def get(self, key: str) -> dict[str, bytes] | None:
        """The blobs of ``key``, or None when absent or invalid (an invalid
        entry is removed, so the next compilation replaces it)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        blobs = _decode(data)
        if blobs is None:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        return blobs

    def put(self, key: str, blobs: dict[str, bytes]) -> Path:
        """Writes the entry of ``key`` atomically; returns its path."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.",
                                         suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_encode(blobs))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
            raise
        return path


def _encode(blobs: dict[str, bytes]) -> bytes:
    payload = b"".join(blobs.values())
    header = {"sha256": hashlib.sha256(payload).hexdigest(),
              "blobs": [[name, len(blob)] for name, blob in blobs.items()]}
    return _MAGIC + json.dumps(header).encode() + b"\n" + payload


def _decode(data: bytes) -> dict[str, bytes] | None:
    if not data.startswith(_MAGIC):
        return None
    end = data.find(b"\n", len(_MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(data[len(_MAGIC):end])
        sizes = [(str(name), int(size)) for name, size in header["blobs"]]
        digest = str(header["sha256"])
    except (ValueError, KeyError, TypeError):
        return None
    payload = data[end + 1:]
    if len(payload) != sum(size for _, size in sizes) or \
            hashlib.sha256(payload).hexdigest() != digest:
        return None
    blobs, offset = {}, 0
    for name, size in sizes:
        blobs[name] = payload[offset:offset + size]
        offset += size
    return blobs
