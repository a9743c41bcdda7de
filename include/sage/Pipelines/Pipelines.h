//===- Pipelines.h - named sage pipelines -----------------------*- C++ -*-===//
//
// Pipelines are built here, in C++, and registered by name, so that
// `sage-opt --sage-to-nvvm='arch=sm_90a'` replays exactly what the compiler
// library (and so the JIT) runs.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_PIPELINES_PIPELINES_H
#define SAGE_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"

namespace mlir::sage {

/// Options shared by the named pipelines.
struct TargetPipelineOptions
    : public PassPipelineOptions<TargetPipelineOptions> {
  Option<std::string> arch{
      *this, "arch",
      llvm::cl::desc("GPU architecture, e.g. sm_90a (default: the module's "
                     "sage.target, else sm_90a)"),
      llvm::cl::init("")};
  Option<int> numWarps{*this, "num-warps",
                       llvm::cl::desc("Warps per program (default: the "
                                      "module's sage.num_warps, else 4)"),
                       llvm::cl::init(0)};
  Option<int> ptxVersion{
      *this, "ptx-version",
      llvm::cl::desc("PTX ISA version x10 the result is translated with; "
                     "TMA copies need 83, mixed integer wgmma 84 (default 84)"),
      llvm::cl::init(::mlir::sage::TargetInfo::kDefaultPtxVersion)};
};

/// sage-prepare: attach-target, canonicalize, decompose, canonicalize, cse.
void buildPreparePipeline(OpPassManager &pm,
                          const TargetPipelineOptions &options);

/// sage-to-nvvm: sage-prepare, then select-mma, assign-layouts,
/// convert-sage-to-llvm and the upstream conversions to the LLVM dialect,
/// ending with NVVM kernels ready for translation to LLVM IR.
void buildSageToNVVMPipeline(OpPassManager &pm,
                             const TargetPipelineOptions &options);

/// Registers `sage-prepare` and `sage-to-nvvm`.
void registerSagePipelines();

} // namespace mlir::sage

#endif // SAGE_PIPELINES_PIPELINES_H
