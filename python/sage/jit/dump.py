"""SAGE_DUMP: every stage of a kernel, written where a person can read,
edit and replay it.

Dumps are written whenever the JIT loads a kernel into a process, from a
fresh compilation or from the disk cache alike, so a cache hit never hides
them. The file names match what SAGE_OVERRIDE_DIR looks for: copy
``<kernel>.mlir`` or ``<kernel>.ptx`` there after editing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sage.jit.knobs import knobs

#: The file each stage is written to ({name} is the kernel's name).
STAGE_FILES = {
    "ir": "{name}.mlir",            # sage IR as traced (sage-opt reads it)
    "passes": "{name}.passes.mlir",  # the IR after every pass of sage-to-nvvm
    "mlir": "{name}.llvm.mlir",     # the lowered module (LLVM dialect)
    "llvm": "{name}.ll",            # optimised LLVM IR
    "ptx": "{name}.ptx",
    "cubin": "{name}.cubin",
    "ptxas": "{name}.ptxas.log",    # registers, shared memory, spills
}


def replay_commands(name: str, arch: str, num_warps: int, ptx_version: int) -> str:
    """Shell commands that redo a dumped compilation outside Python. The PTX
    version is spelled out: it decides whether loads may go through TMA."""
    return (f"# Replay the compilation of {name} (from the repository root):\n"
            f"build/bin/sage-opt {name}.mlir --sage-to-nvvm='arch={arch} "
            f"num-warps={num_warps} ptx-version={ptx_version}' "
            f"--mlir-print-ir-after-all -o /dev/null\n"
            f"build/bin/sage-translate {name}.mlir --arch={arch} "
            f"--num-warps={num_warps} --ptx-version={ptx_version} -o {name}.ptx\n"
            f"ptxas -arch={arch} -v {name}.ptx -o {name}.cubin\n")


def write_dumps(stages: dict[str, bytes], name: str, key: str, arch: str,
                num_warps: int, ptx_version: int, source: str) -> Path | None:
    """Writes the stages SAGE_DUMP asks for (those present) under
    ``SAGE_DUMP_DIR/<name>-<key prefix>/``; returns that folder, or None
    when SAGE_DUMP is unset."""
    wanted = knobs.dump.get()
    if not wanted:
        return None
    folder = knobs.dump_dir.get() / f"{name}-{key[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stage in sorted(wanted, key=list(STAGE_FILES).index):
        data = stages.get(stage)
        if data:
            (folder / STAGE_FILES[stage].format(name=name)).write_bytes(data)
            written.append(stage)
    (folder / "replay.sh").write_text(replay_commands(name, arch, num_warps,
                                                            ptx_version))
    missing = sorted(wanted - set(written))
    note = f" (not produced: {', '.join(missing)})" if missing else ""
    print(f"sage: dumped {', '.join(written) or 'nothing'} of {name} ({source}) to "
          f"{folder}{note}", file=sys.stderr)
    return folder
