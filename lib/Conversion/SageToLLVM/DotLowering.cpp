//===- DotLowering.cpp - what the sagegpu.dot lowerings share -------------===//

#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Layout/Encodings.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::sage;

std::optional<uint32_t>
mlir::sage::getSplatAccumulatorBits(sagegpu::DotOp dot) {
  DenseElementsAttr value;
  if (!isWgmma(dot.getMmaKind()) ||
      !matchPattern(dot.getAcc(), m_Constant(&value)) || !value.isSplat())
    return std::nullopt;
  uint32_t bits;
  if (auto f = dyn_cast<FloatAttr>(value.getSplatValue<Attribute>()))
    bits = uint32_t(f.getValue().bitcastToAPInt().getZExtValue());
  else
    bits = uint32_t(value.getSplatValue<APInt>().getZExtValue());
  // A zero accumulator is not materialised at all (scale-d 0).
  if (bits == 0 || value.getElementType().getIntOrFloatBitWidth() != 32)
    return std::nullopt;
  return bits;
}

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

std::optional<RegisterFragments> RegisterFragments::get(RankedTensorType type,
                                                        ValueRange slots) {
  std::optional<TileDistribution> dist = TileDistribution::get(type);
  if (!dist)
    return std::nullopt;
  RegisterFragments f;
  f.type = type;
  f.slots = slots;
  if (auto dotOp =
          dyn_cast_or_null<sagegpu::DotOperandEncodingAttr>(type.getEncoding()))
    f.sigma16 = dotOp.getSigma16();
  // The first slot of each position (later ones are copies).
  for (int64_t r = dist->getNumElements() - 1; r >= 0; --r) {
    layout::Coord at = dist->slotOffset(r);
    f.slotOf[{at.row, at.col}] = r;
  }
  return f;
}

FailureOr<SmallVector<Value, 4>> RegisterFragments::words(OpBuilder &b,
                                                          Location loc,
                                                          int32_t row,
                                                          int64_t ks) const {
  Type elem = type.getElementType();
  int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  int32_t stepElems = int32_t(32 / elemBytes);
  int32_t wordElems = int32_t(4 / elemBytes);
  SmallVector<Value, 4> out;
  for (int32_t w = 0; w < 4; ++w) {
    int32_t r = row + 8 * (w & 1);
    int32_t k0 = int32_t(ks) * stepElems + (w >> 1) * (stepElems / 2);
    Value vec =
        LLVM::PoisonOp::create(b, loc, VectorType::get({wordElems}, elem));
    for (int32_t j = 0; j < wordElems; ++j) {
      int32_t k = k0 + j;
      if (sigma16)
        k = int32_t(layout::sigma16Token(k));
      auto it = slotOf.find({r, k});
      if (it == slotOf.end())
        return failure();
      vec = LLVM::InsertElementOp::create(
          b, loc, vec, slots[it->second],
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
    }
    out.push_back(LLVM::BitcastOp::create(b, loc, b.getI32Type(), vec));
  }
  return out;
}
