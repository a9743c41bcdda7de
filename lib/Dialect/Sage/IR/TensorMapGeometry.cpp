//===- TensorMapGeometry.cpp - a tensor map's view as the copy engine sees it //

#include "sage/Dialect/Sage/IR/TensorMapGeometry.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Layout/SharedLayouts.h"

using namespace mlir;
using namespace mlir::sage;

TensorMapGeometry mlir::sage::getTensorMapGeometry(MakeTensorMapOp op) {
  unsigned inner = op.getInner(), outer = 1 - inner;
  unsigned leading = op.getNumLeading();
  int64_t elemBytes =
      op.getPtr().getType().getPointeeType().getIntOrFloatBitWidth() / 8;
  // A typed map counts elements along dimension 0 (f32: a bulk reduction
  // adds them); an untyped one counts bytes.
  int64_t unit = op.getTyped() ? elemBytes : 1;
  TensorMapGeometry map;
  map.elementType = op.getTyped() ? 7 : 0;
  map.swizzleMode = layout::getTmaSwizzleMode(op.getSwizzle());
  map.dims.push_back({leading + inner, elemBytes / unit, std::nullopt, 0,
                      static_cast<int64_t>(op.getSwizzle()) / unit});
  map.dims.push_back(
      {leading + outer, 1, leading + outer, elemBytes, op.getBox()[outer]});
  for (unsigned l = leading; l-- > 0;)
    map.dims.push_back({l, 1, l, elemBytes, 1});
  return map;
}
