//===- SageDialect.h - the sage dialect -------------------------*- C++ -*-===//
//
// Everything a user of the sage dialect needs: enums, the quantization scheme
// interface, attributes, types and ops.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGE_IR_SAGEDIALECT_H
#define SAGE_DIALECT_SAGE_IR_SAGEDIALECT_H

// Generated code expects these before it (see docs/design.md, pitfalls).
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "sage/Dialect/Sage/IR/TargetInfo.h"

#include "sage/Dialect/Sage/IR/SageEnums.h.inc"

#include "sage/Dialect/Sage/IR/SageInterfaces.h.inc"

namespace mlir::sage {
/// A `sage.load`/`sage.store` view has at most this many leading
/// dimensions before the tile's two (a TMA tensor map has rank 5 at most).
constexpr int64_t kMaxLeadingDims = 3;

/// `slice` is laid out as the slice of `parent`'s layout along `dim` (the
/// dimension where `slice` has size 1), or with `groups` (a nonzero mask of
/// index bits along `dim`) as its grouped slice: `slice` keeps those bits of
/// `parent`'s index along `dim` (`#sagegpu.slice`'s `groups`).
struct SliceRelation {
  Value slice;
  Value parent;
  unsigned dim;
  unsigned groups = 0;
};
} // namespace mlir::sage

#include "sage/Dialect/Sage/IR/SageOpInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "sage/Dialect/Sage/IR/SageAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "sage/Dialect/Sage/IR/SageTypes.h.inc"

#include "sage/Dialect/Sage/IR/SageDialect.h.inc"

#define GET_OP_CLASSES
#include "sage/Dialect/Sage/IR/SageOps.h.inc"

#endif // SAGE_DIALECT_SAGE_IR_SAGEDIALECT_H
