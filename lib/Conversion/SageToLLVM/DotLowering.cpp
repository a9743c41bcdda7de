//===- DotLowering.cpp - what the sagegpu.dot lowerings share -------------===//

#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"

using namespace mlir;
using namespace mlir::sage;

FailureOr<DotShape> mlir::sage::getDotShape(sagegpu::DotOp op) {
  RankedTensorType result = op.getResult().getType();
  auto encoding = cast<sagegpu::MmaEncodingAttr>(result.getEncoding());
  MmaKind kind = op.getMmaKind();
  DotShape s;
  s.m = result.getDimSize(0);
  s.n = result.getDimSize(1);
  s.k = op.getRhs().getType().getShape()[op.getRhsContractDim()];
  s.elemBytes =
      op.getRhs().getType().getElementType().getIntOrFloatBitWidth() / 8;
  s.warps = encoding.getNumWarps();
  auto expected =
      sagegpu::getAccumulatorEncoding(op.getContext(), kind, s.m, s.n, s.warps);
  if (sagegpu::getLinearLayout(result) !=
      expected.toLinearLayout(result.getShape()))
    return op.emitOpError() << "result encoding " << result.getEncoding()
                            << " is not the accumulator of "
                            << stringifyMmaKind(kind) << ", " << expected;
  int64_t bits = s.elemBytes * 8;
  if (kind == MmaKind::MmaSync && !fitsMmaSync(s.m, s.n, s.k, bits, s.warps)) {
    MmaSyncTiling t = mmaSyncTiling(s.m, s.warps);
    return op.emitOpError()
           << "mma_sync lowering needs M a multiple of " << 16 * t.warpsM
           << ", N of " << 8 * t.warpsN << " and K of " << mmaK(bits)
           << ", got " << s.m << "x" << s.n << "x" << s.k;
  }
  if (isWgmma(kind) && !fitsWgmma(s.m, s.n, s.k, bits, s.warps))
    return op.emitOpError()
           << "wgmma lowering needs warps in groups of 4, M in 64-row blocks "
              "per warpgroup, a legal N <= 256 and K a multiple of "
           << mmaK(bits) << ", got " << s.m << "x" << s.n << "x" << s.k
           << " with " << s.warps << " warps";
  return s;
}

std::pair<Value, Value>
mlir::sage::warpOrigin(ThreadCoords &c, const layout::LinearLayout &acc) {
  layout::LinearLayout::Bases none(acc.getNumBits(layout::InDim::Lane));
  return c.threadOffset(acc.withBases(layout::InDim::Lane, none));
}
