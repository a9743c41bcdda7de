"""SASS census: what the SageBwd kernels execute, instruction by instruction.

Traces each SageBwd kernel variant, compiles it to PTX with the compiler
library (as ``python/test/test_sagebwd_compile.py`` does, no GPU needed),
assembles the PTX with ``ptxas -arch=sm_90a -v`` and disassembles the cubin
with ``cuobjdump -sass`` (else ``nvdisasm``). Per kernel it counts the
instructions of interest (MUFU by sub-op, conversions, PRMT, FP32 arithmetic,
shared / local memory, barriers, shuffles, tensor-core ops):

* in the whole kernel (static count: every instruction once);
* in the loop body: the innermost natural loops of the SASS control-flow
  graph, found from its back edges (see :func:`find_loops`), less the
  *wait loops* (loops that only poll a barrier or a flag) and the *lane
  loops* (ptxas's loops that issue a TMA copy once per active lane);
* per element: loop-body count x threads per program / elements per
  iteration (:data:`ELEMENTS`; for the attention kernels BLOCK_M x BLOCK_N
  score elements), i.e. thread-instructions per element;
* where the loop body's MUFU.EX2 fall (:func:`exponential_schedule`): how
  many follow another right away, and how soon each result is read.

Usage::

    python3 bench/sass_census.py OUT.json OUT.md                 # the SageBwd set
    python3 bench/sass_census.py OUT.json OUT.md --d 128 --kernels forward
    python3 bench/sass_census.py OUT.json OUT.md --ptx a.ptx b.ptx   # any sage PTX
    python3 bench/sass_census.py OUT.json OUT.md --sass-dir /tmp/sass  # keep the SASS

The parsing functions (:func:`parse_sass`, :func:`find_loops`,
:func:`count_opcodes`, :func:`parse_ptxas_log`) need no toolkit and are
tested on a hand-written snippet (``python/test/test_sass_census.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.add_python_path()

# ---------------------------------------------------------------------------
# SASS text -> functions of instructions

#: ``/*0180*/  @!P0 BRA `(.L_x_0) ;`` (nvdisasm) or ``/*0180*/ @P0 BRA 0xb0 ;``
#: (cuobjdump, which appends the encoding as ``/* 0x... */`` after the ``;``).
_INSTRUCTION = re.compile(r"^\s*/\*(?P<address>[0-9a-fA-F]{4,})\*/\s*(?P<text>[^;]*?)\s*;")
_PREDICATE = re.compile(r"^@!?U?P(?:T|\d+)\s+")
#: nvdisasm: ``.section .text.NAME,"ax",@progbits``; cuobjdump: ``Function : NAME``.
_FUNCTION = re.compile(r"^\s*(?:\.section\s+\.text\.(?P<nv>[^\s,]+)\s*,"
                       r"|Function\s*:\s*(?P<cu>\S+))")
_LABEL = re.compile(r"^\s*(?P<label>[.$\w][\w.$]*):\s*$")
#: A branch target: a label as nvdisasm writes it, or an absolute address.
_LABEL_TARGET = re.compile(r"`\((?P<label>[^)]+)\)")
_ADDRESS_TARGET = re.compile(r"(?:^|[\s,])(?P<address>0x[0-9a-fA-F]+)\s*$")

#: Opcodes whose target is a code address in the same function (loops are
#: made of these); CALL/RET/BRX/JMX are not followed.
BRANCHES = ("BRA", "JMP")
#: Opcodes after which control never falls through when unpredicated.
TERMINATORS = ("BRA", "JMP", "EXIT", "RET", "BRX", "JMX", "KILL")


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction.

    ``opcode`` is the whole mnemonic with its modifiers (``MUFU.EX2``,
    ``F2I.S32.TRUNC``); ``target`` the resolved branch target address, if any.
    """

    address: int
    opcode: str
    operands: str = ""
    predicate: str = ""
    target: int | None = None

    @property
    def base(self) -> str:
        """The opcode without modifiers: ``MUFU`` for ``MUFU.EX2``."""
        return self.opcode.split(".", 1)[0]

    @property
    def is_branch(self) -> bool:
        """A direct branch inside the function (BRA, JMP) with a known target."""
        return self.base in BRANCHES and self.target is not None


@dataclass
class SassFunction:
    """The instructions of one kernel (or device function), in address order."""

    name: str
    instructions: list[Instruction] = field(default_factory=list)


def split_instruction(text: str) -> tuple[str, str, str]:
    """``"@!P0 MUFU.EX2 R1, R2"`` -> ``("@!P0", "MUFU.EX2", "R1, R2")``."""
    predicate = ""
    match = _PREDICATE.match(text)
    if match:
        predicate, text = match.group(0).strip(), text[match.end():]
    opcode, _, operands = text.partition(" ")
    return predicate, opcode, operands.strip()


def parse_sass(text: str) -> list[SassFunction]:
    """The functions of a ``cuobjdump -sass`` or ``nvdisasm`` listing.

    Branch targets are resolved to addresses: nvdisasm's ``(.L_x_3)`` labels
    through the labels of the same function, cuobjdump's absolute ``0x1a0``
    directly.
    """
    functions: list[SassFunction] = []
    pending: list[tuple[int, str, str, str, str | None]] = []
    labels: dict[str, int] = {}
    waiting: list[str] = []  # labels seen before their instruction

    def close() -> None:
        if not functions:
            return
        for address, predicate, opcode, operands, label in pending:
            target = labels.get(label) if label else None
            if target is None and label is None and opcode.split(".")[0] in BRANCHES:
                found = _ADDRESS_TARGET.search(operands)
                target = int(found["address"], 16) if found else None
            functions[-1].instructions.append(
                Instruction(address, opcode, operands, predicate, target))
        pending.clear()
        labels.clear()
        waiting.clear()

    for line in text.splitlines():
        function = _FUNCTION.match(line)
        if function:
            close()
            functions.append(SassFunction(function["nv"] or function["cu"]))
            continue
        if not functions:
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction:
            address = int(instruction["address"], 16)
            for label in waiting:
                labels[label] = address
            waiting.clear()
            predicate, opcode, operands = split_instruction(instruction["text"])
            target = _LABEL_TARGET.search(operands)
            pending.append((address, predicate, opcode, operands,
                            target["label"] if target else None))
            continue
        label = _LABEL.match(line)
        if label:
            waiting.append(label["label"])
    close()
    return functions


# ---------------------------------------------------------------------------
# Loops: natural loops of the control-flow graph, from its back edges


@dataclass(frozen=True)
class Loop:
    """A natural loop: ``header`` (its first instruction's address), the back
    edges into it (addresses of the branches), and the addresses of every
    instruction of its body (blocks that reach a back edge without passing
    the header, plus the header)."""

    header: int
    back_edges: tuple[int, ...]
    addresses: frozenset[int]
    wait_loop: bool = False
    lane_loop: bool = False

    @property
    def size(self) -> int:
        """Instructions in the body."""
        return len(self.addresses)

    @property
    def set_aside(self) -> bool:
        """A wait loop or a lane loop: no work of its own (see :func:`work_loops`)."""
        return self.wait_loop or self.lane_loop


#: Instructions a wait loop may consist of: polling an mbarrier or a flag,
#: backing off, and the branch (a loop of only these does no work). ptxas
#: moves the phase into a register with MOV or with IMAD (``IMAD.U32 R0, RZ,
#: RZ, UR4``).
WAIT_OPCODES = ("SYNCS", "NANOSLEEP", "YIELD", "BRA", "NOP", "WARPSYNC", "LD", "LDG",
                "ISETP", "ULDC", "MOV", "IMAD", "IADD3", "PLOP3", "BSSY", "BSYNC", "R2UR")


#: Instructions a lane loop may consist of besides the uniform-datapath ones (``U*``:
#: UTMALDG, UTMASTG, UBLKCP, UMOV...): electing the lane, retiring it, the branch.
LANE_OPCODES = ("ELECT", "PLOP3", "VOTEU", "VOTE", "BRA", "NOP", "WARPSYNC", "R2UR", "MOV",
                "ISETP", "BSSY", "BSYNC")


def basic_blocks(instructions: Sequence[Instruction]) -> list[list[Instruction]]:
    """Splits ``instructions`` (address order) into basic blocks: a block starts at
    the first instruction, at a branch target, and after a branch or terminator."""
    targets = {i.target for i in instructions if i.is_branch}
    blocks: list[list[Instruction]] = []
    for index, instruction in enumerate(instructions):
        previous = instructions[index - 1] if index else None
        starts = (not blocks or instruction.address in targets
                  or previous.is_branch or previous.base in TERMINATORS)
        if starts:
            blocks.append([])
        blocks[-1].append(instruction)
    return blocks


def successors(blocks: Sequence[Sequence[Instruction]]) -> list[list[int]]:
    """The successor block indices of every block: the branch target and, unless
    the last instruction is an unpredicated terminator, the next block."""
    index_of = {block[0].address: n for n, block in enumerate(blocks)}
    edges: list[list[int]] = []
    for n, block in enumerate(blocks):
        last, out = block[-1], []
        if last.is_branch and last.target in index_of:
            out.append(index_of[last.target])
        unconditional = last.base in TERMINATORS and last.predicate in ("", "@PT")
        if not unconditional and n + 1 < len(blocks):
            out.append(n + 1)
        edges.append(out)
    return edges


def dominators(edges: Sequence[Sequence[int]]) -> list[set[int]]:
    """The dominator set of every block (block 0 is the entry); blocks not
    reachable from the entry get every block (:func:`find_loops` skips them)."""
    count = len(edges)
    preds: list[list[int]] = [[] for _ in range(count)]
    for n, out in enumerate(edges):
        for m in out:
            preds[m].append(n)
    everything = set(range(count))
    dom = [everything.copy() for _ in range(count)]
    if count:
        dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for n in range(1, count):
            incoming = [dom[p] for p in preds[n]]
            new = (set.intersection(*incoming) if incoming else everything.copy()) | {n}
            if new != dom[n]:
                dom[n], changed = new, True
    return dom


def reachable_blocks(edges: Sequence[Sequence[int]]) -> set[int]:
    """The blocks reachable from block 0 (the padding after the ``BRA self``
    trap, for one, is not)."""
    seen: set[int] = set()
    stack = [0] if edges else []
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(edges[n])
    return seen


def is_wait_loop(instructions: Iterable[Instruction]) -> bool:
    """Whether a loop body only polls (every opcode's base is in :data:`WAIT_OPCODES`
    and it has a SYNCS poll or a NANOSLEEP/YIELD back-off)."""
    bases = {i.base for i in instructions}
    return bases <= set(WAIT_OPCODES) and bool(bases & {"SYNCS", "NANOSLEEP", "YIELD"})


def is_lane_loop(instructions: Iterable[Instruction], back_edges: Iterable[Instruction]) -> bool:
    """Whether a loop is ptxas's per-lane issue loop around a uniform-datapath
    instruction that PTX issues per thread (``cp.async.bulk.tensor`` -> UTMALDG)::

        .L_x_21:  @P1 ELECT P0, URZ, PT           # one of the lanes still pending
                  @!UP1 UTMALDG.3D [UR8], [UR34]  # its copy
                  @P0 PLOP3.LUT P1, ...           # it is done
                  PLOP3.LUT P0, ...
                  @P1 BRA.U.ANY `(.L_x_21)        # again while any lane is pending

    It runs once per active lane (once where one thread issues the copy), not
    once per unit of work: it has an ELECT, every back edge is a ``.ANY`` branch,
    and every opcode is uniform-datapath (``U*``) or in :data:`LANE_OPCODES`.
    """
    bases = {i.base for i in instructions}
    return ("ELECT" in bases
            and all(".ANY" in i.opcode for i in back_edges)
            and all(b in LANE_OPCODES or b.startswith("U") for b in bases))


def find_loops(function: SassFunction) -> list[Loop]:
    """The natural loops of ``function``, one per header, outermost first.

    A back edge is a branch (BRA/JMP) from block u to block h where h dominates
    u; in address terms it is a backward branch (target <= branch) that the
    CFG confirms, which rules out the jumps back from out-of-line blocks
    (slow paths after EXIT) and the ``BRA self`` trap at the end. The body
    is h plus every block that reaches u without passing h, so out-of-line
    blocks the loop jumps to and back from belong to it.
    """
    instructions = function.instructions
    blocks = basic_blocks(instructions)
    edges = successors(blocks)
    dom = dominators(edges)
    preds: list[list[int]] = [[] for _ in blocks]
    for n, out in enumerate(edges):
        for m in out:
            preds[m].append(n)
    reachable = reachable_blocks(edges)
    bodies: dict[int, set[int]] = {}
    back: dict[int, list[int]] = {}
    for u, out in enumerate(edges):
        last = blocks[u][-1]
        for h in out:
            if (u in reachable and h in dom[u] and last.is_branch
                    and last.target == blocks[h][0].address):
                body = bodies.setdefault(h, {h})
                back.setdefault(h, []).append(last.address)
                stack = [u]
                while stack:
                    n = stack.pop()
                    if n not in body:
                        body.add(n)
                        stack.extend(preds[n])
    by_address = {i.address: i for i in instructions}
    loops = []
    for h, body in bodies.items():
        members = [i for n in sorted(body) for i in blocks[n]]
        loops.append(Loop(blocks[h][0].address, tuple(sorted(back[h])),
                          frozenset(i.address for i in members), is_wait_loop(members),
                          is_lane_loop(members, [by_address[a] for a in back[h]])))
    return sorted(loops, key=lambda loop: (-loop.size, loop.header))


def work_loops(loops: Sequence[Loop]) -> list[Loop]:
    """The innermost loops that are neither wait loops nor lane loops: the
    candidates for the census's loop body (:func:`census_function` takes the
    smallest: the steady state).

    A loop is innermost when no other such loop lies inside it (a wait loop or
    a lane loop nested in the main loop, e.g. an mbarrier retry or a TMA
    copy's issue loop, leaves it innermost).
    """
    work = [loop for loop in loops if not loop.set_aside]
    return [loop for loop in work
            if not any(other is not loop and other.addresses < loop.addresses
                       for other in work)]


def local_memory_in_loops(sass: str) -> int:
    """LDL/STL instructions inside the work loops of every function in
    ``sass`` (spills that cost every trip; those outside cost once)."""
    count = 0
    for function in parse_sass(sass):
        by_address = {i.address: i for i in function.instructions}
        for loop in work_loops(find_loops(function)):
            count += sum(by_address[a].base in ("LDL", "STL") for a in loop.addresses)
    return count


# ---------------------------------------------------------------------------
# Counting

#: The census columns: name -> opcode bases counted in it.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "MUFU": ("MUFU",), "F2I": ("F2I", "F2IP"), "I2F": ("I2F", "I2FP"),
    "F2F": ("F2F", "F2FP"), "PRMT": ("PRMT",), "FFMA": ("FFMA",), "FMUL": ("FMUL",),
    "FADD": ("FADD",), "FMNMX": ("FMNMX",), "STS": ("STS",), "LDS": ("LDS",),
    "LDSM": ("LDSM",), "STSM": ("STSM",), "LDL": ("LDL",), "STL": ("STL",),
    "LDG": ("LDG",), "STG": ("STG",), "RED": ("RED", "REDG", "ATOMG", "ATOM"),
    "BAR": ("BAR",), "SHFL": ("SHFL",), "HMMA": ("HMMA",), "IMMA": ("IMMA",),
    "HGMMA": ("HGMMA",), "IGMMA": ("IGMMA",), "QGMMA": ("QGMMA",),
}
#: Columns of the markdown tables (the JSON has every category and opcode).
TABLE_COLUMNS = ("MUFU", "F2I", "I2F", "PRMT", "FFMA", "FMUL", "FADD", "STS", "LDS", "LDSM",
                 "STSM", "LDL", "STL", "BAR", "SHFL", "HGMMA", "IGMMA", "IMMA", "HMMA")


def count_opcodes(instructions: Iterable[Instruction]) -> Counter[str]:
    """How many times each full opcode (``MUFU.EX2``, ``FFMA.FTZ``) occurs."""
    return Counter(i.opcode for i in instructions)


#: Opcodes whose operands are all read (no destination register first).
_NO_DESTINATION = ("ST", "STS", "STG", "STL", "RED", "REDG", "ATOMG", "BAR", "BRA", "SYNCS",
                   "WARPGROUP", "EXIT", "RET")


def _reads(instruction: Instruction, register: re.Pattern[str]) -> bool:
    """Whether ``instruction`` reads the register ``register`` matches (see
    :func:`exponential_schedule`) as a source: any operand but a
    destination's first (wide and vector operands that name only their
    first register are not seen)."""
    operands = instruction.operands.split(",")
    if instruction.base not in _NO_DESTINATION:
        operands = operands[1:]
    return any(register.search(op) for op in operands) or bool(
        register.search(instruction.predicate))


def exponential_schedule(body: Sequence[Instruction]) -> dict[str, float | int] | None:
    """Where a loop body's MUFU.EX2 fall, in address order: how many there
    are, how many follow another right away, and how many instructions
    later each one's result is first read (mean and least), or None
    without any. Across six schedules of the D = 64 SageBwd forward's
    loop these two told the fast ones from the slow ones
    (bench/results/2026-11-28-h100-d64-bounds-and-schedule.md): a
    hypothesis each census can check."""
    where = [k for k, i in enumerate(body) if i.opcode.startswith("MUFU.EX2")]
    if not where:
        return None
    distances = []
    for k in where:
        dest = re.match(r"\s*(R\d+)", body[k].operands)
        if dest is None:
            continue
        register = re.compile(r"(?<![\w.])" + dest[1] + r"(?!\d)")  # R1, not R10
        later = next((j - k for j in range(k + 1, len(body)) if _reads(body[j], register)), None)
        if later is not None:
            distances.append(later)
    return {"count": len(where),
            "back_to_back": sum(1 for a, b in zip(where, where[1:]) if b == a + 1),
            "first_read_mean": round(sum(distances) / len(distances), 1) if distances else None,
            "first_read_min": min(distances) if distances else None}


def categorize(opcodes: Counter[str]) -> dict[str, int]:
    """:data:`CATEGORIES` counts, plus ``MUFU.<sub-op>`` (``MUFU.EX2``, ``MUFU.RCP``...),
    plus ``total``."""
    by_base: Counter[str] = Counter()
    mufu: Counter[str] = Counter()
    for opcode, n in opcodes.items():
        base = opcode.split(".", 1)[0]
        by_base[base] += n
        if base == "MUFU":
            mufu["MUFU." + opcode.split(".")[1] if "." in opcode else "MUFU.?"] += n
    counts = {name: sum(by_base[b] for b in bases) for name, bases in CATEGORIES.items()}
    counts.update(sorted(mufu.items()))
    counts["total"] = sum(opcodes.values())
    return counts


# ---------------------------------------------------------------------------
# ptxas -v

_PTXAS_FUNCTION = re.compile(r"Function properties for (\S+)")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                          r"(\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?"
                         r"(?:, (\d+) bytes smem)?")


def parse_ptxas_log(log: str) -> dict[str, dict[str, int]]:
    """Per function of a ``ptxas -v`` log: registers, barriers, static shared
    memory (``smem``, bytes), stack frame and spill store / load bytes."""
    result: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        function = _PTXAS_FUNCTION.search(line)
        if function:
            current = result.setdefault(function[1], {})
            continue
        if current is None:
            continue
        frame = _PTXAS_FRAME.search(line)
        if frame:
            current.update(stack=int(frame[1]), spill_stores=int(frame[2]),
                           spill_loads=int(frame[3]))
        used = _PTXAS_USED.search(line)
        if used:
            current.update(registers=int(used[1]), barriers=int(used[2] or 0),
                           smem=int(used[3] or 0))
    return result


# ---------------------------------------------------------------------------
# Tools: ptxas, the disassembler


@dataclass(frozen=True)
class Tool:
    """An external program: ``kind`` (ptxas, cuobjdump, nvdisasm), path, version line."""

    kind: str
    path: str
    version: str


def tool_version(path: str) -> str:
    """The last line of ``PATH --version`` (``Cuda compilation tools, release ...``)."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-2] if lines and lines[-1].startswith("Build") and len(lines) > 1 \
        else (lines[-1] if lines else "?")


def pip_nvdisasm() -> str | None:
    """The nvdisasm of the ``nvidia-cuda-nvdisasm`` pip package (``nvidia/cu*/bin``), if installed."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for found in sorted(Path(root).glob("cu*/bin/nvdisasm")) + \
                sorted(Path(root).glob("cuda_nvdisasm/bin/nvdisasm")):
            if os.access(found, os.X_OK):
                return str(found)
    return None


def find_disassembler(choice: str = "auto") -> Tool | None:
    """``cuobjdump`` if present (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin), else
    ``nvdisasm`` (same places, then the pip package); ``choice`` is "auto",
    "cuobjdump", "nvdisasm" or a path to either. None when none is found."""
    if choice not in ("auto", "cuobjdump", "nvdisasm"):
        kind = "cuobjdump" if "cuobjdump" in Path(choice).name else "nvdisasm"
        return Tool(kind, choice, tool_version(choice))
    cuda = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    for kind in ("cuobjdump", "nvdisasm"):
        if choice not in ("auto", kind):
            continue
        candidates = [shutil.which(kind)] + [str(Path(c) / "bin" / kind) for c in cuda if c]
        if kind == "nvdisasm":
            candidates.append(pip_nvdisasm())
        for path in candidates:
            if path and os.access(path, os.X_OK) and Path(path).is_file():
                return Tool(kind, path, tool_version(path))
    return None


def find_ptxas(choice: str | None = None) -> Tool:
    """``choice``, else the ptxas the compiler library runs (``$SAGE_PTXAS``, PATH,
    $CUDA_HOME/bin, /usr/local/cuda/bin), else (no library, ``--ptx`` files)
    ptxas on PATH or in /usr/local/cuda/bin.

    Raises:
        FileNotFoundError: no ptxas.
    """
    if choice is None:
        from sage.compiler import CompilerLibrary  # noqa: PLC0415
        try:
            found = CompilerLibrary().find_ptxas()
        except (FileNotFoundError, ImportError):
            found = shutil.which("ptxas") or next(
                (p for p in ["/usr/local/cuda/bin/ptxas"] if os.access(p, os.X_OK)), None)
        if found is None:
            raise FileNotFoundError("no ptxas: install the CUDA toolkit or set SAGE_PTXAS")
        choice = str(found)
    return Tool("ptxas", choice, tool_version(choice))


def assemble(ptx: str, ptxas: Tool, workdir: Path, stem: str,
             arch: str = "sm_90a") -> tuple[Path, str]:
    """``ptxas -arch=ARCH -v``: the cubin's path and the -v log.

    Raises:
        RuntimeError: ptxas failed (with its log).
    """
    source, cubin = workdir / f"{stem}.ptx", workdir / f"{stem}.cubin"
    source.write_text(ptx)
    out = subprocess.run([ptxas.path, f"-arch={arch}", "-v", str(source), "-o", str(cubin)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(f"ptxas failed on {stem}:\n{out.stderr}")
    return cubin, out.stderr + out.stdout


def disassemble(cubin: Path, tool: Tool) -> str:
    """The SASS listing of ``cubin``: ``cuobjdump -sass`` or ``nvdisasm`` (labels
    for branch targets, no encodings)."""
    args = [tool.path, "-sass", str(cubin)] if tool.kind == "cuobjdump" else \
        [tool.path, str(cubin)]
    return subprocess.run(args, capture_output=True, text=True, check=True,
                          timeout=300).stdout


# ---------------------------------------------------------------------------
# The SageBwd variants


@dataclass(frozen=True)
class Elements:
    """Elements one program processes per loop iteration (or per launch, for a
    loop-free kernel), as a formula of the constexprs, and what they are."""

    formula: str
    what: str
    per_iteration: bool = True

    def value(self, constexprs: dict[str, Any]) -> int:
        """The formula evaluated on the kernel's constexprs (D, BLOCK_M, BLOCK_N)."""
        return int(eval(self.formula, {}, dict(constexprs)))  # noqa: S307 (our own table)


#: Per kernel: what "per element" divides by.
ELEMENTS: dict[str, Elements] = {
    "sagebwd_forward": Elements("BLOCK_M * BLOCK_N", "score elements (S, P tile) per key block"),
    "sagebwd_backward": Elements("BLOCK_M * BLOCK_N",
                                 "score elements (S, P, dP, dS tile) per query block"),
    # 8 = 2 * prepass.STATS_TILES: the statistics loop (the smaller) adds 4
    # tiles of K and 4 of V a trip; the quantization loop takes 3 blocks.
    "quantize_kv_kernel": Elements("8 * BLOCK_N * D",
                                   "K and V elements per trip of its smallest loop (the "
                                   "statistics': 4 tiles of each a trip; the quantization's "
                                   "takes 3 blocks a trip)"),
    "sagebwd_backward_prepass": Elements("BLOCK_M * D",
                                         "dO (and O) elements per program (no loop)", False),
}

#: The order kernels run in (pre-pass, forward, backward pre-pass, backward).
KERNEL_ORDER = ("quantize_kv_kernel", "sagebwd_forward",
                "sagebwd_backward_prepass", "sagebwd_backward")


@dataclass(frozen=True)
class Variant:
    """One kernel as ``bench/attention_speed.py`` runs it: bf16, default tiles,
    scales="fine", smooth_k on, smooth_q off."""

    kernel: str
    d: int
    causal: bool = False

    @property
    def name(self) -> str:
        """E.g. ``sagebwd_forward-d128-causal``."""
        causal = "-causal" if self.causal else ""
        return f"{self.kernel}-d{self.d}{causal}"


def sagebwd_variants(dims: Sequence[int] = (64, 128)) -> list[Variant]:
    """Every kernel at every D; the forward and the backward also causal."""
    from sage.kernels.sagebwd.launch import FLAGS  # noqa: PLC0415

    return [Variant(kernel, d, causal) for d in dims for kernel in KERNEL_ORDER
            for causal in ((False, True) if "causal" in FLAGS[kernel] else (False,))]


def variant_ptx(variant: Variant, library: Any) -> tuple[str, dict[str, Any]]:
    """The variant's PTX (traced with sl.trace and compiled by the compiler library,
    as the JIT does) and its constexprs."""
    import sage.language as sl  # noqa: PLC0415
    from sage.kernels.sagebwd.launch import (KERNELS, Shape, arg_specs,  # noqa: PLC0415
                                             constexprs, default_tiles)

    shape = Shape(4, 32, 32, 4096, 4096, variant.d)
    tiles = default_tiles(variant.d, causal=variant.causal, n_kv=shape.n_kv)
    consts = constexprs(variant.kernel, shape, tiles, causal=variant.causal, smooth_k=True,
                        smooth_q=False, fine_scales=True)
    text = sl.trace(KERNELS[variant.kernel], arg_specs(variant.kernel, sl.bfloat16),
                    consts, arch="sm_90a",
                    **tiles.options(variant.kernel, fine_scales=True, smooth_q=False,
                                    shape=shape))
    return library.compile(text, arch="sm_90a"), consts


# ---------------------------------------------------------------------------
# One census


def census_ptx(ptx: str, name: str, ptxas: Tool, disassembler: Tool, workdir: Path,
               constexprs: dict[str, Any] | None = None,
               sass_dir: Path | None = None) -> dict[str, Any]:
    """Assembles, disassembles and counts the kernels of one sage PTX module.

    Returns one record per kernel (usually one) under ``kernels``.
    """
    from sage.runtime.ptx import parse_kernel_header  # noqa: PLC0415

    headers = parse_kernel_header(ptx)
    cubin, log = assemble(ptx, ptxas, workdir, name)
    sass = disassemble(cubin, disassembler)
    if sass_dir is not None:
        sass_dir.mkdir(parents=True, exist_ok=True)
        (sass_dir / f"{name}.sass").write_text(sass)
    resources = parse_ptxas_log(log)
    records = []
    for function in parse_sass(sass):
        if function.name not in headers:
            continue
        records.append(census_function(function, headers[function.name].threads,
                                       headers[function.name].shared_memory,
                                       resources.get(function.name, {}), constexprs))
    return {"name": name, "kernels": records}


def census_function(function: SassFunction, threads: int, dynamic_smem: int,
                    resources: dict[str, int],
                    constexprs: dict[str, Any] | None) -> dict[str, Any]:
    """The census record of one kernel: resources, loops, counts (whole, loop
    body, per element)."""
    loops = find_loops(function)
    work = work_loops(loops)
    # Several disjoint work loops (the SageBwd forward's mask-free key loop
    # and its masked loop, which runs the key tail or the causal diagonal
    # once or twice a program): the body is the smallest, the steady state.
    main = min(work, key=lambda loop: loop.size) if work else None
    body = main.addresses if main is not None else frozenset()
    whole = categorize(count_opcodes(function.instructions))
    loop_counts = categorize(count_opcodes(i for i in function.instructions
                                           if i.address in body)) if work else None
    record: dict[str, Any] = {
        "kernel": function.name, "threads": threads, "dynamic_smem": dynamic_smem,
        **{k: resources.get(k) for k in ("registers", "spill_stores", "spill_loads", "stack",
                                         "smem", "barriers")},
        "instructions": len(function.instructions),
        "loops": [{"header": hex(loop.header), "back_edges": [hex(a) for a in loop.back_edges],
                   "instructions": loop.size, "wait_loop": loop.wait_loop,
                   "lane_loop": loop.lane_loop, "work_loop": loop in work,
                   "in_body": loop is main} for loop in loops],
        "whole": whole, "loop_body": loop_counts,
        "exponentials": exponential_schedule([i for i in function.instructions
                                              if i.address in body]) if work else None,
        "opcodes_whole": dict(sorted(count_opcodes(function.instructions).items())),
    }
    spec = ELEMENTS.get(function.name)
    if spec is not None and constexprs is not None:
        elements = spec.value(constexprs)
        source = loop_counts if spec.per_iteration else whole
        record["per_element"] = None if source is None else \
            {k: v * threads / elements for k, v in source.items()}
        record["per_element_formula"] = (
            f"{'loop-body' if spec.per_iteration else 'whole-kernel'} count x {threads} "
            f"threads / ({spec.formula} = {elements}) {spec.what}")
    return record


# ---------------------------------------------------------------------------
# Report


def _number(value: float | int) -> str:
    """A count: integers as they are, per-element floats with 3 significant digits."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return str(int(value))


def _mufu_text(counts: dict[str, Any]) -> str:
    parts = [f"{k.split('.', 1)[1]} {_number(v)}" for k, v in counts.items()
             if k.startswith("MUFU.") and v]
    return ", ".join(parts) or "-"


def _row(label: str, counts: dict[str, Any] | None) -> list[str]:
    if counts is None:
        return [label, "-", "-"] + ["-"] * len(TABLE_COLUMNS)
    return [label, _number(counts["total"]), _mufu_text(counts)] + \
        [_number(counts[c]) for c in TABLE_COLUMNS]


def markdown_report(results: dict[str, Any]) -> str:
    """The census as markdown: tools, resources and loops, then the loop-body,
    per-element and whole-kernel counts (one row per kernel variant)."""
    meta = results["environment"]
    lines = ["# SASS census", "",
             f"- date: {meta['date_utc']}; host: {meta['host']}; commit: {meta['commit']}",
             f"- command: `{results['command']}`",
             f"- ptxas: {results['ptxas']['path']} ({results['ptxas']['version']}), "
             "`-arch=sm_90a -v`",
             f"- disassembler: {results['disassembler']['kind']} "
             f"{results['disassembler']['path']} ({results['disassembler']['version']})",
             "- compiler library: " + ("{path} ({version})".format(**results["compiler_library"])
                                       if results["compiler_library"] else "-"),
             f"- variants: {results['variants']}", "",
             "Loops: " + LOOP_METHOD, "", "Per element: " + PER_ELEMENT_METHOD, ""]
    rows = results["rows"]
    lines += ["## Resources and loops", "", common.markdown_table(
        ["variant", "regs", "spill st/ld B", "stack B", "smem B (static + dynamic)", "instrs",
         "loops (work / all)", "loop-body instrs", "per-element formula"],
        [[r["variant"], r.get("registers"), f"{r.get('spill_stores')}/{r.get('spill_loads')}",
          r.get("stack"), f"{r.get('smem')} + {r.get('dynamic_smem')}", r["instructions"],
          f"{sum(loop['work_loop'] for loop in r['loops'])} / {len(r['loops'])}",
          r["loop_body"]["total"] if r["loop_body"] else "-",
          r.get("per_element_formula", "-")] for r in rows],
        right=[False, True, True, True, True, True, True, True, False]), ""]
    headers = ["variant", "total", "MUFU sub-ops"] + list(TABLE_COLUMNS)
    for title, key in (("Loop body (static count, instructions per warp per iteration)",
                        "loop_body"),
                       ("Per element (thread-instructions per element)", "per_element"),
                       ("Whole kernel (static count)", "whole")):
        lines += [f"## {title}", "",
                  common.markdown_table(headers, [_row(r["variant"], r.get(key)) for r in rows]),
                  ""]
    schedules = [(r["variant"], r["exponentials"]) for r in rows if r.get("exponentials")]
    if schedules:
        lines += ["## Exponentials in the loop body", "",
                  "MUFU.EX2 in address order: how many follow another right away, and how "
                  "many instructions later each result is first read (`exponential_schedule`).",
                  "", common.markdown_table(
                      ["variant", "MUFU.EX2", "right after another", "first read: mean",
                       "least"],
                      [[v, e["count"], e["back_to_back"], e["first_read_mean"],
                        e["first_read_min"]] for v, e in schedules],
                      right=[False, True, True, True, True]), ""]
    if results.get("errors"):
        lines += ["## Errors", ""] + [f"- {e}" for e in results["errors"]] + [""]
    return "\n".join(lines)


LOOP_METHOD = (
    "the SASS of each kernel is split into basic blocks; a back edge is a BRA/JMP whose "
    "target block dominates the branch's block (a backward branch that the CFG confirms: "
    "not the `BRA self` trap, not the jump back from an out-of-line block); its natural loop "
    "is the target block plus every block that reaches the branch without passing the "
    "target (so out-of-line slow paths the loop calls into count in it). Wait loops (bodies "
    "of only SYNCS/NANOSLEEP/YIELD polling, loads, compares and branches) and lane loops "
    "(ptxas's ELECT ... BRA.U.ANY loop that issues a per-thread TMA copy, UTMALDG, once per "
    "active lane: bodies of only ELECT, uniform-datapath instructions, predicate logic and "
    "a .ANY back edge) are set aside, though they count in the loops around them; the "
    "loop body is the smallest of the innermost remaining loops (the steady state: the "
    "SageBwd forward's mask-free key loop, not the masked loop after it that runs the key "
    "tail or the causal diagonal once or twice a program; the others are listed with their "
    "sizes), counted statically (each instruction once). Subroutines reached by CALL (ptxas's division and reciprocal slow "
    "paths) are not followed: they count in the whole kernel only.")
PER_ELEMENT_METHOD = (
    "loop-body count x threads per program / elements per iteration (BLOCK_M x BLOCK_N score "
    "elements for the forward and the backward, BLOCK_N x D K elements for the K mean); for "
    "the loop-free kernels, whole-kernel count x threads / elements per program. The SASS "
    "count is per warp, so this is thread-instructions per element; warp-group MMAs (HGMMA, "
    "IGMMA) are issued by all 128 threads of a warp group, so read their per-element value "
    "the same way (not as MMA instructions per element).")


# ---------------------------------------------------------------------------
# CLI


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Builds the census of what ``args`` selects."""
    ptxas = find_ptxas(args.ptxas)
    disassembler = find_disassembler(args.disassembler)
    if disassembler is None:
        raise SystemExit("no disassembler: install cuobjdump (CUDA toolkit) or "
                         "`pip install nvidia-cuda-nvdisasm`")
    jobs: list[tuple[str, str, dict[str, Any] | None]] = []
    errors: list[str] = []
    compiler = None
    if args.ptx:
        for path in args.ptx:
            jobs.append((Path(path).stem, Path(path).read_text(), None))
        variants = "PTX files: " + ", ".join(args.ptx)
    else:
        from sage.compiler import CompilerLibrary  # noqa: PLC0415

        library = CompilerLibrary()
        compiler = {"path": str(library.path), "version": library.version}
        selected = [v for v in sagebwd_variants(args.d)
                    if common.matches(v.name, common.split_patterns(args.kernels))]
        for variant in selected:
            try:
                ptx, consts = variant_ptx(variant, library)
                jobs.append((variant.name, ptx, consts))
            except Exception as exc:  # noqa: BLE001 (recorded, the run goes on)
                errors.append(f"{variant.name}: {common.error_text(exc)}")
        variants = ("SageBwd, bf16, default tiles (launch.default_tiles), scales='fine', "
                    "smooth_k on, smooth_q off, store_p_ds off; D " +
                    ", ".join(map(str, args.d)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="sass-census-") as tmp:
        for name, ptx, consts in jobs:
            print(f"census: {name}", file=sys.stderr)
            try:
                module = census_ptx(ptx, name, ptxas, disassembler, Path(tmp), consts,
                                    Path(args.sass_dir) if args.sass_dir else None)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{name}: {common.error_text(exc)}")
                continue
            for record in module["kernels"]:
                record["variant"] = name if len(module["kernels"]) == 1 \
                    else f"{name}:{record['kernel']}"
                if consts is not None:
                    record["constexprs"] = consts
                rows.append(record)
    return {"environment": common.environment(), "command": args.command,
            "compiler_library": compiler, "ptxas": asdict(ptxas),
            "disassembler": asdict(disassembler),
            "variants": variants, "loop_method": LOOP_METHOD,
            "per_element_method": PER_ELEMENT_METHOD, "rows": rows, "errors": errors}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", type=Path, help="JSON output path")
    parser.add_argument("markdown", type=Path, help="markdown output path")
    parser.add_argument("--d", type=lambda s: [int(x) for x in s.split(",")],
                        default=[64, 128], help="head dims, comma-separated (default 64,128)")
    parser.add_argument("--kernels", default="",
                        help="comma-separated substrings or globs of variant names "
                             "(e.g. 'sagebwd_backward-*,forward')")
    parser.add_argument("--ptx", nargs="+", help="census these sage PTX files instead (e.g. from SAGE_DUMP; no per-element "
                             "counts: their tiles are not known)")
    parser.add_argument("--ptxas", help="ptxas to use (default: the compiler library's)")
    parser.add_argument("--disassembler", default="auto",
                        help="auto (cuobjdump, else nvdisasm), cuobjdump, nvdisasm, or a path")
    parser.add_argument("--sass-dir", help="also write each variant's SASS here")
    args = parser.parse_args(argv)
    args.command = " ".join(["python3", "bench/sass_census.py",
                             *(sys.argv[1:] if argv is None else argv)])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the census, writes the JSON and markdown, prints the markdown."""
    args = parse_args(argv)
    results = run(args)
    markdown = markdown_report(results)
    common.write_outputs(args.json, args.markdown, results, markdown)
    print(markdown)
    return 1 if results["errors"] or not results["rows"] else 0


if __name__ == "__main__":
    sys.exit(main())
