"""Where a kernel's warps wait, from Nsight Compute's per-SASS-instruction samples.

Reads the source page that ``scripts/gpu/run.sh profile`` exports (``ncu
--page source --print-source sass --csv``: one block per profiled kernel,
each opened by a ``"Kernel Name",NAME`` line) and summarises each kernel:

* the stall reasons over all its samples and over its hot loop (the rows
  executed as often as most of the kernel's rows: a loop body's count);
* the hot loop split at its wgmma waits (``WARPGROUP.DEPBAR``): each
  segment's instructions, share of the samples, and share spent issuing
  ("selected"), so the waits and the work between them read side by side;
* the opcodes and the single instructions that hold the most samples.

Usage (``-`` for an output not wanted)::

    python3 bench/stall_profile.py OUT.json OUT.md --csv profile-d128-sass.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
WAIT_OPCODE = "WARPGROUP.DEPBAR"


def split_kernels(text: str) -> list[tuple[str, list[dict[str, str]]]]:
    """(kernel name, rows) per ``"Kernel Name"`` block of the export."""
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith('"Kernel Name"'):
            blocks.append((next(csv.reader([line]))[1], []))
        elif blocks:
            blocks[-1][1].append(line)
    return [(name, list(csv.DictReader(io.StringIO("\n".join(lines)))))
            for name, lines in blocks]


def number(row: dict[str, str], column: str) -> float:
    """A numeric cell (thousands separators allowed); 0 when empty or absent."""
    try:
        return float((row.get(column) or "0").replace(",", ""))
    except ValueError:
        return 0.0


#: Opcodes named with their first modifier (the family alone says little).
TWO_PART_OPCODES = ("WARPGROUP", "SYNCS")


def opcode(source: str) -> str:
    """The opcode of a SASS line, without its predicate and modifiers
    (``WARPGROUP.DEPBAR``, ``SYNCS.ARRIVE``: with the first)."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    if not words:
        return "?"
    parts = words[0].split(".")
    return ".".join(parts[:2]) if parts[0] in TWO_PART_OPCODES else parts[0]


def reasons(row: dict[str, str]) -> Counter[str]:
    """The row's samples by stall reason (``stall_*`` columns, all samples)."""
    return Counter({c[len("stall_"):]: number(row, c) for c in row
                    if c.startswith("stall_") and "Not Issued" not in c and number(row, c)})


def hot_loop(rows: list[dict[str, str]]) -> tuple[int, int]:
    """[first, last) row indices of the hot loop: from the first to the last
    row executed within 10% of the commonest execution count (two significant
    digits) among the executed rows."""
    counts = [number(r, EXECUTED) for r in rows]
    buckets = Counter(float(f"{c:.2g}") for c in counts if c > 0)
    if not buckets:
        return 0, 0
    mode = buckets.most_common(1)[0][0]
    inside = [i for i, c in enumerate(counts) if abs(c - mode) <= 0.1 * mode]
    return inside[0], inside[-1] + 1


def _shares(counter: Counter[str], total: float, top: int | None = None) -> dict[str, float]:
    """Percentages of ``total`` (one decimal; the ones that round to 0 left out)."""
    shares = {k: round(100 * v / total, 1) for k, v in counter.most_common(top) if total}
    return {k: v for k, v in shares.items() if v > 0}


def summarize(name: str, rows: list[dict[str, str]], top: int = 12) -> dict[str, Any]:
    """The summary of one kernel's rows (see the module docstring)."""
    total = sum(number(r, SAMPLES) for r in rows)
    first, last = hot_loop(rows)
    loop = rows[first:last]
    loop_samples = sum(number(r, SAMPLES) for r in loop)
    all_reasons: Counter[str] = Counter()
    loop_reasons: Counter[str] = Counter()
    for i, row in enumerate(rows):
        all_reasons.update(reasons(row))
        if first <= i < last:
            loop_reasons.update(reasons(row))
    segments, start = [], 0
    for i, row in enumerate(loop + [{}]):
        is_wait = bool(row) and opcode(row.get("Source", "")) == WAIT_OPCODE
        if row and not is_wait:
            continue
        if i > start:
            segments.append((start, i, False))
        if is_wait:
            segments.append((i, i + 1, True))
        start = i + 1
    segment_rows = [{
        "instructions": f"{a}-{b - 1}", "count": b - a, "wgmma_wait": wait,
        "first": loop[a].get("Source", "").strip()[:60],
        "samples_pct": round(100 * sum(number(r, SAMPLES) for r in loop[a:b]) / total, 1)
        if total else 0.0,
        "issuing_pct": round(100 * sum(reasons(r)["selected"] for r in loop[a:b]) / total, 1)
        if total else 0.0} for a, b, wait in segments]
    by_opcode: dict[str, Counter[str]] = {}
    counts: Counter[str] = Counter()
    for row in loop:
        op = opcode(row.get("Source", ""))
        counts[op] += 1
        by_opcode.setdefault(op, Counter()).update(reasons(row))
    opcode_rows = sorted(({"opcode": op, "count": counts[op],
                           "samples_pct": round(100 * sum(c.values()) / total, 1)
                           if total else 0.0,
                           "reasons": _shares(c, sum(c.values()), 3)}
                          for op, c in by_opcode.items()), key=lambda r: -r["samples_pct"])
    hottest = sorted(range(len(loop)), key=lambda i: -number(loop[i], SAMPLES))[:top]
    return {
        "kernel": name, "instructions": len(rows), "samples": total,
        "loop": {"rows": f"{first}-{last - 1}", "instructions": len(loop),
                 "samples_pct": round(100 * loop_samples / total, 1) if total else 0.0,
                 "executions": number(loop[0], EXECUTED) if loop else 0.0},
        "reasons_pct": _shares(all_reasons, sum(all_reasons.values())),
        "loop_reasons_pct": _shares(loop_reasons, sum(loop_reasons.values())),
        "segments": segment_rows, "opcodes": opcode_rows[:top],
        "hottest": [{"index": i, "source": loop[i].get("Source", "").strip()[:70],
                     "samples_pct": round(100 * number(loop[i], SAMPLES) / total, 2),
                     "reasons": _shares(reasons(loop[i]), number(loop[i], SAMPLES), 3)}
                    for i in hottest],
    }


def _reason_text(shares: dict[str, float]) -> str:
    return ", ".join(f"{k} {v}%" for k, v in shares.items())


def markdown(summaries: Iterable[dict[str, Any]]) -> str:
    """The summaries as markdown sections, one per kernel."""
    out = []
    for s in summaries:
        loop = s["loop"]
        out += [f"## {s['kernel']}", "",
                f"{s['instructions']} SASS instructions, {int(s['samples'])} samples; hot loop: "
                f"rows {loop['rows']} ({loop['instructions']} instructions, executed "
                f"{int(loop['executions'])} times), {loop['samples_pct']}% of the samples.", "",
                f"- stall reasons, all samples: {_reason_text(s['reasons_pct'])}",
                f"- stall reasons, hot loop: {_reason_text(s['loop_reasons_pct'])}", "",
                "Hot loop by segment between wgmma waits (% of all samples):", "",
                common.markdown_table(
                    ["rows", "instructions", "first instruction", "samples %", "issuing %"],
                    [[g["instructions"], g["count"],
                      ("**wait** " if g["wgmma_wait"] else "") + g["first"],
                      g["samples_pct"], g["issuing_pct"]] for g in s["segments"]],
                    right=[False, True, False, True, True]), "",
                "Opcodes of the hot loop:", "",
                common.markdown_table(["opcode", "count", "samples %", "top reasons"],
                                      [[o["opcode"], o["count"], o["samples_pct"],
                                        _reason_text(o["reasons"])] for o in s["opcodes"]],
                                      right=[False, True, True, False]), "",
                "Hottest instructions of the hot loop:", "",
                common.markdown_table(["row", "instruction", "samples %", "top reasons"],
                                      [[h["index"], h["source"], h["samples_pct"],
                                        _reason_text(h["reasons"])] for h in s["hottest"]],
                                      right=[True, False, True, False]),
                ""]
    return "\n".join(out)


def _output(path: str) -> Path | None:
    """An output path; ``-`` for none."""
    return None if path == "-" else Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=_output, nargs="?",
                        help="where the JSON summary goes ('-': nowhere)")
    parser.add_argument("markdown", type=_output, nargs="?",
                        help="where the markdown goes (default or '-': printed)")
    parser.add_argument("--csv", type=Path, required=True, nargs="+",
                        help="ncu source-page exports (--page source --print-source sass --csv)")
    parser.add_argument("--kernel", default=None, help="only kernels whose name contains this")
    parser.add_argument("--top", type=int, default=12, help="rows of the opcode and hot tables")
    args = parser.parse_args(argv)
    summaries = [summarize(name, rows, args.top) for path in args.csv
                 for name, rows in split_kernels(path.read_text(errors="replace"))
                 if args.kernel is None or args.kernel in name]
    if not summaries:
        parser.error("no kernel in the export" + (f" matches {args.kernel!r}"
                                                  if args.kernel else ""))
    text = markdown(summaries)
    common.write_outputs(args.json, args.markdown, {"kernels": summaries}, text)
    if args.markdown is None:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
