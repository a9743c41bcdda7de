//===- ReduceToLLVM.cpp - keep-dim reductions -----------------------------===//
//
// Three stages, each only over threads that hold distinct data (replicated
// copies must not be counted twice): combine the elements a thread holds,
// butterfly-shuffle across the lanes of the dimension, then combine the
// warps of the dimension through shared memory. Every copy of the result
// ends up holding it, as the keep-dim result layout requires.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// The combiner of a reduction on 32-bit values (f32 or i32).
static Value combine(OpBuilder &b, Location loc, ReduceKind kind, Value a,
                     Value c) {
  bool isFloat = isa<FloatType>(a.getType());
  switch (kind) {
  case ReduceKind::Sum:
    return isFloat ? Value(arith::AddFOp::create(b, loc, a, c))
                   : Value(arith::AddIOp::create(b, loc, a, c));
  case ReduceKind::Max:
  case ReduceKind::AbsMax: // operands are already absolute values
    return isFloat ? Value(arith::MaximumFOp::create(b, loc, a, c))
                   : Value(arith::MaxSIOp::create(b, loc, a, c));
  case ReduceKind::Min:
    return isFloat ? Value(arith::MinimumFOp::create(b, loc, a, c))
                   : Value(arith::MinSIOp::create(b, loc, a, c));
  }
  llvm_unreachable("unknown reduce kind");
}

/// Widens 16-bit floats to f32 (exact) so shuffles and sums use 32 bits.
static Value widen(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF16() || v.getType().isBF16())
    return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  return v;
}

static Value absolute(OpBuilder &b, Location loc, Value v) {
  if (isa<FloatType>(v.getType()))
    return math::AbsFOp::create(b, loc, v);
  return math::AbsIOp::create(b, loc, v);
}

static bool isSupported(Type elem) {
  return elem.isF32() || elem.isF16() || elem.isBF16() || elem.isInteger(32);
}

struct ReduceLowering : public OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> in =
        TileDistribution::get(op.getInput().getType());
    std::optional<TileDistribution> out =
        TileDistribution::get(op.getResult().getType());
    if (!in || !out)
      return rw.notifyMatchFailure(op, "tile has no blocked layout");
    Type elem =
        cast<RankedTensorType>(op.getInput().getType()).getElementType();
    if (!isSupported(elem))
      return op.emitOpError() << "reductions of " << elem
                              << " are not supported by the GPU lowering";
    Location loc = op.getLoc();
    unsigned axis = op.getAxis();
    unsigned other = 1 - axis;
    ReduceKind kind = op.getKind();
    ValueRange values = adaptor.getInput();
    const DimDistribution &dim = in->dim(axis);

    // 1. Within the thread: one partial per held element of the other axis.
    SmallVector<Value> partial;
    for (int64_t j = 0; j < in->dim(other).count(); ++j) {
      Value acc;
      for (int64_t k = 0; k < dim.count(); ++k) {
        Value v = values[axis == 1 ? in->slot(j, k) : in->slot(k, j)];
        v = widen(rw, loc, v);
        if (kind == ReduceKind::AbsMax)
          v = absolute(rw, loc, v);
        acc = acc ? combine(rw, loc, kind, acc, v) : v;
      }
      partial.push_back(acc);
    }

    // 2. Across the lanes of the reduced dimension.
    ThreadCoords coords(rw, loc);
    Value fullMask = coords.constant(-1);
    Value clamp = coords.constant(0x1f);
    for (unsigned lanes = 1; lanes < dim.distinctLanes(); lanes *= 2) {
      Value offset = coords.constant(lanes * dim.laneStride);
      for (Value &acc : partial) {
        Value other =
            NVVM::ShflOp::create(rw, loc, acc.getType(), fullMask, acc, offset,
                                 clamp, NVVM::ShflKind::bfly, UnitAttr());
        acc = combine(rw, loc, kind, acc, other);
      }
    }

    // 3. Across the warps of the reduced dimension, in shared memory laid out
    //    as [warp][output element]; the output has one dimension of extent 1,
    //    so its linear index is the position along the other dimension.
    unsigned warps = dim.distinctWarps();
    if (warps > 1) {
      int64_t outBytes = out->getType().getNumElements() * 4;
      const DimDistribution &outOther = out->dim(other);
      Value otherBase = coords.base(outOther);
      auto byteIndex = [&](int64_t j) -> Value {
        Value along = arith::AddIOp::create(
            rw, loc, otherBase, coords.constant(outOther.offset(j)));
        return arith::MulIOp::create(rw, loc, along, coords.constant(4));
      };
      // Replica warps write the same values as the warp they copy; folding
      // their coordinate keeps every write inside the buffer.
      Value warpCoord = arith::AndIOp::create(rw, loc, coords.warpCoord(dim),
                                              coords.constant(warps - 1));
      Value warpBase =
          arith::MulIOp::create(rw, loc, warpCoord, coords.constant(outBytes));
      // All lanes of the dimension hold the full partial after step 2, so
      // they store the same value to the same address.
      barrier(rw, loc);
      for (auto [j, acc] : llvm::enumerate(partial))
        storeScratch(rw, loc, acc,
                     arith::AddIOp::create(rw, loc, warpBase, byteIndex(j)));
      barrier(rw, loc);
      for (auto [j, acc] : llvm::enumerate(partial)) {
        Value index = byteIndex(j);
        Value result;
        for (unsigned w = 0; w < warps; ++w) {
          Value at = arith::AddIOp::create(rw, loc, index,
                                           coords.constant(w * outBytes));
          Value v = loadScratch(rw, loc, acc.getType(), at);
          result = result ? combine(rw, loc, kind, result, v) : v;
        }
        acc = result;
      }
      barrier(rw, loc);
    }

    // Narrow back and lay the results out in the kept-dim result order.
    SmallVector<Value> results;
    for (Value acc : partial)
      results.push_back(acc.getType() == elem ? acc
                                              : Value(arith::TruncFOp::create(
                                                    rw, loc, elem, acc)));
    rw.replaceOpWithMultiple(op, {results});
    return success();
  }
};

} // namespace

void mlir::sage::populateReduceToLLVMPatterns(const TypeConverter &converter,
                                              RewritePatternSet &patterns) {
  patterns.add<ReduceLowering>(converter, patterns.getContext());
}

int64_t mlir::sage::getReduceScratchBytes(ReduceOp op) {
  std::optional<TileDistribution> in =
      TileDistribution::get(op.getInput().getType());
  if (!in)
    return 0;
  unsigned warps = in->dim(op.getAxis()).distinctWarps();
  if (warps <= 1)
    return 0;
  return int64_t(warps) * op.getResult().getType().getNumElements() * 4;
}
