//===- Decompose.cpp - expand composite sage ops --------------------------===//
//
// Each pattern spells out the formula documented on its op (SageOps.td), so
// this file is also the executable statement of those semantics; the Python
// reference (python/sage/reference) states the same formulas in numpy.
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"
#include "sage/Quant/ConstantDivision.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

namespace mlir::sage {
#define GEN_PASS_DEF_SAGEDECOMPOSE
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Builds tile-level arithmetic at one location.
class TileBuilder {
public:
  TileBuilder(PatternRewriter &rw, Location loc) : rw(rw), loc(loc) {}

  RankedTensorType f32Tile(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, rw.getF32Type());
  }

  Value constant(RankedTensorType type, double value) {
    Attribute elem = rw.getFloatAttr(type.getElementType(), value);
    return arith::ConstantOp::create(rw, loc,
                                     DenseElementsAttr::get(type, {elem}));
  }

  Value toF32(Value tile) {
    auto type = cast<RankedTensorType>(tile.getType());
    if (type.getElementType().isF32())
      return tile;
    return arith::ExtFOp::create(rw, loc, f32Tile(type.getShape()), tile);
  }

  /// Broadcasts `tile` to `like`'s shape if it differs.
  Value broadcastLike(Value tile, Value like) {
    auto from = cast<RankedTensorType>(tile.getType());
    auto to = cast<RankedTensorType>(like.getType());
    if (from.getShape() == to.getShape())
      return tile;
    return BroadcastOp::create(
        rw, loc, RankedTensorType::get(to.getShape(), from.getElementType()),
        tile);
  }

  Value reduce(ReduceKind kind, Value tile, unsigned axis) {
    auto type = cast<RankedTensorType>(tile.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = 1;
    return ReduceOp::create(rw, loc,
                            RankedTensorType::get(shape, type.getElementType()),
                            kind, tile, axis, /*groups=*/nullptr);
  }

  Value add(Value a, Value b) { return arith::AddFOp::create(rw, loc, a, b); }
  Value sub(Value a, Value b) { return arith::SubFOp::create(rw, loc, a, b); }
  Value mul(Value a, Value b) { return arith::MulFOp::create(rw, loc, a, b); }
  Value div(Value a, Value b) { return arith::DivFOp::create(rw, loc, a, b); }
  Value neg(Value a) { return arith::NegFOp::create(rw, loc, a); }
  Value fma(Value a, Value b, Value c) {
    return math::FmaOp::create(rw, loc, a, b, c);
  }
  Value exp2(Value a) { return math::Exp2Op::create(rw, loc, a); }
  Value equal(Value a, Value b) {
    return arith::CmpFOp::create(rw, loc, arith::CmpFPredicate::OEQ, a, b);
  }
  Value select(Value c, Value a, Value b) {
    return arith::SelectOp::create(rw, loc, c, a, b);
  }

  PatternRewriter &rw;
  Location loc;
};

/// The scheme's granules must span whole dimensions or single elements, so
/// that scales are reductions along axes plus broadcasts.
static bool hasAxisAlignedGranules(ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> granule) {
  for (auto [dim, g] : llvm::zip_equal(shape, granule))
    if (g != dim && g != 1)
      return false;
  return true;
}

struct DecomposeSmooth : public OpRewritePattern<SmoothOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SmoothOp op,
                                PatternRewriter &rw) const override {
    TileBuilder b(rw, op.getLoc());
    Value x = b.toF32(op.getInput());
    unsigned axis = op.getAxis();
    auto meanType = op.getMean().getType();
    Value count = b.constant(
        meanType,
        static_cast<double>(op.getInput().getType().getDimSize(axis)));
    Value sum = b.reduce(ReduceKind::Sum, x, axis);
    Value mean = b.div(sum, count);
    rw.replaceOp(op, {b.sub(x, b.broadcastLike(mean, x)), mean});
    return success();
  }
};

/// absmax / qmax, correctly rounded. Where ConstantDivision.h proves it
/// exact, without a divide: a multiply and two FMAs, and +inf kept (the FMA
/// residual of an infinite absmax is NaN).
static Value divideByQmax(TileBuilder &b, Value absmax,
                          RankedTensorType scaleType, double qmax) {
  int64_t divisor = static_cast<int64_t>(qmax);
  if (static_cast<double>(divisor) != qmax || !isFmaDivisionExact(divisor))
    return b.div(absmax, b.constant(scaleType, qmax));
  Value d = b.constant(scaleType, qmax);
  Value c = b.constant(scaleType, static_cast<double>(1.0f / float(qmax)));
  Value q = b.mul(absmax, c);
  Value residual = b.fma(b.neg(q), d, absmax);
  Value quotient = b.fma(residual, c, q);
  Value inf = b.constant(scaleType, std::numeric_limits<double>::infinity());
  return b.select(b.equal(absmax, inf), inf, quotient);
}

struct DecomposeQuantize : public OpRewritePattern<QuantizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(QuantizeOp op,
                                PatternRewriter &rw) const override {
    QuantSchemeAttrInterface scheme = op.getScheme();
    auto outType = cast<RankedTensorType>(op.getOutput().getType());
    if (!outType.getElementType().isInteger())
      return rw.notifyMatchFailure(op, "only integer storage is decomposed");
    ArrayRef<int64_t> shape = outType.getShape();
    SmallVector<int64_t> granule = scheme.getGranuleShape(shape);
    if (!hasAxisAlignedGranules(shape, granule))
      return rw.notifyMatchFailure(op, "granules are not axis-aligned");

    TileBuilder b(rw, op.getLoc());
    double qmax = scheme.getQuantMax(), qmin = scheme.getQuantMin();
    bool isUnsigned = scheme.isUnsigned();
    Value x = b.toF32(op.getInput());
    RankedTensorType scaleType = op.getScales().getType();
    Value scales = op.getScale();
    if (!scales) {
      Value absmax = x;
      for (auto [axis, g] : llvm::enumerate(granule))
        if (g > 1)
          absmax = b.reduce(ReduceKind::AbsMax, absmax, axis);
      if (absmax == x) // one-element granules: absmax is |x| itself
        absmax = math::AbsFOp::create(rw, op.getLoc(), x);
      scales = divideByQmax(b, absmax, scaleType, qmax);
      // A subnormal scale is flushed to 0 (sage.quantize's semantics): a
      // computed scale is then normal or 0, and with it |x * inv| stays
      // below Q + 1/2, so such a quantize needs no upper clamp (an
      // unsigned one clamps negative inputs to 0).
      Value smallest =
          b.constant(scaleType, double(std::numeric_limits<float>::min()));
      Value subnormal = arith::CmpFOp::create(
          rw, op.getLoc(), arith::CmpFPredicate::OLT, scales, smallest);
      scales = b.select(subnormal, b.constant(scaleType, 0.0), scales);
    }
    // Ops are built one statement at a time: C++ leaves the order of
    // argument evaluation open, and the IR order must not depend on it.
    Value zero = b.constant(scaleType, 0.0);
    Value recip = b.div(b.constant(scaleType, 1.0), scales);
    Value isZero = b.equal(scales, zero);
    Value inv = b.select(isZero, zero, recip);
    // An unsaturated round-to-nearest-even quantize rounds the exact
    // product (sage.quantize): its multiply may contract with the rounding,
    // which the GPU lowering does (one FMA with the magic constant).
    bool exactProduct = op.getScale() && op.getUnsaturated() &&
                        scheme.getRoundingMode() == RoundingMode::RNE;
    Value scaled =
        exactProduct
            ? arith::MulFOp::create(rw, op.getLoc(), x, b.broadcastLike(inv, x),
                                    arith::FastMathFlags::contract)
                  .getResult()
            : b.mul(x, b.broadcastLike(inv, x));
    Value rounded;
    switch (scheme.getRoundingMode()) {
    case RoundingMode::RNE:
      rounded = math::RoundEvenOp::create(rw, op.getLoc(), scaled);
      break;
    case RoundingMode::RNA:
      rounded = math::RoundOp::create(rw, op.getLoc(), scaled);
      break;
    }
    Value clamped = rounded;
    auto tileType = b.f32Tile(shape);
    if (op.getScale() && !op.getUnsaturated()) {
      Value lo = b.constant(tileType, qmin);
      Value hi = b.constant(tileType, qmax);
      Value atLeastLo = arith::MaximumFOp::create(rw, op.getLoc(), rounded, lo);
      clamped = arith::MinimumFOp::create(rw, op.getLoc(), atLeastLo, hi);
    } else if (!op.getScale() && isUnsigned) {
      clamped = arith::MaximumFOp::create(rw, op.getLoc(), rounded,
                                          b.constant(tileType, qmin));
    }
    Value q = isUnsigned
                  ? arith::FPToUIOp::create(rw, op.getLoc(), outType, clamped)
                        .getResult()
                  : arith::FPToSIOp::create(rw, op.getLoc(), outType, clamped)
                        .getResult();
    rw.replaceOp(op, {q, scales});
    return success();
  }
};

struct DecomposeDequantize : public OpRewritePattern<DequantizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DequantizeOp op,
                                PatternRewriter &rw) const override {
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    if (!inType.getElementType().isInteger())
      return rw.notifyMatchFailure(op, "only integer storage is decomposed");
    if (!hasAxisAlignedGranules(
            inType.getShape(),
            op.getScheme().getGranuleShape(inType.getShape())))
      return rw.notifyMatchFailure(op, "granules are not axis-aligned");
    TileBuilder b(rw, op.getLoc());
    Type outType = op.getOutput().getType();
    Value x =
        op.getScheme().isUnsigned()
            ? arith::UIToFPOp::create(rw, op.getLoc(), outType, op.getInput())
                  .getResult()
            : arith::SIToFPOp::create(rw, op.getLoc(), outType, op.getInput())
                  .getResult();
    rw.replaceOp(op, b.mul(x, b.broadcastLike(op.getScales(), x)));
    return success();
  }
};

struct DecomposeSoftmaxUpdate : public OpRewritePattern<SoftmaxUpdateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxUpdateOp op,
                                PatternRewriter &rw) const override {
    TileBuilder b(rw, op.getLoc());
    auto statType = op.getRowMax().getType();
    Value t = op.getLogits();
    double scale = op.getScale().convertToDouble();
    if (scale != 1.0)
      t = b.mul(t, b.constant(op.getLogits().getType(), scale));
    Value rowMax = b.reduce(ReduceKind::Max, t, 1);
    Value newMax =
        arith::MaximumFOp::create(rw, op.getLoc(), op.getRowMax(), rowMax);
    // Rows with no finite logit yet use 0 as the exponent base: exp2 of -inf
    // is then 0 everywhere instead of NaN from (-inf) - (-inf).
    Value negInf =
        b.constant(statType, -std::numeric_limits<double>::infinity());
    Value zero = b.constant(statType, 0.0);
    Value masked = b.equal(newMax, negInf);
    Value base = b.select(masked, zero, newMax);
    Value alpha = b.exp2(b.sub(op.getRowMax(), base));
    Value p = b.exp2(b.sub(t, b.broadcastLike(base, t)));
    Value rowSum = b.reduce(ReduceKind::Sum, p, 1);
    Value newSum = b.add(b.mul(alpha, op.getRowSum()), rowSum);
    Value pMax = b.exp2(b.sub(rowMax, base));
    rw.replaceOp(op, {p, newMax, newSum, alpha, pMax});
    return success();
  }
};

struct DecomposePass : public sage::impl::SageDecomposeBase<DecomposePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::sage::populateDecomposePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeSmooth, DecomposeQuantize, DecomposeDequantize,
               DecomposeSoftmaxUpdate>(patterns.getContext());
}
