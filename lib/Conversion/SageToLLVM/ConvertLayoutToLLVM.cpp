//===- ConvertLayoutToLLVM.cpp - moving tiles between encodings -----------===//
//
// One lowering for every `sagegpu.convert_layout`, chosen by the linear
// layouts of the two encodings (sage/Layout/LayoutConversion.h):
//   - in-thread: the destination's slots are source slots, renamed;
//   - warp shuffle: `shfl.sync.idx` per destination slot (the source lane is
//     linear in the reader's lane); when the source slot also depends on
//     some of the reader's lane bits, one round per value of those bits;
//   - shared memory: every thread writes the elements it owns to a padded
//     row-major tile in the op's scratch and reads back the ones it needs.
// `sagegpu.trans` is the last case with the reads transposed.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Layout/LayoutConversion.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Bytes per element in the scratch tile: at least 4, so that sub-word
/// elements of neighbouring threads never share a word being written.
int64_t scratchElementBytes(Type elem) {
  return std::max<int64_t>(4, (elem.getIntOrFloatBitWidth() + 7) / 8);
}

/// Row pitch of the scratch tile in bytes: one extra word per row moves
/// column-wise accesses of consecutive rows to different banks.
int64_t scratchPitch(RankedTensorType type) {
  return type.getDimSize(1) * scratchElementBytes(type.getElementType()) + 4;
}

/// A value widened to the 32 bits shuffles and scratch words move.
Value toWord(OpBuilder &b, Location loc, Value v) {
  Type t = v.getType();
  if (t.isInteger(32) || t.isF32())
    return v;
  Type word = b.getI32Type();
  if (auto f = dyn_cast<FloatType>(t))
    v = LLVM::BitcastOp::create(b, loc, b.getIntegerType(f.getWidth()), v);
  return LLVM::ZExtOp::create(b, loc, word, v);
}

Value fromWord(OpBuilder &b, Location loc, Value v, Type t) {
  if (v.getType() == t)
    return v;
  unsigned bits = t.getIntOrFloatBitWidth();
  Value narrow = LLVM::TruncOp::create(b, loc, b.getIntegerType(bits), v);
  if (isa<FloatType>(t))
    return LLVM::BitcastOp::create(b, loc, t, narrow);
  return narrow;
}

/// Through the scratch at byte `base`: the barriers before the writes
/// (earlier readers of these bytes) and after the reads are
/// sagegpu-insert-barriers' to place. With `transpose`, destination
/// element (r, c) is source element (c, r).
SmallVector<Value> throughSharedMemory(ThreadCoords &c,
                                       const TileDistribution &src,
                                       const TileDistribution &dst,
                                       ValueRange in, int64_t base,
                                       Operation *at, bool transpose = false) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  RankedTensorType type = src.getType();
  Type elem = type.getElementType();
  int64_t bytes = scratchElementBytes(elem), pitch = scratchPitch(type);
  auto address = [&](std::pair<Value, Value> pos) -> Value {
    Value row = arith::MulIOp::create(b, loc, pos.first, c.constant(pitch));
    Value col = arith::MulIOp::create(b, loc, pos.second, c.constant(bytes));
    return arith::AddIOp::create(
        b, loc, arith::AddIOp::create(b, loc, row, col), c.constant(base));
  };
  for (auto [slot, pos] : llvm::enumerate(c.positions(src))) {
    // Copies of a slot hold the same value: write it once per thread.
    // Threads holding copies write the same value to the same word.
    if (src.isSlotCopy(slot))
      continue;
    storeScratch(b, loc, toWord(b, loc, in[slot]), address(pos));
  }
  barrier(b, loc, at); // every write lands before any thread reads
  SmallVector<Value> out;
  for (auto pos : c.positions(dst)) {
    if (transpose)
      std::swap(pos.first, pos.second);
    Value word = loadScratch(b, loc, b.getI32Type(), address(pos));
    if (elem.isF32())
      word = LLVM::BitcastOp::create(b, loc, elem, word);
    out.push_back(fromWord(b, loc, word, elem));
  }
  return out;
}

/// The reader's lane bits XOR-combined through `perBit` (one i32 per lane
/// bit): the linear part of a shuffle plan's maps.
Value linearInLane(ThreadCoords &c, ArrayRef<int32_t> perBit) {
  Value acc = c.constant(0);
  for (auto [bit, image] : llvm::enumerate(perBit)) {
    if (image == 0)
      continue;
    Value set = arith::AndIOp::create(
        c.b, c.loc, arith::ShRUIOp::create(c.b, c.loc, c.lane, c.constant(bit)),
        c.constant(1));
    acc = arith::XOrIOp::create(
        c.b, c.loc, acc,
        arith::MulIOp::create(c.b, c.loc, set, c.constant(image)));
  }
  return acc;
}

/// One `shfl.sync.idx` per destination slot and per value of the reader's
/// lane bits that choose the source slot (the plan's register-select mask):
/// in each round every lane sends the slot readers with those bits need,
/// and each reader keeps its own round.
SmallVector<Value> throughShuffles(ThreadCoords &c,
                                   const layout::WarpShufflePlan &plan,
                                   Type elem, ValueRange in, int64_t slots) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  int32_t mask = plan.getRegisterSelectMask();
  Value laneXor = linearInLane(c, plan.laneBitToSrcLane);
  Value myBits = arith::AndIOp::create(b, loc, c.lane, c.constant(mask));
  SmallVector<Value> out;
  for (int64_t r = 0; r < slots; ++r) {
    Value lane = arith::XOrIOp::create(b, loc, laneXor,
                                       c.constant(plan.srcLaneOfRegister[r]));
    Value result;
    // Every assignment of the mask's bits, as a subset of the mask.
    for (int32_t bits = mask;; bits = (bits - 1) & mask) {
      int32_t slot = plan.srcRegisterOfRegister[r];
      for (unsigned i = 0; i < plan.laneBitToSrcRegister.size(); ++i)
        if (bits & (1 << i))
          slot ^= plan.laneBitToSrcRegister[i];
      Value word = toWord(b, loc, in[slot]);
      Value got = NVVM::ShflOp::create(b, loc, word.getType(), c.constant(-1),
                                       word, lane, c.constant(0x1f),
                                       NVVM::ShflKind::idx, UnitAttr());
      if (!result) {
        result = got;
      } else {
        Value mine = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                           myBits, c.constant(bits));
        result = arith::SelectOp::create(b, loc, mine, got, result);
      }
      if (bits == 0)
        break;
    }
    out.push_back(fromWord(b, loc, result, elem));
  }
  return out;
}

struct ConvertLayoutLowering
    : public OpConversionPattern<sagegpu::ConvertLayoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(sagegpu::ConvertLayoutOp op,
                                OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> src =
        TileDistribution::get(op.getSource().getType());
    std::optional<TileDistribution> dst =
        TileDistribution::get(op.getResult().getType());
    if (!src || !dst)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    Location loc = op.getLoc();
    ValueRange in = adaptor.getSource();
    SmallVector<Value> out;
    const layout::LinearLayout &from = src->getLayout(), &to = dst->getLayout();
    switch (layout::classifyConversion(from, to)) {
    case layout::ConversionKind::InThread: {
      std::optional<SmallVector<int32_t>> map =
          layout::getInThreadRegisterMap(from, to);
      for (int32_t slot : *map)
        out.push_back(in[slot]);
      break;
    }
    case layout::ConversionKind::WarpShuffle: {
      ThreadCoords c(rw, loc);
      out = throughShuffles(c, *layout::getWarpShufflePlan(from, to),
                            src->getType().getElementType(), in,
                            dst->getNumElements());
      break;
    }
    case layout::ConversionKind::SharedMemory: {
      ThreadCoords c(rw, loc);
      out = throughSharedMemory(c, *src, *dst, in, getScratchOffset(op), op);
      break;
    }
    }
    rw.replaceOpWithMultiple(op, {out});
    return success();
  }
};

struct TransLowering : public OpConversionPattern<sagegpu::TransOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(sagegpu::TransOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> src =
        TileDistribution::get(op.getSource().getType());
    std::optional<TileDistribution> dst =
        TileDistribution::get(op.getResult().getType());
    if (!src || !dst)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    ThreadCoords c(rw, op.getLoc());
    rw.replaceOpWithMultiple(
        op, {throughSharedMemory(c, *src, *dst, adaptor.getSource(),
                                 getScratchOffset(op), op,
                                 /*transpose=*/true)});
    return success();
  }
};

} // namespace

void mlir::sage::populateConvertLayoutToLLVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ConvertLayoutLowering, TransLowering>(converter,
                                                     patterns.getContext());
}

int64_t mlir::sage::getTransScratchBytes(Operation *op) {
  auto type = cast<RankedTensorType>(op->getOperand(0).getType());
  return type.getDimSize(0) * scratchPitch(type);
}

int64_t mlir::sage::getConvertLayoutScratchBytes(Operation *op) {
  auto convert = cast<sagegpu::ConvertLayoutOp>(op);
  std::optional<TileDistribution> src =
      TileDistribution::get(convert.getSource().getType());
  std::optional<TileDistribution> dst =
      TileDistribution::get(convert.getResult().getType());
  if (!src || !dst)
    return 0;
  layout::ConversionKind kind =
      layout::classifyConversion(src->getLayout(), dst->getLayout());
  if (kind == layout::ConversionKind::InThread)
    return 0;
  if (kind == layout::ConversionKind::WarpShuffle)
    return 0;
  RankedTensorType type = src->getType();
  return type.getDimSize(0) * scratchPitch(type);
}
