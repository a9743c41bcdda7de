//===- SageGPUOps.cpp - sagegpu op verifiers and folders ------------------===//

#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

using namespace mlir;
using namespace mlir::sagegpu;

#define GET_OP_CLASSES
#include "sage/Dialect/SageGPU/IR/SageGPUOps.cpp.inc"

LogicalResult ConvertLayoutOp::verify() {
  for (Type type : {getSource().getType(), getResult().getType()})
    if (!getDistributedEncoding(type))
      return emitOpError() << "converts rank-2 tiles with distributed "
                              "encodings, not "
                           << type;
  return success();
}

OpFoldResult ConvertLayoutOp::fold(FoldAdaptor) {
  // Same type: nothing moves.
  if (getSource().getType() == getResult().getType())
    return getSource();
  // convert(convert(x)) is one conversion from x's encoding.
  if (auto inner = getSource().getDefiningOp<ConvertLayoutOp>()) {
    if (inner.getSource().getType() == getResult().getType())
      return inner.getSource();
    getSourceMutable().assign(inner.getSource());
    return getResult();
  }
  return {};
}
