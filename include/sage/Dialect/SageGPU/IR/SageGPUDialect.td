//===- SageGPUDialect.td - the sagegpu dialect --------------*- tablegen -*-===//
//
// GPU-level structure of sage programs: how tile elements are distributed
// over registers, lanes and warps (layout encodings), and the ops that move
// data between distributions. The `sage` dialect keeps the tile semantics.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGEGPU_IR_SAGEGPUDIALECT_TD
#define SAGE_DIALECT_SAGEGPU_IR_SAGEGPUDIALECT_TD

include "mlir/IR/OpBase.td"

def SageGPU_Dialect : Dialect {
  let name = "sagegpu";
  let cppNamespace = "::mlir::sagegpu";
  let summary = "Layout encodings and data movement of sage programs on GPUs";
  let description = [{
    Every tile of a lowered sage program carries an *encoding* (the tensor
    type's encoding attribute) that says which register of which lane of
    which warp holds each element. All encodings answer that question in one
    place: each converts to a linear layout (`include/sage/Layout`,
    `docs/layouts.md`), and the lowering reads nothing else.

    Distributed encodings:
    - `#sagegpu.blocked`: a regular grid of elements per thread, threads per
      warp and warps per program (loads, stores, generic elementwise code);
    - `#sagegpu.slice`: the `Mx1` / `1xN` statistics of a parent encoding
      (row maxima, sums, scales, LSE, delta);
    - `#sagegpu.mma`: a tensor-core accumulator (mma.sync m16n8, wgmma
      m64nN per warpgroup), where matmul results stay in registers;
    - `#sagegpu.dot_op`: a tensor-core operand in registers (A and B
      fragments; an 8-bit A may carry the sigma16 contraction permutation).

    `#sagegpu.shared` is the layout of a tile in shared memory (no swizzle or
    the 32/64/128-byte swizzles that wgmma descriptors and TMA share).

    Values change encoding only through `sagegpu.convert_layout`, whose
    lowering picks register moves, warp shuffles or shared memory.

    Shared memory is IR too: `!sagegpu.smem` tiles named by
    `sagegpu.local_alloc`, filled by stores, cp.async or TMA copies, read by
    loads and by the tensor-core op `sagegpu.dot`; a pass allocates their
    bytes from liveness and another inserts the barriers their accesses
    need.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let dependentDialects = ["::mlir::sage::SageDialect"];
  let extraClassDeclaration = [{
    // Defined next to the attribute storage classes (SageGPUAttrs.cpp).
    void registerAttributes();
    // SageGPUTypes.cpp.
    void registerTypes();
  }];
}

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUDIALECT_TD
