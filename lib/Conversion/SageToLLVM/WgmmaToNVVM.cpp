//===- WgmmaToNVVM.cpp - sagegpu.dot on wgmma -----------------------------===//
//
// wgmma m64nNk32 (int8) / m64nNk16 (f16, bf16), one instruction per 64-row
// block a warpgroup owns in the accumulator layout (its N / 2 slots per
// block are the instruction's registers, in order) and per 32 bytes of K.
// B, and A unless it is in registers, are read through matrix descriptors
// of their K-major shared tiles (any swizzle; a swizzled 16-bit B may be
// MN-major, the transposed form); a register A (`#sagegpu.dot_op`)
// is packed into the instruction's four 32-bit words per K step from its slots.
// The dot ends at wgmma's commit_group: its result is in flight until the
// sagegpu.dot_wait that completes it (wait_group, its registers tied).
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Layout/SharedLayouts.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Matrix descriptors of one K-major shared operand: the constant fields
/// (strides, swizzle) and this thread's warpgroup part of the start address.
struct DescriptorBuilder {
  DescriptorBuilder(ThreadCoords &c, OperandTile tile)
      : c(&c), tile(std::move(tile)) {}

  /// The descriptor of the block starting at (row, k) (constants beyond the
  /// thread's warpgroup rows). The start address field counts 16 bytes and
  /// every shared address fits it, so a block whose offset adds to the
  /// thread's part is the origin's descriptor plus offset / 16: one add (in
  /// the uniform datapath, where wgmma reads descriptors) instead of the
  /// address's shift, mask and merge once per block.
  ///
  /// The adds start from an opaque move of the origin. Otherwise LLVM,
  /// which knows the origin's low bits clear and its high word constant,
  /// folds each add into the origin's `or` of the constant fields, and
  /// ptxas builds every such descriptor in two uniform instructions (ULOP3
  /// for the low word, UMOV for the constant high one) instead of one
  /// UIADD3.64: 9 instructions a trip fewer in the D = 128 SageBwd
  /// forward's loop (593 -> 584), 5 at D = 64 (834 -> 829).
  Value at(int32_t row, int32_t k) {
    OpBuilder &b = c->b;
    Location loc = c->loc;
    int64_t byteOffset = tile.byteOffset(row, k);
    if (thread && (mask & byteOffset) != 0)
      return encode(SharedTileAccess::combine(*c, thread, mask, byteOffset));
    if (!origin)
      origin = encode(thread ? thread : c->constant(0));
    if (byteOffset == 0)
      return origin;
    if (!opaqueOrigin)
      opaqueOrigin =
          inlinePtx(b, loc, b.getI64Type(), origin, "mov.b64 $0, $1;", "=l,l",
                    /*sideEffects=*/false);
    return arith::AddIOp::create(b, loc, opaqueOrigin, i64(byteOffset >> 4));
  }

  ThreadCoords *c;
  OperandTile tile;
  int64_t fields = 0, mask = 0;
  Value thread; // null: no per-thread part

private:
  Value i64(int64_t v) {
    return arith::ConstantOp::create(c->b, c->loc, c->b.getI64IntegerAttr(v));
  }

  /// The descriptor of the block at byte `offset` of the tile.
  Value encode(Value offset) {
    OpBuilder &b = c->b;
    Location loc = c->loc;
    Value addr = arith::ExtUIOp::create(b, loc, b.getI64Type(),
                                        tile.access.address(b, loc, offset));
    Value start = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, addr, i64(4)), i64(0x3FFF));
    return arith::OrIOp::create(b, loc, start, i64(fields));
  }

  /// The descriptor of the thread's origin (offset 0 past its part), and
  /// the same through an opaque move, where the other blocks' adds start.
  Value origin, opaqueOrigin;
};

/// One wgmma with A from registers (four 32-bit words) and B from `descB`,
/// accumulating into `acc`. MLIR 22's NVVM dialect has no op for this form:
/// it is inline PTX, whose accumulators are tied outputs.
Value emitWgmmaRegA(OpBuilder &b, Location loc, int64_t n, Type elemType,
                    Value acc, ArrayRef<Value> a, Value descB, bool mnMajorB,
                    bool unsignedA, bool accumulate) {
  bool isInt = elemType.isInteger(8);
  int64_t values = n / 2;
  std::string text, constraints;
  llvm::raw_string_ostream os(text), cs(constraints);
  auto list = [&](int64_t first, int64_t count) {
    os << "{";
    for (int64_t i = 0; i < count; ++i)
      os << (i ? ", " : "") << "$" << first + i;
    os << "}";
  };
  int64_t aFirst = 2 * values, descIndex = aFirst + 4,
          scaleIndex = descIndex + 1;
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << scaleIndex << ", 0;\n"
     << "wgmma.mma_async.sync.aligned.m64n" << n << "k"
     << mmaK(elemType.getIntOrFloatBitWidth())
     << (isInt && unsignedA ? ".s32.u8.s8 "
         : isInt            ? ".s32.s8.s8 "
         : elemType.isF16() ? ".f32.f16.f16 "
                            : ".f32.bf16.bf16 ");
  list(0, values);
  os << ", ";
  list(aFirst, 4);
  // Scale D by p; the 16-bit forms also take A and B scales (1) and B's
  // transpose (0: K-major, 1: MN-major).
  os << ", $" << descIndex << ", p"
     << (isInt      ? ""
         : mnMajorB ? ", 1, 1, 1"
                    : ", 1, 1, 0")
     << ";\n}";
  SmallVector<Value> operands;
  for (int64_t v = 0; v < values; ++v) {
    cs << (v ? "," : "") << (isInt ? "=r" : "=f");
    operands.push_back(LLVM::ExtractValueOp::create(b, loc, acc, v));
  }
  for (int64_t v = 0; v < values; ++v)
    cs << "," << v;
  cs << ",r,r,r,r,l,r";
  operands.append(a.begin(), a.end());
  operands.push_back(descB);
  operands.push_back(
      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(accumulate)));
  return inlinePtx(b, loc, acc.getType(), operands, text, constraints);
}

struct WgmmaDotLowering : public OpConversionPattern<sagegpu::DotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(sagegpu::DotOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    MmaKind kind = op.getMmaKind();
    if (!isWgmma(kind))
      return failure();
    FailureOr<DotShape> shape = getDotShape(op);
    if (failed(shape))
      return failure();
    std::optional<TileDistribution> out =
        TileDistribution::get(op.getResult().getType());
    if (!out)
      return rw.notifyMatchFailure(op, "result has no distributed layout");
    Location loc = op.getLoc();
    MLIRContext *ctx = rw.getContext();
    ThreadCoords c(rw, loc);
    const layout::LinearLayout &acc = out->getLayout();
    sagegpu::SharedTileType rhsType = op.getRhs().getType();
    Type elemType = rhsType.getElementType();
    bool isInt = elemType.isInteger(8);
    Type accType = op.getResult().getType().getElementType();
    int64_t n = shape->n;
    int64_t values = n / 2; // accumulator registers per thread per block
    auto structType = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(values, accType));
    NVVM::WGMMATypes inType = isInt              ? NVVM::WGMMATypes::s8
                              : elemType.isF16() ? NVVM::WGMMATypes::f16
                                                 : NVVM::WGMMATypes::bf16;
    // An unsigned i8 lhs (u8 x s8 products).
    NVVM::WGMMATypes lhsType =
        op.getLhsUnsigned() ? NVVM::WGMMATypes::u8 : inType;
    NVVM::WGMMATypes outType =
        isInt ? NVVM::WGMMATypes::s32 : NVVM::WGMMATypes::f32;

    // Each block's first row (relative to the warpgroup's), from the
    // layout: value 4j + e of a block is fragment value e of its 8-column
    // group j.
    int64_t blocks = acc.getNumRegisters() / values;
    SmallVector<int32_t> blockRows;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      layout::Coord origin =
          acc.applyDim(layout::InDim::Register, blk * values);
      bool ok = origin.col == 0;
      for (int64_t v = 0; ok && v < values; ++v)
        ok = acc.applyDim(layout::InDim::Register, blk * values + v) ==
             (origin ^ fragmentOffset(v % 4) ^
              layout::Coord{0, int32_t(8 * (v / 4))});
      if (!ok)
        return op.emitOpError("result encoding does not tile the "
                              "instruction's accumulator blocks");
      blockRows.push_back(origin.row);
    }
    // The warps' rows: within a warpgroup the instruction places them, so
    // only whole warpgroups (64-row steps) move a descriptor.
    SmallVector<int32_t> groupRows;
    for (layout::Coord basis : acc.getBases(layout::InDim::Warp))
      groupRows.push_back(basis.row >= 64 ? basis.row : 0);

    auto descriptors = [&](Value tile, ValueRange converted, unsigned contract,
                           int64_t rows, bool mnMajor) {
      auto type = cast<sagegpu::SharedTileType>(tile.getType());
      DescriptorBuilder d(
          c, {SharedTileAccess(type, converted.front()), contract});
      auto encoding = cast<sagegpu::SharedEncodingAttr>(type.getEncoding());
      int64_t bits = type.getElementType().getIntOrFloatBitWidth();
      unsigned swizzle = encoding.getSwizzle();
      // The encoding's layout (layout::shared) is what the descriptor
      // describes. K-major: 8-row groups SBO apart and, without a swizzle,
      // K-adjacent core matrices LBO apart. MN-major (swizzled): slabs of
      // M/N LBO apart (the whole tile's K rows), 8-row groups of K SBO
      // apart. K steps move the start address (inside a swizzled slab the
      // hardware applies the swizzle to the address bits, the tile being
      // aligned to its atoms).
      ArrayRef<int64_t> stored = type.getShape();
      layout::WgmmaStrides strides =
          mnMajor
              ? layout::getWgmmaMNMajorStrides(
                    {stored[contract], stored[1 - contract]}, bits, swizzle)
              : layout::getWgmmaKMajorStrides({rows, shape->k}, bits, swizzle);
      d.fields = int64_t(layout::encodeWgmmaDescriptor(
          0, strides.leadingByteOffset, strides.strideByteOffset, swizzle));
      return d;
    };
    bool mnMajorB = op.isMNMajorRhs();
    DescriptorBuilder descB =
        descriptors(op.getRhs(), adaptor.getRhs(), op.getRhsContractDim(),
                    shape->n, mnMajorB);
    std::optional<DescriptorBuilder> descA;
    if (kind == MmaKind::Wgmma) {
      descA = descriptors(op.getLhs(), adaptor.getLhs(), op.getLhsContractDim(),
                          shape->m, /*mnMajor=*/false);
      SmallVector<layout::Coord> warp;
      for (int32_t row : groupRows)
        warp.push_back(descA->tile.at(row, 0));
      descA->mask = descA->tile.access.threadMask({}, warp);
      descA->thread = descA->tile.access.threadByteOffset(c, {}, warp);
    }

    // The accumulator operand, block by block. A zero accumulator is not
    // materialised: the first K step ignores D (scale-d 0), so its
    // registers need no zeroing every trip. A splat constant is stored to
    // the op's 16 bytes of scratch by every thread (the same bytes: no
    // barrier) once, at the kernel's entry (the bytes are the op's alone
    // throughout: sagegpu-allocate-shared-memory), and read back four
    // registers a load, instead of one move a register every trip; the
    // loads are volatile, so that ptxas neither forwards the store nor
    // hoists them and copies registers instead.
    bool zeroInit = matchPattern(op.getAcc(), m_Zero()) ||
                    matchPattern(op.getAcc(), m_AnyZeroFloat());
    std::optional<uint32_t> splat = getSplatAccumulatorBits(op);
    Value splatAddr;
    if (splat) {
      auto offset = [&](OpBuilder &b) {
        return sharedAddress(b, loc,
                             LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                                      getScratchOffset(op)));
      };
      {
        OpBuilder::InsertionGuard atEntry(rw);
        rw.setInsertionPointToStart(&op->getParentOfType<FunctionOpInterface>()
                                         .getFunctionBody()
                                         .front());
        Value bits =
            LLVM::ConstantOp::create(rw, loc, rw.getI32Type(), int64_t(*splat));
        inlinePtx(rw, loc, Type(), {offset(rw), bits},
                  "st.shared.v4.b32 [$0], {$1, $1, $1, $1};", "r,r");
      }
      splatAddr = offset(rw);
    }
    ValueRange init = adaptor.getAcc();
    SmallVector<Value> accs;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      Value block = LLVM::UndefOp::create(rw, loc, structType);
      for (int64_t v = 0; splat && v < values; v += 4) {
        auto four = LLVM::LLVMStructType::getLiteral(
            ctx, SmallVector<Type>(4, accType));
        Value words = inlinePtx(
            rw, loc, four, {splatAddr},
            isInt ? "ld.volatile.shared.v4.b32 {$0, $1, $2, $3}, [$4];"
                  : "ld.volatile.shared.v4.f32 {$0, $1, $2, $3}, [$4];",
            isInt ? "=r,=r,=r,=r,r" : "=f,=f,=f,=f,r");
        for (int64_t w = 0; w < 4; ++w)
          block = LLVM::InsertValueOp::create(
              rw, loc, block, LLVM::ExtractValueOp::create(rw, loc, words, w),
              v + w);
      }
      for (int64_t v = 0; v < values && !zeroInit && !splat; ++v)
        block = LLVM::InsertValueOp::create(rw, loc, block,
                                            init[blk * values + v], v);
      accs.push_back(block);
    }
    int64_t steps = shape->steps();
    int32_t stepElems = int32_t(32 / shape->elemBytes);
    // Register A: the words of [block][step], in registers before the fence.
    SmallVector<SmallVector<Value, 4>> aWords;
    if (kind == MmaKind::WgmmaRegA) {
      std::optional<RegisterFragments> a = RegisterFragments::get(
          cast<RankedTensorType>(op.getLhs().getType()), adaptor.getLhs());
      if (!a)
        return rw.notifyMatchFailure(op, "register A has no layout");
      for (int32_t row : blockRows)
        for (int64_t ks = 0; ks < steps; ++ks) {
          FailureOr<SmallVector<Value, 4>> words = a->words(rw, loc, row, ks);
          if (failed(words))
            return op.emitOpError("register A encoding does not hold the "
                                  "instruction's A fragments");
          aWords.push_back(*words);
        }
    }
    NVVM::WgmmaFenceAlignedOp::create(rw, loc);
    for (auto [blk, row] : llvm::enumerate(blockRows)) {
      for (int64_t ks = 0; ks < steps; ++ks) {
        int32_t k0 = int32_t(ks) * stepElems;
        Value b = descB.at(0, k0);
        if (kind == MmaKind::WgmmaRegA) {
          accs[blk] = emitWgmmaRegA(rw, loc, n, elemType, accs[blk],
                                    aWords[blk * steps + ks], b, mnMajorB,
                                    op.getLhsUnsigned(),
                                    /*accumulate=*/!zeroInit || ks > 0);
          continue;
        }
        Value a = descA->at(row, k0);
        accs[blk] = NVVM::WgmmaMmaAsyncOp::create(
            rw, loc, structType, accs[blk], a, b,
            NVVM::MMAShapeAttr::get(ctx, 64, n,
                                    mmaK(elemType.getIntOrFloatBitWidth())),
            NVVM::WGMMATypesAttr::get(ctx, lhsType),
            NVVM::WGMMATypesAttr::get(ctx, inType),
            NVVM::WGMMATypesAttr::get(ctx, outType),
            NVVM::WGMMAScaleOutAttr::get(ctx, zeroInit && ks == 0
                                                  ? NVVM::WGMMAScaleOut::zero
                                                  : NVVM::WGMMAScaleOut::one),
            NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
            NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
            NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
            // B column-major is K-major; row-major its transpose.
            NVVM::MMALayoutAttr::get(ctx, mnMajorB ? NVVM::MMALayout::row
                                                   : NVVM::MMALayout::col),
            NVVM::MMAIntOverflowAttr());
      }
    }
    // One group per dot; its registers are in flight until the
    // sagegpu.dot_wait that completes it (the only user of the result).
    NVVM::WgmmaGroupSyncAlignedOp::create(rw, loc);

    SmallVector<Value> slots;
    for (Value block : accs)
      for (int64_t v = 0; v < values; ++v)
        slots.push_back(LLVM::ExtractValueOp::create(rw, loc, block, v));
    rw.replaceOpWithMultiple(op, {slots});
    return success();
  }
};

/// `wgmma.wait_group.sync.aligned pendings` as inline PTX whose operands
/// are every 32-bit register of the waited values, tied to its results
/// ("=r"/"=f" outputs, "0", "1", ... inputs): the values after the wait are
/// its results, so nothing reads them before it, and nothing may write
/// those registers across it (the accumulators stay where the wgmmas write
/// them, as ptxas requires to keep the wgmma pipeline asynchronous).
struct DotWaitLowering : public OpConversionPattern<sagegpu::DotWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(sagegpu::DotWaitOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    SmallVector<Value> regs;
    SmallVector<Type> types;
    std::string constraints;
    llvm::raw_string_ostream cs(constraints);
    for (ValueRange slots : adaptor.getInputs())
      for (Value slot : slots) {
        Type type = slot.getType();
        if (!type.isInteger(32) && !type.isF32())
          return rw.notifyMatchFailure(op, "accumulator slots are i32 or f32");
        cs << (regs.empty() ? "" : ",") << (type.isF32() ? "=f" : "=r");
        regs.push_back(slot);
        types.push_back(type);
      }
    // ptxas moves no instruction across the fence, so the wait stays below
    // the work placed before it (sagegpu.dot_wait's `fenced`).
    std::string text =
        std::string(op.getFenced() ? "fence.acq_rel.cta; " : "") +
        "wgmma.wait_group.sync.aligned " + std::to_string(op.getPendings()) +
        ";";
    if (regs.empty()) {
      // Only a bound on the groups in flight: an asm with side effects, so
      // that it stays in place.
      inlinePtx(rw, loc, Type(), {}, text, "", /*sideEffects=*/true);
      rw.eraseOp(op);
      return success();
    }
    for (size_t i = 0; i < regs.size(); ++i)
      cs << "," << i;
    Type result =
        types.size() == 1
            ? types.front()
            : LLVM::LLVMStructType::getLiteral(rw.getContext(), types);
    Value waited = inlinePtx(rw, loc, result, regs, text, constraints);
    SmallVector<SmallVector<Value>> outputs;
    size_t next = 0;
    for (ValueRange slots : adaptor.getInputs()) {
      SmallVector<Value> &out = outputs.emplace_back();
      for (size_t i = 0; i < slots.size(); ++i, ++next)
        out.push_back(types.size() == 1
                          ? waited
                          : LLVM::ExtractValueOp::create(rw, loc, waited, next)
                                .getResult());
    }
    rw.replaceOpWithMultiple(op, std::move(outputs));
    return success();
  }
};

} // namespace

void mlir::sage::populateWgmmaToNVVMPatterns(const TypeConverter &converter,
                                             RewritePatternSet &patterns) {
  patterns.add<WgmmaDotLowering, DotWaitLowering>(converter,
                                                  patterns.getContext());
}
