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
    - what no anchor reaches gets the program's blocked encoding,
      `#sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [W, 1]>`
      with `W = sage.num_warps`.
    Where two anchors meet (two matmuls with different accumulators in one
    group of tied tiles), or a slice relation cannot hold, the pass inserts a
    `sagegpu.convert_layout`: the only place data changes distribution.
    Loads, stores, splats, iotas and constants take whatever their group
    gets.
  }];
  let dependentDialects = ["::mlir::sage::SageDialect",
                           "::mlir::sagegpu::SageGPUDialect"];
}

#endif // SAGE_DIALECT_SAGEGPU_TRANSFORMS_PASSES_TD
