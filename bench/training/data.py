"""The training-parity dataset: the machine's own Python source files, tokenised.

    python3 bench/training/data.py OUTDIR [--max-mb 100] [--val-percent 2]
        [--tokenizer bpe|byte] [--vocab 8192] [--bpe-train-mb 8] [--tokenizer-json PATH]

Text nobody in this project wrote, present offline on every machine with
Python: the ``.py`` files of the running interpreter's standard library and
installed packages (``sysconfig`` paths ``stdlib`` and ``purelib``/``platlib``).
The build is deterministic for a given machine image:

1. every ``.py`` file under those roots (``__pycache__`` skipped, symlinks not
   followed), at most ``--max-file-kb`` KiB, valid UTF-8;
2. files ordered by SHA-256 of their root-relative name (a fixed shuffle that
   mixes packages) and taken in that order, the first of each distinct
   content only, until ``--max-mb`` MiB;
3. split by file: a file is validation iff the first 8 hex digits of that
   hash, mod 100, are below ``--val-percent``;
4. tokenised with a byte-level BPE trained once with the ``tokenizers``
   package on the first ``--bpe-train-mb`` MiB of training files (or given by
   ``--tokenizer-json``), or byte-level (``--tokenizer byte``: one token per
   byte); an end-of-file token separates files.

Writes ``train.bin`` and ``val.bin`` (uint16 token ids), ``tokenizer.json``
(BPE only) and ``meta.json`` (roots, counts, bytes, tokens, SHA-256 of the file
list and of both token streams). Only numpy (and ``tokenizers`` for BPE) is
needed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EOS = "<|endoftext|>"


@dataclass(frozen=True)
class SourceFile:
    """One selected file: its label (``root/relative/path``) and text."""

    name: str
    text: str

    @property
    def digest(self) -> str:
        """SHA-256 hex of the name (the order and the split come from it)."""
        return hashlib.sha256(self.name.encode()).hexdigest()

    def is_val(self, val_percent: float) -> bool:
        """Whether the file belongs to the validation split."""
        return int(self.digest[:8], 16) % 100 < val_percent


def default_roots() -> dict[str, Path]:
    """The interpreter's library roots by label (duplicates dropped)."""
    paths = sysconfig.get_paths()
    roots: dict[str, Path] = {}
    for label in ("stdlib", "purelib", "platlib"):
        path = Path(paths[label]).resolve()
        if path.is_dir() and path not in roots.values():
            roots[label] = path
    return roots


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield Path(dirpath) / name


def candidate_files(roots: dict[str, Path]) -> list[tuple[str, Path]]:
    """Every ``.py`` file under ``roots`` as ``(label/relative/path, path)``.

    Roots nested in another (site-packages inside the stdlib directory) are
    walked once, under their own label.
    """
    nested = {label: [other for other in roots.values() if other != path and
                      other.is_relative_to(path)] for label, path in roots.items()}
    candidates: list[tuple[str, Path]] = []
    for label, root in roots.items():
        for path in _walk(root):
            if any(path.is_relative_to(inner) for inner in nested[label]):
                continue
            candidates.append((f"{label}/{path.relative_to(root).as_posix()}", path))
    return candidates


def select_files(roots: dict[str, Path], max_bytes: int,
                 max_file_kb: int = 256) -> list[SourceFile]:
    """Rules 1 and 2 of the module doc: files in name-hash order, each read only
    when reached, the first of each distinct content kept, until ``max_bytes``."""
    order = sorted(candidate_files(roots),
                   key=lambda c: hashlib.sha256(c[0].encode()).hexdigest())
    seen_content: set[str] = set()
    chosen, total = [], 0
    for name, path in order:
        try:
            if path.is_symlink() or not 0 < path.stat().st_size <= max_file_kb * 1024:
                continue
            raw = path.read_bytes()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        content = hashlib.sha256(raw).hexdigest()
        if content in seen_content or total + len(raw) > max_bytes:
            continue
        seen_content.add(content)
        chosen.append(SourceFile(name, text))
        total += len(raw)
    return chosen


def train_bpe(texts: list[str], vocab_size: int) -> object:
    """A byte-level BPE (``tokenizers``) trained on ``texts``, with the EOS token as id 0."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


class ByteTokenizer:
    """One token per UTF-8 byte (ids 0-255); EOS is 256."""

    vocab_size = 257
    eos_id = 256

    def encode_texts(self, texts: list[str]) -> list[np.ndarray]:
        """Token arrays of ``texts``."""
        return [np.frombuffer(t.encode(), np.uint8).astype(np.uint16) for t in texts]


class BpeTokenizer:
    """A ``tokenizers`` BPE with batched, parallel encoding."""

    def __init__(self, tokenizer: object) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()
        self.eos_id = tokenizer.token_to_id(EOS)

    def encode_texts(self, texts: list[str], chunk: int = 1024) -> list[np.ndarray]:
        """Token arrays of ``texts`` (encoded ``chunk`` files at a time)."""
        out: list[np.ndarray] = []
        for start in range(0, len(texts), chunk):
            for enc in self.tokenizer.encode_batch(texts[start:start + chunk]):
                out.append(np.asarray(enc.ids, np.uint16))
        return out


def token_stream(arrays: list[np.ndarray], eos_id: int) -> np.ndarray:
    """The arrays joined, each followed by ``eos_id`` (uint16)."""
    eos = np.array([eos_id], np.uint16)
    return np.concatenate([part for a in arrays for part in (a, eos)]) if arrays else \
        np.zeros(0, np.uint16)


def build(out_dir: Path, roots: dict[str, Path] | None = None, max_mb: float = 100,
          val_percent: float = 2, tokenizer: str = "bpe", vocab: int = 8192,
          bpe_train_mb: float = 8, tokenizer_json: Path | None = None,
          max_file_kb: int = 256, log: bool = True) -> dict:
    """Builds the dataset into ``out_dir`` and returns its metadata (see module doc)."""
    start = time.monotonic()
    roots = roots or default_roots()
    files = select_files(roots, int(max_mb * 2**20), max_file_kb)
    train = [f for f in files if not f.is_val(val_percent)]
    val = [f for f in files if f.is_val(val_percent)]
    if not train or not val:
        raise RuntimeError(f"too few files for a split: {len(train)} train, {len(val)} val")
    out_dir.mkdir(parents=True, exist_ok=True)
    list_hash = hashlib.sha256("\n".join(f.name for f in files).encode()).hexdigest()
    if log:
        print(f"data: {len(files)} files ({len(train)} train, {len(val)} val) "
              f"in {time.monotonic() - start:.1f} s", flush=True)
    if tokenizer == "byte":
        tok: ByteTokenizer | BpeTokenizer = ByteTokenizer()
    elif tokenizer == "bpe":
        from tokenizers import Tokenizer

        if tokenizer_json is not None:
            bpe = Tokenizer.from_file(str(tokenizer_json))
        else:
            budget, sample = int(bpe_train_mb * 2**20), []
            for f in train:
                if budget <= 0:
                    break
                sample.append(f.text)
                budget -= len(f.text.encode())
            bpe = train_bpe(sample, vocab)
        bpe.save(str(out_dir / "tokenizer.json"))
        tok = BpeTokenizer(bpe)
    else:
        raise ValueError(f"tokenizer must be 'bpe' or 'byte', got {tokenizer!r}")
    if tok.vocab_size > 65536:
        raise ValueError("token ids must fit uint16")
    streams = {}
    for split, split_files in (("train", train), ("val", val)):
        stream = token_stream(tok.encode_texts([f.text for f in split_files]), tok.eos_id)
        stream.tofile(out_dir / f"{split}.bin")
        streams[split] = stream
    meta = {
        "roots": {label: str(path) for label, path in roots.items()},
        "python": sys.version.split()[0],
        "files": len(files), "train_files": len(train), "val_files": len(val),
        "bytes": {"train": sum(len(f.text.encode()) for f in train),
                  "val": sum(len(f.text.encode()) for f in val)},
        "tokens": {split: int(s.size) for split, s in streams.items()},
        "tokenizer": tokenizer, "vocab_size": int(tok.vocab_size), "eos_id": int(tok.eos_id),
        "file_list_sha256": list_hash,
        "token_sha256": {split: hashlib.sha256(s.tobytes()).hexdigest()
                         for split, s in streams.items()},
        "tokenizer_sha256": (hashlib.sha256((out_dir / "tokenizer.json").read_bytes())
                             .hexdigest() if tokenizer == "bpe" else None),
        "settings": {"max_mb": max_mb, "val_percent": val_percent, "vocab": vocab,
                     "bpe_train_mb": bpe_train_mb, "max_file_kb": max_file_kb,
                     "tokenizer_json": str(tokenizer_json) if tokenizer_json else None},
        "build_s": round(time.monotonic() - start, 1),
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if log:
        print(f"data: {meta['tokens']['train']} train / {meta['tokens']['val']} val tokens, "
              f"vocab {meta['vocab_size']}, {meta['build_s']} s", flush=True)
    return meta


def load(data_dir: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(train, val, meta)`` of a built dataset (uint16 token arrays)."""
    meta = json.loads((data_dir / "meta.json").read_text())
    return (np.fromfile(data_dir / "train.bin", np.uint16),
            np.fromfile(data_dir / "val.bin", np.uint16), meta)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--max-mb", type=float, default=100)
    parser.add_argument("--val-percent", type=float, default=2)
    parser.add_argument("--tokenizer", choices=("bpe", "byte"), default="bpe")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--bpe-train-mb", type=float, default=8)
    parser.add_argument("--tokenizer-json", type=Path, default=None)
    parser.add_argument("--max-file-kb", type=int, default=256)
    args = parser.parse_args(argv)
    build(args.out_dir, max_mb=args.max_mb, val_percent=args.val_percent,
          tokenizer=args.tokenizer, vocab=args.vocab, bpe_train_mb=args.bpe_train_mb,
          tokenizer_json=args.tokenizer_json, max_file_kb=args.max_file_kb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
