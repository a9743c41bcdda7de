//===- ElementwiseToLLVM.cpp - per-element ops on tiles -------------------===//
//
// Every tile of a program shares one blocked layout, so an elementwise op on
// tiles becomes the same op on each pair of held elements, and a broadcast
// moves no data (see TileDistribution).
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

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
      return rw.notifyMatchFailure(op, "tile has no blocked layout");
    int64_t n = dist->getNumElements();
    for (ValueRange values : operands)
      if (static_cast<int64_t>(values.size()) != n)
        return rw.notifyMatchFailure(op, "operand layouts differ");
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
      return rw.notifyMatchFailure(op, "tile has no blocked layout");
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
      return rw.notifyMatchFailure(op, "tile has no blocked layout");
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
    if (!src || !dst || src->getLayout() != dst->getLayout())
      return rw.notifyMatchFailure(op, "needs one blocked layout");
    ValueRange in = adaptor.getSource();
    SmallVector<Value> values;
    for (int64_t k0 = 0; k0 < dst->dim(0).count(); ++k0)
      for (int64_t k1 = 0; k1 < dst->dim(1).count(); ++k1) {
        // A size-1 source dimension holds its single element at index 0.
        int64_t s0 = src->dim(0).extent == 1 ? 0 : k0;
        int64_t s1 = src->dim(1).extent == 1 ? 0 : k1;
        values.push_back(in[src->slot(s0, s1)]);
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
