//===- LeadingDims.h - folding a view's leading dimensions -----*- C++ -*-===//
//
// A sage.load or sage.store view may index up to kMaxLeadingDims leading
// dimensions (a batch, a head) before the tile's two. A TMA tensor map keeps
// them as dimensions of its own (built once for the whole tensor); every
// other access folds them into its pointer and first bound.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGE_IR_LEADINGDIMS_H
#define SAGE_DIALECT_SAGE_IR_LEADINGDIMS_H

#include "mlir/IR/Operation.h"

namespace mlir::sage {

/// Rewrites every sage.load and sage.store under `root` that has leading
/// dimensions into the equivalent 2-D view: the pointer advanced by
/// `offsets[l] * strides[l]` for each leading `l`, and the first tile bound
/// replaced by 0 when a leading offset lies outside `[0, bounds[l])` (the
/// whole tile is then outside the view).
void foldLeadingDims(Operation *root);

} // namespace mlir::sage

#endif // SAGE_DIALECT_SAGE_IR_LEADINGDIMS_H
