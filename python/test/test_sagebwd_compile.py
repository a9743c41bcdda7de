"""Every SageBwd kernel variant traced with sl.trace, compiled for sm_90a by the
compiler library and checked by ptxas: accepted, no register spills at the
default tiles (sage.kernels.sagebwd.launch.default_tiles), and, in the SASS
(bench/sass_census.py's disassembler), no 8-bit float-to-integer conversion:
the INT8 quantizer must stay off the F2I pipe that ex2 shares (and ptxas once
turned its byte stores into a truncating F2I.U8: docs/lowering.md); the
forward's P~ rounds through f16 pairs."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import sage.language as sl
from sage.kernels.sagebwd.launch import (FLAGS, KERNELS, Shape, arg_specs, constexprs,
                                         default_tiles)
from repo_files import load_bench

census = load_bench("sass_census")

PTXAS = os.environ.get("SAGE_PTXAS") or shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
# Known spills (reported to the compiler owner), by (kernel, D): which flag
# combinations spill. The Q-smoothing backward (its dK bias term adds a
# BLOCK_N x BLOCK_N transpose and a second K tile) uses all 255 registers and
# spills at D=128 (8 warps) and at D=64 (one warpgroup, wgmma).
KNOWN_SPILLS = {
    ("sagebwd_backward", 128): lambda flags: flags["smooth_q"],
    ("sagebwd_backward", 64): lambda flags: flags["smooth_q"],
    # On purpose: the D=128 forward is capped at 168 registers so that three
    # programs share an SM. With fine scales its per-key scales wait in
    # shared memory (the compiler copies them there) and it does not spill;
    # with Q-smoothing they are read by the smoothing term too, so they stay
    # in registers and some of O's go to L1 inside the loop, which is still
    # faster than two programs at 254 registers
    # (bench/results/2026-11-26-h100-forward-plans-units.md).
    ("sagebwd_forward", 128): lambda flags: flags["smooth_q"],
}
# Variants at the register limit that may spill only outside their loops (a
# value or two of the prologue kept for the epilogue: one store before the
# loop, one load after it). The D=64 backward writing dK and dV directly
# (direct_kv) uses all 255 registers.
SPILLS_OUTSIDE_LOOPS = {
    ("sagebwd_backward", 64): lambda flags: flags["direct_kv"],
    # Q^ and its scales wait across the key loop to be stored for the
    # backward after it (a store before the loop would hold back its first
    # copies: sagegpu-pipeline): at the 168-register cap some are spilled
    # once before the loop and reloaded once after it.
    ("sagebwd_forward", 128): lambda flags: not flags["smooth_q"],
}


def _variants(name: str):
    flags = FLAGS[name]
    for values in itertools.product([False, True], repeat=len(flags)):
        yield dict(zip(flags, values))


# An F2I/F2IP to an 8-bit integer: the quantizer's rounding gone to the F2I pipe.
EIGHT_BIT_F2I = re.compile(r"\bF2IP?\.(?:[A-Z0-9]+\.)*[SU]8\b")


def _ptxas(ptx: str, tmp_path: Path) -> tuple[str, Path]:
    path, cubin = tmp_path / "kernel.ptx", tmp_path / "kernel.cubin"
    path.write_text(ptx)
    result = subprocess.run([PTXAS, "-arch=sm_90a", "-v", str(path), "-o", str(cubin)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stderr, cubin


@pytest.mark.parametrize("dtype", [sl.bfloat16, sl.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiles_without_spills(library, name, d, dtype, tmp_path):
    shape = Shape(2, 4, 2, 1000, 1000, d)
    disassembler = census.find_disassembler()
    for flags in _variants(name):
        fine, smooth_q = flags.get("fine_scales", True), flags.get("smooth_q", False)
        tiles = default_tiles(d, smooth_q, fine, flags.get("causal", False))
        launch = tiles.options(name, fine_scales=fine, smooth_q=smooth_q, shape=shape)
        # A warp-specialised forward has a producer warpgroup beside its warps.
        producer = name == "sagebwd_forward" and \
            tiles.forward_tiles(fine, smooth_q).warp_specialize
        warps = launch["num_warps"] + (4 if producer else 0)
        text = sl.trace(KERNELS[name], arg_specs(name, dtype,
                                                 direct_kv=flags.get("direct_kv", False)),
                        constexprs(name, shape, tiles, **flags), arch="sm_90a",
                        **launch)
        ptx = library.compile(text, arch="sm_90a")
        assert f"// sage.kernel name={name} threads={32 * warps}" in ptx
        if name == "sagebwd_forward":
            # P~ rounds through f16 pairs into its register-A words
            # (RoundF16PairsToBytes): no f32 magic-number add is left for it.
            assert "cvt.rn.f16x2.f32" in ptx and "add.rn.f16x2" in ptx, flags
            # Its row sum adds the bytes four at a time (sumBytesByDp4a).
            assert "dp4a." in ptx, flags
        # With K's key groups the group maxima come from the int32 accumulator
        # (15 max.s32 a row of a group of a thread: none before), which ptxas fuses
        # three at a time.
        groups = name == "sagebwd_forward" and fine and not smooth_q
        if groups:
            assert ptx.count("max.s32") >= 16, flags
        if not Path(PTXAS).exists():
            continue  # only this step needs the CUDA toolkit
        log, cubin = _ptxas(ptx, tmp_path)
        sass = None
        if disassembler is not None:
            sass = census.disassemble(cubin, disassembler)
            assert not EIGHT_BIT_F2I.search(sass), (flags, EIGHT_BIT_F2I.findall(sass))
            assert not groups or "VIMNMX3" in sass, flags
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", log)]
        if KNOWN_SPILLS.get((name, d), lambda _: False)(flags):
            continue
        if any(spills) and SPILLS_OUTSIDE_LOOPS.get((name, d), lambda _: False)(flags):
            if sass is not None:
                assert census.local_memory_in_loops(sass) == 0, \
                    (flags, "spills inside a loop", log)
            continue
        assert not any(spills), (flags, log)
