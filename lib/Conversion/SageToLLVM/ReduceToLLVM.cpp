//===- ReduceToLLVM.cpp - keep-dim reductions -----------------------------===//
//
// Three stages, read off the input's linear layout, each only over bits
// whose basis moves along the reduced axis (copies are never counted twice):
// combine the slots a thread holds, butterfly-shuffle across those lane
// bits, then combine those warps through shared memory. Every copy of the
// result ends up holding it, in the slice layout of the input.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Layout/Encodings.h"
#include "sage/Layout/LinearLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/bit.h"

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

/// The byte a slot widened from, if it is `extui`/`extsi` of an i8 to i32,
/// with whether it was signed.
static std::optional<std::pair<Value, bool>> widenedByte(Value v) {
  if (auto ext = v.getDefiningOp<arith::ExtUIOp>())
    if (ext.getIn().getType().isInteger(8))
      return std::pair{ext.getIn(), false};
  if (auto ext = v.getDefiningOp<arith::ExtSIOp>())
    if (ext.getIn().getType().isInteger(8))
      return std::pair{ext.getIn(), true};
  return std::nullopt;
}

/// The sum of slots that all widen bytes of one signedness to i32, four at
/// a time by `dp4a` (one instruction per four bytes, against a widening and
/// an add each): the bytes are packed into words in slot order, as the
/// register-A words of a matmul on the same tile are (DotLowering's
/// RegisterFragments: the four slots of a row a thread holds in a k-step of
/// 16), so the peepholes that make those words make these the same way and
/// the duplicates fold. Two chains of dp4a, each accumulating into the
/// last, joined by one add. Empty where the slots do not qualify.
static Value sumBytesByDp4a(OpBuilder &b, Location loc, ArrayRef<Value> slots) {
  if (slots.size() < 8 || slots.size() % 4)
    return {};
  SmallVector<Value> bytes;
  std::optional<bool> isSigned;
  for (Value v : slots) {
    std::optional<std::pair<Value, bool>> byte = widenedByte(v);
    if (!byte || (isSigned && *isSigned != byte->second))
      return {};
    isSigned = byte->second;
    bytes.push_back(byte->first);
  }
  auto wordType = VectorType::get({4}, b.getI8Type());
  Value ones = LLVM::ConstantOp::create(
      b, loc, wordType,
      DenseElementsAttr::get(wordType, b.getI8IntegerAttr(1)));
  auto aType = *isSigned ? NVVM::DotAccumulateType::SIGNED
                         : NVVM::DotAccumulateType::UNSIGNED;
  Value chains[2] = {arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0)),
                     arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0))};
  for (size_t w = 0; w < bytes.size() / 4; ++w) {
    Value word = LLVM::PoisonOp::create(b, loc, wordType);
    for (int32_t j = 0; j < 4; ++j)
      word = LLVM::InsertElementOp::create(
          b, loc, word, bytes[4 * w + j],
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
    Value &acc = chains[w % 2];
    acc = NVVM::DotAccumulate4WayOp::create(
        b, loc, b.getI32Type(), word, aType, ones,
        NVVM::DotAccumulateType::UNSIGNED, acc);
  }
  return arith::AddIOp::create(b, loc, chains[0], chains[1]);
}

static bool isSupported(Type elem) {
  return elem.isF32() || elem.isF16() || elem.isBF16() || elem.isInteger(32);
}

/// How a reduction along `axis` (over the index bits outside `groups`, a
/// mask of kept bits: 0 reduces the whole axis) splits over a layout's
/// input bits: the register, lane and warp bits that move along the reduced
/// index bits (to be combined) and the register slots that stay (one
/// partial each, in slot order).
struct ReducePlan {
  int32_t regMask = 0, laneMask = 0, warpMask = 0;
  int32_t groups = 0;
  SmallVector<int64_t> keptSlots;

  /// Fails when a basis moves along reduced bits and anything else at once.
  static std::optional<ReducePlan> get(const layout::LinearLayout &l,
                                       unsigned axis, int32_t groups) {
    ReducePlan plan;
    plan.groups = groups;
    for (auto [dim, mask] : {std::pair{layout::InDim::Register, &plan.regMask},
                             {layout::InDim::Lane, &plan.laneMask},
                             {layout::InDim::Warp, &plan.warpMask}})
      for (auto [bit, basis] : llvm::enumerate(l.getBases(dim))) {
        if ((basis[axis] & ~groups) == 0)
          continue;
        if (basis[1 - axis] != 0 || (basis[axis] & groups) != 0)
          return std::nullopt;
        *mask |= 1 << bit;
      }
    for (int64_t r = 0; r < l.getNumRegisters(); ++r)
      if ((r & plan.regMask) == 0 &&
          (r & l.getFreeMask(layout::InDim::Register)) == 0)
        plan.keptSlots.push_back(r);
    return plan;
  }

  /// The layout of the result: the input's with the reduced register bits
  /// gone, the reduced lane and warp bits made copies, and the rest
  /// projected onto the kept bits along the axis.
  layout::LinearLayout resultLayout(const layout::LinearLayout &l,
                                    unsigned axis) const {
    auto project = [&](layout::Coord c) {
      c[axis] = layout::extractBits(c[axis], groups);
      return c;
    };
    layout::LinearLayout::Bases reg, lane, warp;
    for (auto [bit, basis] :
         llvm::enumerate(l.getBases(layout::InDim::Register)))
      if (!(regMask & (1 << bit)) && !basis.isZero())
        reg.push_back(project(basis));
    auto collapse = [&](layout::InDim dim, int32_t mask,
                        layout::LinearLayout::Bases &out) {
      for (auto [bit, basis] : llvm::enumerate(l.getBases(dim)))
        out.push_back(mask & (1 << bit) ? layout::Coord{} : project(basis));
    };
    collapse(layout::InDim::Lane, laneMask, lane);
    collapse(layout::InDim::Warp, warpMask, warp);
    layout::TileShape shape = l.getShape();
    shape[axis] = int64_t(1) << llvm::popcount(uint32_t(groups));
    return layout::LinearLayout::distributed(shape, reg, lane, warp);
  }
};

struct ReduceLowering : public OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> in =
        TileDistribution::get(op.getInput().getType());
    std::optional<TileDistribution> out =
        TileDistribution::get(op.getResult().getType());
    if (!in || !out)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    Type elem =
        cast<RankedTensorType>(op.getInput().getType()).getElementType();
    if (!isSupported(elem))
      return op.emitOpError() << "reductions of " << elem
                              << " are not supported by the GPU lowering";
    unsigned axis = op.getAxis();
    std::optional<ReducePlan> plan =
        ReducePlan::get(in->getLayout(), axis, op.getGroups().value_or(0));
    if (!plan)
      return op.emitOpError("cannot reduce a layout whose bases mix reduced "
                            "index bits with other ones");
    // The result must be laid out as the reduction leaves it (layout
    // assignment gives it the input's slice encoding).
    if (plan->resultLayout(in->getLayout(), axis) != out->getLayout())
      return op.emitOpError("result layout is not the slice of the input's "
                            "along the reduced axis");
    Location loc = op.getLoc();
    ReduceKind kind = op.getKind();
    ValueRange values = adaptor.getInput();

    // 1. Within the thread: one partial per kept slot, over the slots that
    //    differ from it in reduced register bits (copies excluded), combined
    //    in a tree, not a chain of n - 1 dependent instructions (a softmax
    //    row's max and sum over 32 slots each waited out every FMNMX's and
    //    FADD's latency in turn). Floats combine pairwise. Integers combine
    //    three at a time, as combine(combine(a, b), c) with the inner value
    //    used once: ptxas fuses that into one three-input instruction
    //    (VIMNMX3, IADD3 on sm_90), where a pairwise tree's inner nodes fuse
    //    only every other level (two instructions per three operations). Sums
    //    of widened bytes take four a time (sumBytesByDp4a).
    SmallVector<Value> partial;
    int32_t freeRegs = in->getLayout().getFreeMask(layout::InDim::Register);
    for (int64_t kept : plan->keptSlots) {
      SmallVector<Value> level;
      for (int64_t r = 0; r < in->getNumElements(); ++r) {
        if ((r & ~plan->regMask) != kept || (r & freeRegs))
          continue;
        level.push_back(values[r]);
      }
      if (kind == ReduceKind::Sum)
        if (Value sum = sumBytesByDp4a(rw, loc, level)) {
          partial.push_back(sum);
          continue;
        }
      for (Value &v : level) {
        v = widen(rw, loc, v);
        if (kind == ReduceKind::AbsMax)
          v = absolute(rw, loc, v);
      }
      size_t arity = isa<FloatType>(level.front().getType()) ? 2 : 3;
      while (level.size() > 1) {
        SmallVector<Value> next;
        for (size_t i = 0; i < level.size(); i += arity) {
          Value node = level[i];
          for (size_t j = i + 1; j < std::min(i + arity, level.size()); ++j)
            node = combine(rw, loc, kind, node, level[j]);
          next.push_back(node);
        }
        level = std::move(next);
      }
      partial.push_back(level.front());
    }

    // 2. Across the lanes that spread the reduced dimension.
    ThreadCoords coords(rw, loc);
    Value fullMask = coords.constant(-1);
    Value clamp = coords.constant(0x1f);
    for (unsigned bit = 0; bit < 5; ++bit) {
      if (!(plan->laneMask & (1 << bit)))
        continue;
      Value offset = coords.constant(1 << bit);
      for (Value &acc : partial) {
        Value other =
            NVVM::ShflOp::create(rw, loc, acc.getType(), fullMask, acc, offset,
                                 clamp, NVVM::ShflKind::bfly, UnitAttr());
        acc = combine(rw, loc, kind, acc, other);
      }
    }

    // 3. Across the warps that spread it, in shared memory laid out as
    //    [warp with its other bits clear][output element], the output
    //    element at its row-major linear index.
    if (plan->warpMask) {
      int64_t outBytes = out->getType().getNumElements() * 4;
      int64_t outCols = out->getType().getDimSize(1);
      SmallVector<std::pair<Value, Value>> outPos = coords.positions(*out);
      auto byteIndex = [&](int64_t j) -> Value {
        Value linear = arith::AddIOp::create(
            rw, loc,
            arith::MulIOp::create(rw, loc, outPos[j].first,
                                  coords.constant(outCols)),
            outPos[j].second);
        return arith::MulIOp::create(rw, loc, linear, coords.constant(4));
      };
      Value warpPart = arith::AndIOp::create(rw, loc, coords.warp,
                                             coords.constant(plan->warpMask));
      Value warpBase = arith::AddIOp::create(
          rw, loc,
          arith::MulIOp::create(rw, loc, warpPart, coords.constant(outBytes)),
          coords.constant(getScratchOffset(op)));
      // All lanes of the dimension hold the full partial after step 2, so
      // they store the same value to the same address. The barriers before
      // the stores and after the loads are sagegpu-insert-barriers'.
      for (auto [j, acc] : llvm::enumerate(partial))
        storeScratch(rw, loc, acc,
                     arith::AddIOp::create(rw, loc, warpBase, byteIndex(j)));
      barrier(rw, loc, op);
      for (auto [j, acc] : llvm::enumerate(partial)) {
        Value index = byteIndex(j);
        Value result;
        // Every warp id made of reduced bits only.
        for (int32_t w = plan->warpMask;; w = (w - 1) & plan->warpMask) {
          Value at = arith::AddIOp::create(
              rw, loc, index,
              coords.constant(getScratchOffset(op) + w * outBytes));
          Value v = loadScratch(rw, loc, acc.getType(), at);
          result = result ? combine(rw, loc, kind, result, v) : v;
          if (w == 0)
            break;
        }
        acc = result;
      }
    }

    // Narrow back; the partials are the result's slots in order.
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
  std::optional<ReducePlan> plan = ReducePlan::get(
      in->getLayout(), op.getAxis(), op.getGroups().value_or(0));
  if (!plan || !plan->warpMask)
    return 0;
  // Indexed by the warp id with its other bits clear, up to the mask.
  return int64_t(plan->warpMask + 1) *
         op.getResult().getType().getNumElements() * 4;
}
