//===- Passes.h - sage dialect passes ---------------------------*- C++ -*-===//

#ifndef SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_H
#define SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

namespace mlir::sage {

#define GEN_PASS_DECL
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"

/// Adds the patterns of `sage-decompose` to `patterns`.
void populateDecomposePatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"

} // namespace mlir::sage

#endif // SAGE_DIALECT_SAGE_TRANSFORMS_PASSES_H
