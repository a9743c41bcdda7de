//===- ElementwiseToLLVM.cpp - per-element ops on tiles -------------------===//
//
// The operands of an elementwise op share one layout (layout assignment
// makes them), so it becomes the same op on each slot; a broadcast from a
// slice of the result's layout re-indexes slots and moves no data.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Layout/Encodings.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Any op with elementwise-mappable traits (arith, math) on tiles.
struct ElementwiseLowering : public ConversionPattern {
  ElementwiseLowering(const TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op, ArrayRef<ValueRange> operands,
                                ConversionPatternRewriter &rw) const override {
    if (!OpTrait::hasElementwiseMappableTraits(op) || op->getNumResults() != 1)
      return failure();
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type)
      return failure();
    std::optional<TileDistribution> dist = TileDistribution::get(type);
    if (!dist)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    int64_t n = dist->getNumElements();
    for (Value operand : op->getOperands()) {
      std::optional<TileDistribution> in =
          TileDistribution::get(operand.getType());
      if (!in || in->getLayout() != dist->getLayout())
        return rw.notifyMatchFailure(op, "operand layouts differ");
    }
    SmallVector<Value> results;
    for (int64_t i = 0; i < n; ++i) {
      OperationState state(op->getLoc(), op->getName());
      for (ValueRange values : operands)
        state.addOperands(values[i]);
      state.addTypes(type.getElementType());
      state.addAttributes(op->getAttrs());
      results.push_back(rw.create(state)->getResult(0));
    }
    rw.replaceOpWithMultiple(op, {results});
    return success();
  }
};

struct SplatConstantLowering : public OpConversionPattern<arith::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(arith::ConstantOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> dist = TileDistribution::get(op.getType());
    auto dense = dyn_cast<SplatElementsAttr>(op.getValue());
    if (!dist || !dense)
      return rw.notifyMatchFailure(op, "only splat tile constants lower");
    Value scalar = arith::ConstantOp::create(
        rw, op.getLoc(), cast<TypedAttr>(dense.getSplatValue<Attribute>()));
    rw.replaceOpWithMultiple(
        op, {SmallVector<Value>(dist->getNumElements(), scalar)});
    return success();
  }
};

struct SplatLowering : public OpConversionPattern<SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> dist =
        TileDistribution::get(op.getResult().getType());
    if (!dist)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    rw.replaceOpWithMultiple(
        op, {SmallVector<Value>(dist->getNumElements(), adaptor.getValue())});
    return success();
  }
};

struct IotaLowering : public OpConversionPattern<IotaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(IotaOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> dist =
        TileDistribution::get(op.getResult().getType());
    if (!dist)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    ThreadCoords coords(rw, op.getLoc());
    SmallVector<Value> values;
    for (auto [row, col] : coords.positions(*dist))
      values.push_back(op.getAxis() == 0 ? row : col);
    rw.replaceOpWithMultiple(op, {values});
    return success();
  }
};

struct BroadcastLowering : public OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BroadcastOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> src =
        TileDistribution::get(op.getSource().getType());
    std::optional<TileDistribution> dst =
        TileDistribution::get(op.getResult().getType());
    if (!src || !dst)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    // The source must be held like the result with the broadcast dimensions
    // collapsed to index 0 (a grouped one projected onto its kept bits):
    // same lane and warp parts, so each result slot finds its value in a
    // slot of the same thread.
    ArrayRef<int64_t> srcShape = op.getSource().getType().getShape();
    std::optional<unsigned> grouped = op.getGroupedDim();
    auto collapse = [&](layout::Coord c) {
      for (unsigned d = 0; d < 2; ++d)
        if (grouped && d == *grouped)
          c[d] = layout::extractBits(c[d], *op.getGroups());
        else if (srcShape[d] == 1)
          c[d] = 0;
      return c;
    };
    const layout::LinearLayout &from = src->getLayout();
    const layout::LinearLayout &to = dst->getLayout();
    for (layout::InDim dim : {layout::InDim::Lane, layout::InDim::Warp}) {
      if (from.getNumBits(dim) != to.getNumBits(dim))
        return rw.notifyMatchFailure(op, "lane or warp counts differ");
      for (auto [a, b] : llvm::zip(from.getBases(dim), to.getBases(dim)))
        if (a != collapse(b))
          return rw.notifyMatchFailure(
              op, "source is not a slice of the result's layout");
    }
    DenseMap<std::pair<int32_t, int32_t>, int64_t> slotOf;
    for (int64_t r = src->getNumElements() - 1; r >= 0; --r) {
      layout::Coord c = src->slotOffset(r);
      slotOf[{c.row, c.col}] = r;
    }
    ValueRange in = adaptor.getSource();
    SmallVector<Value> values;
    for (int64_t r = 0; r < dst->getNumElements(); ++r) {
      layout::Coord c = collapse(dst->slotOffset(r));
      auto it = slotOf.find({c.row, c.col});
      if (it == slotOf.end())
        return rw.notifyMatchFailure(op, "source does not hold an element");
      values.push_back(in[it->second]);
    }
    rw.replaceOpWithMultiple(op, {values});
    return success();
  }
};

} // namespace

void mlir::sage::populateElementwiseToLLVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ElementwiseLowering, SplatConstantLowering, SplatLowering,
               IotaLowering, BroadcastLowering>(converter,
                                                patterns.getContext());
}
