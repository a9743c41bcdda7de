//===- Passes.td - sagegpu passes ---------------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGEGPU_TRANSFORMS_PASSES_TD
#define SAGE_DIALECT_SAGEGPU_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SageGPUAssignLayouts : Pass<"sagegpu-assign-layouts", "::mlir::ModuleOp"> {
  let summary = "Give every tile a distributed encoding: matmul accumulators "
                "anchor, everything else follows";
  let description = [{
    Infers one encoding per tile value from the ops' layout relations:
    - each `sage.qmatmul` / `sage.matmul` result is anchored at its
      instruction's accumulator, `#sagegpu.mma` (from the `using` choice of
      `sage-select-mma`), so the tensor cores leave it in registers;
    - tiles an op ties together share one encoding: all tiles of an
      elementwise op, a matmul's accumulator and result, the values a loop
      carries (`LayoutRelationsOpInterface`, the ElementwiseMappable traits,
      `LoopLikeOpInterface`, `scf.if`);
    - the `Mx1` / `1xN` side of a reduction or broadcast gets the
      `#sagegpu.slice` of the other side's encoding;
    - a group no anchor reaches that is stored through a transposed view
      (unit stride along rows) gets the transposing blocked encoding: the
      default's 4 columns and up to 16 bytes of rows a thread, lanes across
      the columns (`getTransposingBlockedEncoding`), so that its row-wise
      loads and its column-wise store are both vectors, with no conversion
      between them (none when the tile has too few rows for 4-byte columns);
    - what no anchor reaches otherwise gets the program's blocked encoding,
      `#sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [W, 1]>`
      with `W = sage.num_warps`.
    Where two anchors meet (two matmuls with different accumulators in one
    group of tied tiles), or a slice relation cannot hold, the pass inserts a
    `sagegpu.convert_layout`: the only place data changes distribution. A
    transposed store of a tile in another blocked encoding converts it to a
    column-wise one (16 bytes of a column a thread) first.
    Loads, stores, splats, iotas and constants take whatever their group
    gets.
  }];
  let dependentDialects = ["::mlir::sage::SageDialect",
                           "::mlir::sagegpu::SageGPUDialect"];
}

def SageGPUPromoteOperands : Pass<"sagegpu-promote-operands", "::mlir::ModuleOp"> {
  let summary = "Stage matmul operands in shared memory as IR and lower "
                "matmuls to sagegpu.dot plus a tile epilogue";
  let description = [{
    Runs after `sagegpu-assign-layouts`. Each `sage.qmatmul` / `sage.matmul`
    becomes:
    - its operands as K-major `!sagegpu.smem` tiles (`#sagegpu.shared`
      with the contracted dimension contiguous), or, for `wgmma_reg_a`, the
      lhs in the `#sagegpu.dot_op` A encoding: a `sagegpu.convert_layout`
      when that only renames registers, else a shared tile read back with
      `sagegpu.local_load`;
    - a `sagegpu.dot` into a zero accumulator in the result's `#sagegpu.mma`
      encoding;
    - the epilogue as tile ops: `arith.sitofp`, the scales (as slices of the
      result's encoding, transposed with `sagegpu.trans` where a column of
      per-token scales must run along a row) broadcast and multiplied, then
      the accumulator operand added.

    A `sage.store` marked `tma` whose view the copy engine can write (a
    kernel on a TMA target, the inner dimension of unit stride, 16-byte
    aligned base and rows, a box of whole swizzle widths of at most 256
    rows) becomes a swizzled shared tile filled from the registers
    (`sagegpu.local_alloc`) and a `sagegpu.tma_store` of it through a tensor
    map; any other loses the mark and stays a plain store.

    On wgmma the dot is asynchronous: `sagegpu.dot_wait {pendings = 0}` and
    the epilogue go right before the first op of the matmul's block that
    uses its result (itself or inside its regions), or before the block's
    terminator when no op of the block does, rather than right after the
    dot, so that the ops written between a matmul and its first use (masks,
    scale loads, index math, copies) run while the wgmma is in flight. A
    matmul with an accumulator operand is waited for right after its dot:
    until the epilogue adds them, the partial product and the accumulator
    would both hold registers. Scales that a copy brings to shared memory
    are read into registers in the epilogue, after the dot's wait (before
    it they would hold registers beside the product in flight), but the
    copy is waited for before the dot's wait, under the dot. On mma.sync
    the epilogue follows the dot.

    An operand tile is filled where its `sage.load` was, straight from global
    memory, when the load's only use is the matmul in the same block with no
    `sage.store` in between and the copy can move 16-byte pieces: the target
    has cp.async (sm_80 and later), the stride along the contracted
    dimension is the constant 1, the contracted extent is a multiple of 16
    bytes, and the base pointer, the other stride and the offsets keep every
    piece 16-byte aligned (from constants and `sage.alignment` /
    `sage.divisibility` kernel-argument attributes). The copy is
    `sagegpu.async_copy` plus a commit group, waited for (`sagegpu.async_wait`)
    right before the dot; other operands are stored from registers
    (`sagegpu.local_alloc` with an initial value).

    Every operand tile is K-major (`#sagegpu.shared` with `inner` the
    contracted dimension), unswizzled unless TMA fills it.

    On sm_90a (with `ptx-version` 83 or newer) a kernel's copy of a wgmma
    descriptor operand goes through TMA instead when, beyond the above, the
    tile takes a swizzle (the widest, 128, 64 or 32 bytes, that divides its
    contracted extent in bytes; at least 8 rows) and has at most 256 rows:
    the tile is swizzled, and a `sage.make_tensor_map` of the view with that
    swizzle is built right after the last of the view's values is defined
    (once per loop, not per iteration) in a trailing `!sage.ptr<i8>`
    argument sized by `sage.global_scratch`, then `sagegpu.tma_load`
    completing an mbarrier that the threads wait on before the dot.
  }];
  let options = [
    Option<"ptxVersion", "ptx-version", "int",
           /*default=*/"::mlir::sage::TargetInfo::kDefaultPtxVersion",
           "PTX ISA version x10 the kernel is translated with">,
  ];
  let dependentDialects = ["::mlir::sage::SageDialect",
                           "::mlir::sagegpu::SageGPUDialect",
                           "::mlir::arith::ArithDialect"];
}

def SageGPUWarpSpecialize
    : Pass<"sagegpu-warp-specialize", "::mlir::ModuleOp"> {
  let summary = "Split a kernel into a TMA producer warpgroup and consumer "
                "warpgroups around its marked loop";
  let description = [{
    Runs where `sagegpu-pipeline` does, before it. A function's `scf.for`
    marked `sage.warp_specialize` (`sl.range(..., num_stages=S,
    warp_specialize=True)`, S >= 2, directly in the function body) must have
    only pipelinable `sagegpu.tma_load`s (as `sagegpu-pipeline` defines
    them). The function becomes:
    - before everything, each copy's buffer as a ring of S tiles with a ring
      of S "full" mbarriers (one arrival: the copy), and one ring of S
      "empty" mbarriers that every consumer thread arrives on, initialised;
    - a `sagegpu.warp_specialize` whose producer region computes what the
      copies need (the side-effect-free scalar ops and tensor maps they
      depend on, cloned) and runs the loop's iterations: wait until slot
      `it % S` is empty (phase `(it / S) % 2 ^ 1`: a fresh mbarrier's
      preceding phase counts as complete, so the first S iterations do not
      wait), then issue the iteration's copies into it;
    - and whose consumer region is the rest of the function, the loop
      reading slot `it % S` after waiting for its full mbarrier (phase
      `(it / S) % 2`) and arriving on its empty one once the slot is read:
      at the end of the iteration, or, when the loop's one wgmma dot
      accumulates into a carried value (as in `sagegpu-pipeline`), the
      previous iteration's slot after the `dot_wait {pendings = 1}` that
      completes its dot, the accumulation staying in flight.
    The registers split as the options say (consumers: the most that fit,
    up to 240). Tensor maps only the copies used are built by the producer
    alone. Errors name what keeps a marked loop from being split.
  }];
  let options = [
    Option<"producerRegisters", "producer-registers", "int", "40",
           "registers per producer thread (setmaxnreg.dec)">,
  ];
  let dependentDialects = ["::mlir::sagegpu::SageGPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def SageGPUPipeline : Pass<"sagegpu-pipeline", "::mlir::ModuleOp"> {
  let summary = "Issue a loop's TMA and bulk copies stages ahead, into rings "
                "of buffers and mbarriers";
  let description = [{
    Runs after `sagegpu-promote-operands` (and the loop-invariant code
    motion that leaves each tensor map outside its loop). In an `scf.for`
    carrying `sage.num_stages = S` (S >= 2; `sl.range(..., num_stages=S)`),
    each `sagegpu.tma_load` and `sagegpu.bulk_load` of the loop body whose
    buffer and mbarrier are allocated in the body, whose tensor map (for a
    TMA copy) is defined outside the loop and whose coordinates (a bulk
    copy's pointer and offset) are side-effect-free functions of the
    induction variable is pipelined:
    - its buffer becomes a ring of S tiles and its mbarrier a ring of S
      mbarriers (`sagegpu.ring_slot`), allocated and initialised once,
      before the loop, and invalidated after it;
    - before the loop, the copies of the first S - 1 iterations are issued
      into slots 0 .. S - 2 (each under `scf.if` on its iteration existing);
    - where the copy was, iteration `it` (counted from 0) issues the copy of
      iteration `it + S - 1` into its slot `(it + S - 1) % S`, if that
      iteration exists, and the uses of the buffer and the mbarrier take
      slot `it % S`: the wait is for phase `(it / S) % 2`.
    A slot is refilled S - 1 iterations after it was read: the dots that
    read it have been waited for in that iteration, and
    `sagegpu-insert-barriers` puts a barrier before the refill (it counts a
    slot as its whole ring). Other loads, and loops without the attribute,
    are left as they are. The attribute stays on the loop, for the record.
  }];
  let dependentDialects = ["::mlir::sagegpu::SageGPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def SageGPUHostTensorMaps
    : Pass<"sagegpu-host-tensor-maps", "::mlir::ModuleOp"> {
  let summary = "Turn the tensor maps that the kernel's arguments determine "
                "into maps the launcher encodes on the host";
  let description = [{
    Runs after `sagegpu-promote-operands` (and the loop-invariant code
    motion and CSE after it), before `sagegpu-warp-specialize`. Each
    `sage.make_tensor_map` of a kernel whose pointer, strides and bounds are
    computed from the kernel's arguments and constants alone (through
    `arith` integer ops and `sage.addptr`) becomes a new last argument of
    type `!sage.tensor_map` carrying `sage.host_tensor_map`: the map's
    fields (`sage::getTensorMapGeometry`) as host expressions. The launcher
    evaluates them on each launch and encodes the map with the CUDA driver
    (`cuTensorMapEncodeTiled`); the kernel reads it from its parameters (a
    `__grid_constant__`), so no program builds it. Identical maps share an
    argument. The other maps (a view that depends on the program, as after
    a `sl.where` on the tile) stay device-built, in renumbered scratch
    slots; a kernel left with none loses its scratch argument. A module
    with `sage.tensor_maps = "device"` keeps every map on the device.

    Host expressions (`sage.host_tensor_map`'s `address`, `dims`,
    `strides`), evaluated in 64-bit two's complement:
    - `aN`: kernel argument N (a pointer's address, an integer's value);
    - a decimal integer;
    - `OPW(x,y)` for OP in add, sub, mul, div, rem, min, max (signed;
      division truncates) at width W (32 or 64): the result wraps to W bits;
    - `zextW(x)`: x as an unsigned W-bit value; `truncW(x)`: x wrapped to a
      signed W-bit value.
  }];
  let dependentDialects = ["::mlir::sage::SageDialect"];
}

#endif // SAGE_DIALECT_SAGEGPU_TRANSFORMS_PASSES_TD
