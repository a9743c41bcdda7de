//===- Passes.td - sage dialect passes ----------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_TD
#define SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SageDecompose : Pass<"sage-decompose"> {
  let summary = "Expand composite sage ops into reductions, broadcasts and "
                "elementwise arith/math";
  let description = [{
    Rewrites `sage.smooth`, `sage.quantize`, `sage.dequantize` and
    `sage.softmax_update` into `sage.reduce`, `sage.broadcast`, `sage.splat`
    constants and elementwise `arith`/`math` ops on tiles, following exactly
    the formulas in each op's documentation. The result is what the GPU
    lowering consumes, and a readable reference when debugging a kernel.
    Matmuls, loads and stores are primitives and stay. Schemes whose granules
    are neither a whole dimension nor a single element along each axis are
    left alone.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def SageAttachTarget : Pass<"sage-attach-target", "::mlir::ModuleOp"> {
  let summary = "Record the GPU target and warps per program on the module";
  let description = [{
    Sets the module attributes `sage.target` and `sage.num_warps`, which the
    lowering reads. Keeping target facts in the IR makes every dump and test
    self-describing. An option that is given replaces the module's value; one
    that is not keeps it, and a module without one gets `sm_90a` and 4 warps.
    Fails on an unknown architecture or warp count.
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"\"",
           "GPU architecture: sm_80, sm_86, sm_89, sm_90 or sm_90a "
           "(default: the module's, else sm_90a)">,
    Option<"numWarps", "num-warps", "int", /*default=*/"0",
           "Warps per program: 1, 2, 4, 8 or 16 (default: the module's, else 4)">,
  ];
  let dependentDialects = ["::mlir::sage::SageDialect"];
}

def SageSelectMma : Pass<"sage-select-mma", "::mlir::ModuleOp"> {
  let summary = "Choose the tensor-core instruction of every matmul";
  let description = [{
    Records on each `sage.qmatmul` and `sage.matmul` without a choice which
    instruction family lowers it (`using mma_sync` or `using wgmma`), from
    the module's `sage.target`, `sage.num_warps` and the tile shapes, so the
    choice is visible in dumps and testable apart from the lowering. On
    `sm_90a`, matmuls whose output rows split into 64-row blocks per
    warpgroup (and whose width is a legal wgmma N) get a wgmma form
    (m64nNk32 for INT8, m64nNk16 for f16/bf16): `wgmma_reg_a` when A is
    computed in the program (it lives in registers: quantized, or P of the
    attention), `wgmma` (both operands from shared-memory descriptors) when
    A is loaded from memory or computed outside the loop the matmul runs in
    (stored to shared memory once instead of held in registers across the
    loop); everything else gets
    `mma_sync` (m16n8k32 / m16n8k16), which runs from sm_80 on. A choice
    already present is kept.
  }];
  let dependentDialects = ["::mlir::sage::SageDialect"];
}

#endif // SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_TD
