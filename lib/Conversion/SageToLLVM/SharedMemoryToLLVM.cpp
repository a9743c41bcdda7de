//===- SharedMemoryToLLVM.cpp - shared tiles, cp.async, barriers ----------===//
//
// A `!sagegpu.smem` value becomes the `!llvm.ptr<3>` of its first byte:
// `@sage_scratch` plus the offset `sagegpu-allocate-shared-memory` gave its
// local_alloc. Register tiles move in and out element by element at the
// addresses SharedTileAccess computes, vectorised where slots are
// contiguous; cp.async copies go 16 bytes per thread and instruction.
// No lowering here places barriers of its own: `sagegpu.barrier` ops are
// where sagegpu-insert-barriers put them.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/SharedTileAccess.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;
using namespace mlir::sagegpu;

namespace {

/// cp.async moves 16 bytes per instruction.
constexpr int64_t kPieceBytes = 16;

struct LocalAllocLowering : public OpConversionPattern<LocalAllocOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LocalAllocOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    if (!op.getOffset())
      return op.emitOpError("has no offset (run "
                            "sagegpu-allocate-shared-memory)");
    Location loc = op.getLoc();
    ThreadCoords c(rw, loc);
    Value base = getScratchPtr(rw, loc, c.constant(*op.getOffset()));
    if (Value init = op.getInit()) {
      std::optional<TileDistribution> dist =
          TileDistribution::get(init.getType());
      if (!dist)
        return rw.notifyMatchFailure(op, "tile has no distributed layout");
      accessSharedTile(c, SharedTileAccess(op.getResult().getType(), base),
                       *dist, adaptor.getInit(), /*store=*/true);
    }
    rw.replaceOp(op, base);
    return success();
  }
};

/// A ring's slot: the ring's address plus index x the slot's bytes.
struct RingSlotLowering : public OpConversionPattern<RingSlotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RingSlotOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value index = adaptor.getIndex().front();
    Value offset = LLVM::MulOp::create(
        rw, loc, index,
        LLVM::ConstantOp::create(
            rw, loc, index.getType(),
            rw.getIntegerAttr(index.getType(),
                              op.getResult().getType().getSizeInBytes())));
    Value base = adaptor.getRing().front();
    rw.replaceOp(op,
                 LLVM::GEPOp::create(rw, loc, base.getType(), rw.getI8Type(),
                                     base, ValueRange{offset}));
    return success();
  }
};

struct LocalStoreLowering : public OpConversionPattern<LocalStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LocalStoreOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> dist =
        TileDistribution::get(op.getValue().getType());
    if (!dist)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    ThreadCoords c(rw, op.getLoc());
    accessSharedTile(
        c, SharedTileAccess(op.getDest().getType(), adaptor.getDest().front()),
        *dist, adaptor.getValue(), /*store=*/true);
    rw.eraseOp(op);
    return success();
  }
};

struct LocalLoadLowering : public OpConversionPattern<LocalLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LocalLoadOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> dist =
        TileDistribution::get(op.getResult().getType());
    if (!dist)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    ThreadCoords c(rw, op.getLoc());
    rw.replaceOpWithMultiple(
        op, {accessSharedTile(c,
                              SharedTileAccess(op.getSource().getType(),
                                               adaptor.getSource().front()),
                              *dist, {}, /*store=*/false)});
    return success();
  }
};

/// The tile at ptr[offsets] moves to shared memory in 16-byte pieces of the
/// contiguous dimension: piece p is row p / piecesPerRow, chunk p %
/// piecesPerRow, and thread t issues pieces t, t + threads, ... Pieces past
/// the bounds are zero-filled (a source size below 16), as a register load
/// would pad.
struct AsyncCopyLowering : public OpConversionPattern<AsyncCopyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AsyncCopyOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    SharedTileType type = op.getDest().getType();
    auto encoding = cast<SharedEncodingAttr>(type.getEncoding());
    unsigned inner = encoding.getInner(), outer = 1 - inner;
    int64_t elemBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
    int64_t rows = type.getShape()[outer];
    int64_t perPiece = kPieceBytes / elemBytes;
    int64_t piecesPerRow = type.getShape()[inner] / perPiece;
    if (piecesPerRow == 0 || type.getShape()[inner] % perPiece != 0)
      return op.emitOpError("copies rows of whole 16-byte pieces only");
    int64_t pieces = rows * piecesPerRow;
    int64_t threads =
        SageDialect::getNumWarps(op->getParentOfType<ModuleOp>()) * 32;
    ThreadCoords c(rw, loc);
    SharedTileAccess tile(type, adaptor.getDest().front());

    // Piece index bit k -> tile coordinate (chunks first, then rows); bits
    // past the tile move nothing (those pieces are predicated off).
    auto pieceCoord = [&](int64_t bit) -> layout::Coord {
      int64_t value = int64_t(1) << bit;
      layout::Coord coord;
      if (value < piecesPerRow) {
        coord[inner] = int32_t(value * perPiece);
      } else if (value / piecesPerRow < rows) {
        coord[outer] = int32_t(value / piecesPerRow);
      }
      return coord;
    };
    auto pieceOffset = [&](int64_t piece) {
      layout::Coord coord;
      for (int64_t bit = 0; (int64_t(1) << bit) <= piece; ++bit)
        if (piece & (int64_t(1) << bit))
          coord ^= pieceCoord(bit);
      return tile.byteOffset(coord);
    };
    SmallVector<layout::Coord> lane, warp;
    for (int64_t bit = 0; bit < 5; ++bit)
      lane.push_back(pieceCoord(bit));
    for (int64_t bit = 5; (int64_t(1) << bit) < threads; ++bit)
      warp.push_back(pieceCoord(bit));
    int64_t mask = tile.threadMask(lane, warp);
    Value thread = tile.threadByteOffset(c, lane, warp);

    Type i64 = rw.getI64Type();
    Value ptr = adaptor.getPtr().front();
    SmallVector<Value> offsets, strides, bounds;
    for (ValueRange v : adaptor.getOffsets())
      offsets.push_back(v.front());
    for (ValueRange v : adaptor.getStrides())
      strides.push_back(v.front());
    for (ValueRange v : adaptor.getBounds())
      bounds.push_back(v.front());
    auto i64Const = [&](int64_t v) {
      return arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(v));
    };
    Value zero = i64Const(0);
    Type elem = type.getElementType();
    for (int64_t first = 0; first < pieces; first += threads) {
      Value piece = arith::AddIOp::create(rw, loc, c.tid, c.constant(first));
      Value inTile = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ult,
                                           piece, c.constant(pieces));
      Value row =
          arith::DivUIOp::create(rw, loc, piece, c.constant(piecesPerRow));
      Value k = arith::MulIOp::create(
          rw, loc,
          arith::RemUIOp::create(rw, loc, piece, c.constant(piecesPerRow)),
          c.constant(perPiece));
      Value dst = tile.address(
          rw, loc,
          SharedTileAccess::combine(c, thread, mask, pieceOffset(first)));
      Value gRow = arith::AddIOp::create(
          rw, loc, offsets[outer], arith::ExtUIOp::create(rw, loc, i64, row));
      Value gK = arith::AddIOp::create(rw, loc, offsets[inner],
                                       arith::ExtUIOp::create(rw, loc, i64, k));
      Value rowOk = arith::AndIOp::create(
          rw, loc,
          arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::sge, gRow, zero),
          arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::slt, gRow,
                                bounds[outer]));
      // Bytes of this piece inside the bounds: clamp((bound - k) * e, 0, 16).
      Value left = arith::MulIOp::create(
          rw, loc, arith::SubIOp::create(rw, loc, bounds[inner], gK),
          i64Const(elemBytes));
      Value clamped = arith::MaxSIOp::create(
          rw, loc, arith::MinSIOp::create(rw, loc, left, i64Const(kPieceBytes)),
          zero);
      Value kOk =
          arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::sge, gK, zero);
      Value bytes = arith::SelectOp::create(
          rw, loc, arith::AndIOp::create(rw, loc, rowOk, kOk), clamped, zero);
      Value element = arith::AddIOp::create(
          rw, loc, arith::MulIOp::create(rw, loc, gRow, strides[outer]),
          arith::MulIOp::create(rw, loc, gK, strides[inner]));
      // A piece with no bytes in bounds reads nothing, but keep its address
      // inside the allocation's range anyway: point it at the base.
      element = arith::SelectOp::create(
          rw, loc,
          arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq, bytes, zero),
          zero, element);
      Value src = LLVM::GEPOp::create(rw, loc, ptr.getType(), elem, ptr,
                                      ValueRange{element});
      inlinePtx(
          rw, loc, Type(),
          ValueRange{dst, src,
                     arith::TruncIOp::create(rw, loc, rw.getI32Type(), bytes),
                     inTile},
          "@$3 cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,b");
    }
    rw.eraseOp(op);
    return success();
  }
};

struct AsyncCommitGroupLowering
    : public OpConversionPattern<AsyncCommitGroupOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AsyncCommitGroupOp op, OpAdaptor,
                                ConversionPatternRewriter &rw) const override {
    NVVM::CpAsyncCommitGroupOp::create(rw, op.getLoc());
    rw.eraseOp(op);
    return success();
  }
};

struct AsyncWaitLowering : public OpConversionPattern<AsyncWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AsyncWaitOp op, OpAdaptor,
                                ConversionPatternRewriter &rw) const override {
    NVVM::CpAsyncWaitGroupOp::create(rw, op.getLoc(), op.getPending());
    rw.eraseOp(op);
    return success();
  }
};

struct BarrierLowering : public OpConversionPattern<BarrierOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BarrierOp op, OpAdaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    if (op.getFenceAsync()) // generic-proxy writes, then async-proxy reads
      NVVM::FenceProxyOp::create(
          rw, loc, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(rw.getContext(),
                                     NVVM::SharedSpace::shared_cta));
    barrier(rw, loc, op);
    rw.eraseOp(op);
    return success();
  }
};

/// Warpgroup g = tid / 128 waits at named barrier kFirstBarrier + g, or
/// arrives at the next warpgroup's; 256 threads meet at each (the waiting
/// warpgroup and the one passing it the turn).
struct WarpgroupTurnLowering : public OpConversionPattern<WarpgroupTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(WarpgroupTurnOp op, OpAdaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto i32 = [&](int64_t v) {
      return LLVM::ConstantOp::create(rw, loc, rw.getI32IntegerAttr(v));
    };
    Value tid = NVVM::ThreadIdXOp::create(rw, loc, rw.getI32Type());
    Value group = LLVM::UDivOp::create(rw, loc, tid,
                                       i32(WarpSpecializeOp::kProducerThreads));
    Value turn = group;
    if (op.getPass())
      turn = LLVM::URemOp::create(rw, loc,
                                  LLVM::AddOp::create(rw, loc, group, i32(1)),
                                  i32(op.getWarpgroups()));
    Value id =
        LLVM::AddOp::create(rw, loc, turn, i32(WarpgroupTurnOp::kFirstBarrier));
    std::string bar = (op.getPass() ? "bar.arrive $0, " : "bar.sync $0, ") +
                      std::to_string(2 * WarpSpecializeOp::kProducerThreads) +
                      ";";
    if (std::optional<int32_t> only = op.getOnly())
      bar = "{\n.reg .pred p;\nsetp.eq.u32 p, $1, " + std::to_string(*only) +
            ";\n@p " + bar + "\n}";
    inlinePtx(rw, loc, Type(), {id, group}, bar, "r,r");
    rw.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::sage::populateSharedMemoryToLLVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<LocalAllocLowering, RingSlotLowering, LocalStoreLowering,
               LocalLoadLowering, AsyncCopyLowering, AsyncCommitGroupLowering,
               AsyncWaitLowering, BarrierLowering, WarpgroupTurnLowering>(
      converter, patterns.getContext());
}
