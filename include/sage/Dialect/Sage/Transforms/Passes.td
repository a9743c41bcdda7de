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
    self-describing. Fails on an unknown architecture or warp count.
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_90a\"",
           "GPU architecture: sm_80, sm_86, sm_89, sm_90 or sm_90a">,
    Option<"numWarps", "num-warps", "int", /*default=*/"4",
           "Warps per program: 1, 2, 4, 8 or 16">,
  ];
  let dependentDialects = ["::mlir::sage::SageDialect"];
}

#endif // SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_TD
