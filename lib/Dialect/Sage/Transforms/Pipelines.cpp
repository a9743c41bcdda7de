//===- Pipelines.cpp - named sage pipelines -------------------------------===//
//
// Pipelines live in C++ and are registered by name, so that
// `sage-opt --sage-prepare='arch=sm_90a'` replays exactly what the JIT runs.
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::sage;

void mlir::sage::buildPreparePipeline(OpPassManager &pm,
                                      const PrepareOptions &options) {
  SageAttachTargetOptions target;
  target.arch = options.arch;
  target.numWarps = options.numWarps;
  pm.addPass(createSageAttachTarget(target));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSageDecompose());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::sage::registerSagePipelines() {
  PassPipelineRegistration<PrepareOptions>(
      "sage-prepare",
      "Attach the target, then decompose composite ops into tile primitives "
      "(the sage-level half of the lowering)",
      buildPreparePipeline);
}
