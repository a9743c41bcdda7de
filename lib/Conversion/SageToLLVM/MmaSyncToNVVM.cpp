//===- MmaSyncToNVVM.cpp - sagegpu.dot on mma.sync ------------------------===//
//
// mma.sync m16n8k32 (int8) / m16n8k16 (f16, bf16): each group of four slots
// of the accumulator layout is one instruction's fragment, at the tile the
// layout puts it. A and B fragments are 32-bit words of K loaded from the
// shared operands (lane 4g + q reads row g, word q, and their +8 row and +4
// word neighbours), addressed through the operands' shared encodings; a
// register A (`#sagegpu.dot_op`) already holds its words.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

constexpr int64_t kFragment = 4;

/// The fragment words of one shared operand: the thread part of their
/// offsets (lane: word q along k, group g along rows; warp: the warp's rows
/// from the accumulator's warp bases) is computed once.
class FragmentLoader {
public:
  FragmentLoader(ThreadCoords &c, OperandTile tile, Type wordType,
                 ArrayRef<int32_t> warpRows)
      : c(c), tile(std::move(tile)), wordType(wordType) {
    int32_t wordElems = 4 / this->tile.access.getElementBytes();
    SmallVector<layout::Coord> lane = {
        this->tile.at(0, wordElems), this->tile.at(0, 2 * wordElems),
        this->tile.at(1, 0), this->tile.at(2, 0), this->tile.at(4, 0)};
    SmallVector<layout::Coord> warp;
    for (int32_t row : warpRows)
      warp.push_back(this->tile.at(row, 0));
    mask = this->tile.access.threadMask(lane, warp);
    thread = this->tile.access.threadByteOffset(c, lane, warp);
  }

  /// The word at (row, k) relative to this thread's (group, quad) origin.
  Value word(int32_t row, int32_t k) {
    Value offset =
        SharedTileAccess::combine(c, thread, mask, tile.byteOffset(row, k));
    return LLVM::LoadOp::create(c.b, c.loc, wordType,
                                tile.access.pointer(c.b, c.loc, offset), 4);
  }

private:
  ThreadCoords &c;
  OperandTile tile;
  Type wordType;
  Value thread;
  int64_t mask = 0;
};

struct MmaSyncDotLowering : public OpConversionPattern<sagegpu::DotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(sagegpu::DotOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    if (op.getMmaKind() != MmaKind::MmaSync)
      return failure();
    FailureOr<DotShape> shape = getDotShape(op);
    if (failed(shape))
      return failure();
    std::optional<TileDistribution> out =
        TileDistribution::get(op.getResult().getType());
    if (!out)
      return rw.notifyMatchFailure(op, "result has no distributed layout");
    auto lhsType = dyn_cast<sagegpu::SharedTileType>(op.getLhs().getType());
    std::optional<RegisterFragments> regA;
    if (!lhsType) {
      regA = RegisterFragments::get(
          cast<RankedTensorType>(op.getLhs().getType()), adaptor.getLhs());
      if (!regA)
        return rw.notifyMatchFailure(op, "register A has no layout");
    }
    Location loc = op.getLoc();
    ThreadCoords c(rw, loc);
    const layout::LinearLayout &acc = out->getLayout();
    Type elemType = op.getRhs().getType().getElementType();
    bool isInt = elemType.isInteger(8);
    Type accType = op.getResult().getType().getElementType();
    auto resultType = LLVM::LLVMStructType::getLiteral(
        rw.getContext(), {accType, accType, accType, accType});
    NVVM::MMATypes ptxType = isInt              ? NVVM::MMATypes::s8
                             : elemType.isF16() ? NVVM::MMATypes::f16
                                                : NVVM::MMATypes::bf16;
    // An unsigned i8 lhs (u8 x s8 products).
    NVVM::MMATypes lhsPtxType =
        op.getLhsUnsigned() ? NVVM::MMATypes::u8 : ptxType;
    std::optional<NVVM::MMAIntOverflow> overflow;
    if (isInt) // the verifier bounds K so that int32 sums cannot overflow
      overflow = NVVM::MMAIntOverflow::wrapped;
    Type wordType = elemType.isF16() ? Type(VectorType::get({2}, elemType))
                                     : Type(rw.getI32Type());

    // Each instruction's tile, from the layout.
    int64_t tiles = acc.getNumRegisters() / kFragment;
    SmallVector<layout::Coord> origins;
    for (int64_t t = 0; t < tiles; ++t) {
      layout::Coord origin =
          acc.applyDim(layout::InDim::Register, t * kFragment);
      for (int64_t e = 0; e < kFragment; ++e)
        if (acc.applyDim(layout::InDim::Register, t * kFragment + e) !=
            (origin ^ fragmentOffset(e)))
          return op.emitOpError("result encoding does not tile the "
                                "instruction's accumulator fragments");
      origins.push_back(origin);
    }
    SmallVector<int32_t> warpRows, warpCols;
    for (layout::Coord basis : acc.getBases(layout::InDim::Warp)) {
      warpRows.push_back(basis.row);
      warpCols.push_back(basis.col);
    }
    std::optional<FragmentLoader> a;
    if (lhsType)
      a.emplace(c,
                OperandTile{SharedTileAccess(lhsType, adaptor.getLhs().front()),
                            op.getLhsContractDim()},
                wordType, warpRows);
    FragmentLoader b(
        c,
        {SharedTileAccess(op.getRhs().getType(), adaptor.getRhs().front()),
         op.getRhsContractDim()},
        wordType, warpCols);

    // The accumulator operand's slots, by instruction.
    ValueRange init = adaptor.getAcc();
    SmallVector<SmallVector<Value, 4>> accs;
    for (int64_t t = 0; t < tiles; ++t)
      accs.push_back(SmallVector<Value, 4>(init.begin() + t * kFragment,
                                           init.begin() + (t + 1) * kFragment));
    int32_t wordElems = int32_t(4 / shape->elemBytes);
    int32_t stepElems = int32_t(32 / shape->elemBytes);
    for (int64_t ks = 0; ks < shape->steps(); ++ks) {
      int32_t k0 = int32_t(ks) * stepElems;
      // Fragments shared by the tiles of one row (A) or column (B) block.
      DenseMap<int32_t, SmallVector<Value, 4>> fa;
      DenseMap<int32_t, SmallVector<Value, 2>> fb;
      for (auto [t, origin] : llvm::enumerate(origins)) {
        SmallVector<Value, 4> &wa = fa[origin.row];
        if (wa.empty() && regA) {
          FailureOr<SmallVector<Value, 4>> words =
              regA->words(rw, loc, origin.row, ks);
          if (failed(words))
            return op.emitOpError("register A encoding does not hold the "
                                  "instruction's A fragments");
          // mma.sync takes 16-bit pairs as vector<2xf16> words.
          for (Value w : *words)
            wa.push_back(wordType == rw.getI32Type()
                             ? w
                             : LLVM::BitcastOp::create(rw, loc, wordType, w));
        } else if (wa.empty()) {
          wa = {a->word(origin.row, k0), a->word(origin.row + 8, k0),
                a->word(origin.row, k0 + 4 * wordElems),
                a->word(origin.row + 8, k0 + 4 * wordElems)};
        }
        SmallVector<Value, 2> &wb = fb[origin.col];
        if (wb.empty())
          wb = {b.word(origin.col, k0), b.word(origin.col, k0 + 4 * wordElems)};
        SmallVector<Value, 4> &frag = accs[t];
        Value d = NVVM::MmaOp::create(
            rw, loc, resultType, wa, wb, frag,
            {16, 8, mmaK(elemType.getIntOrFloatBitWidth())}, std::nullopt,
            overflow, std::array<NVVM::MMATypes, 2>{lhsPtxType, ptxType},
            std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                           NVVM::MMALayout::col});
        for (int64_t e = 0; e < kFragment; ++e)
          frag[e] = LLVM::ExtractValueOp::create(rw, loc, d, e);
      }
    }
    SmallVector<Value> slots;
    for (const SmallVector<Value, 4> &frag : accs)
      slots.append(frag.begin(), frag.end());
    rw.replaceOpWithMultiple(op, {slots});
    return success();
  }
};

} // namespace

void mlir::sage::populateMmaSyncToNVVMPatterns(const TypeConverter &converter,
                                               RewritePatternSet &patterns) {
  patterns.add<MmaSyncDotLowering>(converter, patterns.getContext());
}
