//===- Passes.h - sagegpu passes --------------------------------*- C++ -*-===//

#ifndef SAGE_DIALECT_SAGEGPU_TRANSFORMS_PASSES_H
#define SAGE_DIALECT_SAGEGPU_TRANSFORMS_PASSES_H

#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::sagegpu {

#define GEN_PASS_DECL
#include "sage/Dialect/SageGPU/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "sage/Dialect/SageGPU/Transforms/Passes.h.inc"

} // namespace mlir::sagegpu

#endif // SAGE_DIALECT_SAGEGPU_TRANSFORMS_PASSES_H
