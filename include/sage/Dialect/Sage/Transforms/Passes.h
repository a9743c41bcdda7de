//===- Passes.h - sage dialect passes ---------------------------*- C++ -*-===//

#ifndef SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_H
#define SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

namespace mlir::sage {

#define GEN_PASS_DECL
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"

/// Adds the patterns of `sage-decompose` to `patterns`.
void populateDecomposePatterns(RewritePatternSet &patterns);

/// Options of the `sage-prepare` pipeline.
struct PrepareOptions : public PassPipelineOptions<PrepareOptions> {
  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("GPU architecture, e.g. sm_90a"),
                           llvm::cl::init("sm_90a")};
  Option<int> numWarps{*this, "num-warps", llvm::cl::desc("Warps per program"),
                       llvm::cl::init(4)};
};

/// attach-target, canonicalize, decompose, canonicalize, cse.
void buildPreparePipeline(OpPassManager &pm, const PrepareOptions &options);

/// Registers the named pipelines (`sage-prepare`).
void registerSagePipelines();

#define GEN_PASS_REGISTRATION
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"

} // namespace mlir::sage

#endif // SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_H
