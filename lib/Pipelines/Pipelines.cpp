//===- Pipelines.cpp - named sage pipelines -------------------------------===//

#include "sage/Pipelines/Pipelines.h"

#include "sage/Conversion/SageToLLVM/Passes.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::sage;

void mlir::sage::buildPreparePipeline(OpPassManager &pm,
                                      const TargetPipelineOptions &options) {
  SageAttachTargetOptions target;
  target.arch = options.arch;
  target.numWarps = options.numWarps;
  pm.addPass(createSageAttachTarget(target));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSageDecompose());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::sage::buildSageToNVVMPipeline(OpPassManager &pm,
                                         const TargetPipelineOptions &options) {
  buildPreparePipeline(pm, options);
  pm.addPass(createSageSelectMma());
  pm.addPass(sagegpu::createSageGPUAssignLayouts());
  // Loop-invariant address arithmetic leaves the loops first, so that the
  // tensor maps promote-operands builds after a view's last definition are
  // built once, before the loop.
  pm.addPass(createLoopInvariantCodeMotionPass());
  sagegpu::SageGPUPromoteOperandsOptions promote;
  promote.ptxVersion = options.ptxVersion;
  pm.addPass(sagegpu::createSageGPUPromoteOperands(promote));
  // The epilogues' scale conversions of loop-invariant tiles leave the
  // loop; conversions and transposes of loads become loads.
  pm.addPass(createLoopInvariantCodeMotionPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // The maps the arguments determine become kernel parameters the launcher
  // encodes (before warp specialisation: the producer then needs no map of
  // its own).
  pm.addPass(sagegpu::createSageGPUHostTensorMaps());
  // A loop marked sage.warp_specialize gets a producer warpgroup for its
  // TMA copies; loops with sage.num_stages issue theirs ahead (their tensor
  // maps are outside the loops by now).
  pm.addPass(sagegpu::createSageGPUWarpSpecialize());
  pm.addPass(sagegpu::createSageGPUPipeline());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSageGPUAllocateSharedMemory());
  pm.addPass(createSageGPUInsertBarriers());
  ConvertSageToLLVMOptions toLLVM;
  toLLVM.ptxVersion = options.ptxVersion;
  pm.addPass(createConvertSageToLLVM(toLLVM));
  pm.addPass(createConvertNVVMToLLVMPass()); // wgmma and friends to PTX asm
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createSageFinalizeKernels());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::sage::registerSagePipelines() {
  PassPipelineRegistration<TargetPipelineOptions>(
      "sage-prepare",
      "Attach the target, then decompose composite ops into tile primitives",
      buildPreparePipeline);
  PassPipelineRegistration<TargetPipelineOptions>(
      "sage-to-nvvm",
      "Lower sage kernels to LLVM-dialect NVVM kernels (what the compiler "
      "library translates to PTX)",
      buildSageToNVVMPipeline);
}
