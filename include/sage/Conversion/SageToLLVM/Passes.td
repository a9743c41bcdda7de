//===- Passes.td - sage to LLVM/NVVM conversion passes ------*- tablegen -*-===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_PASSES_TD
#define SAGE_CONVERSION_SAGETOLLVM_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertSageToLLVM : Pass<"convert-sage-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Lower tiles to per-thread LLVM/NVVM code";
  let description = [{
    Needs tiles with distributed encodings (`sagegpu-assign-layouts`) and
    matmuls with a chosen instruction (`sage-select-mma`). Every tile value
    becomes the scalars the running thread holds, as its encoding's linear
    layout says; sage ops become NVVM special registers, predicated global
    loads/stores, warp shuffles, shared-memory exchanges and tensor-core
    instructions whose results stay in the accumulator registers;
    `sagegpu.convert_layout` becomes register renaming, shuffles or a
    shared-memory round trip; arith/math ops on tiles become the same ops on
    scalars.
    `!sage.ptr` becomes `!llvm.ptr<1>`. Each kernel gets the shared-memory
    scratch size it needs as `sage.shared_memory` (bytes).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def SageFinalizeKernels : Pass<"sage-finalize-kernels", "::mlir::ModuleOp"> {
  let summary = "Mark lowered sage kernels as NVVM kernels";
  let description = [{
    Runs after func-to-llvm: every `llvm.func` carrying `sage.kernel` becomes
    an `nvvm.kernel` with `nvvm.maxntid` set to 32 x `sage.num_warps`
    threads. The `sage.*` function attributes stay, for the launcher.
  }];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect"];
}

#endif // SAGE_CONVERSION_SAGETOLLVM_PASSES_TD
