//===- LeadingDims.cpp - folding a view's leading dimensions --------------===//

#include "sage/Dialect/Sage/IR/LeadingDims.h"

#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Folds the leading dimensions of the access `op` (a sage.load or
/// sage.store with a tile of rank `rank`) in place.
template <typename AccessOp> void fold(AccessOp op, int64_t rank) {
  size_t leading = op.getOffsets().size() - rank;
  if (leading == 0)
    return;
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<Value> offsets(op.getOffsets()), strides(op.getStrides()),
      bounds(op.getBounds());
  Value ptr = op.getPtr();
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  Value inside;
  for (size_t l = 0; l < leading; ++l) {
    Value step = arith::MulIOp::create(b, loc, offsets[l], strides[l]);
    ptr = AddPtrOp::create(b, loc, ptr.getType(), ptr, step);
    Value in = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, offsets[l],
                              zero),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, offsets[l],
                              bounds[l]));
    inside = inside ? arith::AndIOp::create(b, loc, inside, in) : in;
  }
  bounds[leading] =
      arith::SelectOp::create(b, loc, inside, bounds[leading], zero);
  op.getPtrMutable().assign(ptr);
  op.getOffsetsMutable().assign(ArrayRef(offsets).drop_front(leading));
  op.getStridesMutable().assign(ArrayRef(strides).drop_front(leading));
  op.getBoundsMutable().assign(ArrayRef(bounds).drop_front(leading));
}

} // namespace

void mlir::sage::foldLeadingDims(Operation *root) {
  root->walk([](Operation *op) {
    if (auto load = dyn_cast<LoadOp>(op))
      fold(load, load.getResult().getType().getRank());
    else if (auto store = dyn_cast<StoreOp>(op))
      fold(store, cast<RankedTensorType>(store.getValue().getType()).getRank());
  });
}
