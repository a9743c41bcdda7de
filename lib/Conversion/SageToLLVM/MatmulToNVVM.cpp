//===- MatmulToNVVM.cpp - qmatmul and matmul through mma.sync -------------===//
//
// Operands arrive in the program's blocked layout. They are staged through
// shared memory in K-major order (each row of A and of B holds its K
// elements contiguously), which is what mma.sync wants for both operands and
// how a transposed operand (dV = P^T dO, dK = dS^T Q) becomes K-major.
// Warps then compute 16x8 output blocks, write the accumulators back to
// shared memory, and every thread reads the elements it holds in the result
// layout, applying the scales (and the accumulator operand).
//
// The int8 m16n8k32 and the f16/bf16 m16n8k16 instructions have the same
// fragment geometry in 32-bit words of K, so one code path serves both.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Rows of shared memory are padded by this many bytes so that the eight
/// rows a fragment load touches fall in different banks.
constexpr int64_t kRowPadBytes = 16;
/// mma.sync m16n8: rows and columns of one output block.
constexpr int64_t kMmaM = 16, kMmaN = 8;
/// K of one mma.sync, in 32-bit words (32 int8 or 16 f16/bf16 elements).
constexpr int64_t kMmaKWords = 8;

/// Sizes and shared-memory placement of one matmul.
struct MatmulGeometry {
  int64_t m, n, k;
  int64_t elemBytes;
  int64_t lhsScaleElems = 0, rhsScaleElems = 0;
  int64_t pitchA, pitchB, pitchC; // bytes per staged row
  int64_t lhsScaleBase = 0, rhsScaleBase = 0, lhsBase, rhsBase, resultBase;
  int64_t totalBytes;
  unsigned warpsM, warpsN;

  int64_t kPerMma() const { return kMmaKWords * 4 / elemBytes; }
};

static int64_t alignTo16(int64_t v) { return (v + 15) / 16 * 16; }

/// Fails with a diagnostic when the shapes do not fit mma.sync tiling.
static FailureOr<MatmulGeometry> getGeometry(Operation *op, Value lhs,
                                             unsigned lhsContract,
                                             Type lhsScale, Type rhsScale,
                                             RankedTensorType result) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto layout = dyn_cast_or_null<BlockedLayoutAttr>(result.getEncoding());
  if (!layout)
    return op->emitOpError("needs a blocked layout (run sage-assign-layouts)");
  MatmulGeometry g;
  g.m = result.getDimSize(0);
  g.n = result.getDimSize(1);
  g.k = lhsType.getDimSize(lhsContract);
  g.elemBytes = lhsType.getElementTypeBitWidth() / 8;
  unsigned warps = layout.getNumWarps();
  g.warpsM = std::min<int64_t>(warps, std::max<int64_t>(1, g.m / kMmaM));
  g.warpsN = warps / g.warpsM;
  if (g.m % (kMmaM * g.warpsM) || g.n % (kMmaN * g.warpsN) || g.k % g.kPerMma())
    return op->emitOpError()
           << "mma_sync lowering needs M a multiple of " << kMmaM * g.warpsM
           << ", N of " << kMmaN * g.warpsN << " and K of " << g.kPerMma()
           << ", got " << g.m << "x" << g.n << "x" << g.k;
  if (lhsScale)
    g.lhsScaleElems = cast<RankedTensorType>(lhsScale).getNumElements();
  if (rhsScale)
    g.rhsScaleElems = cast<RankedTensorType>(rhsScale).getNumElements();
  g.rhsScaleBase = g.lhsScaleElems * 4;
  g.pitchA = g.k * g.elemBytes + kRowPadBytes;
  g.pitchB = g.pitchA;
  g.pitchC = g.n * 4 + kRowPadBytes;
  g.lhsBase = alignTo16((g.lhsScaleElems + g.rhsScaleElems) * 4);
  g.rhsBase = g.lhsBase + g.m * g.pitchA;
  g.resultBase = g.lhsBase; // operands are dead once the MMAs are done
  g.totalBytes =
      g.lhsBase + std::max(g.m * g.pitchA + g.n * g.pitchB, g.m * g.pitchC);
  return g;
}

/// The per-thread (row, col) of every held element of a tile, as i32.
static SmallVector<std::pair<Value, Value>>
heldPositions(ThreadCoords &c, const TileDistribution &dist) {
  Value base0 = c.base(dist.dim(0)), base1 = c.base(dist.dim(1));
  SmallVector<std::pair<Value, Value>> out;
  for (int64_t k0 = 0; k0 < dist.dim(0).count(); ++k0)
    for (int64_t k1 = 0; k1 < dist.dim(1).count(); ++k1)
      out.push_back(
          {arith::AddIOp::create(c.b, c.loc, base0,
                                 c.constant(dist.dim(0).offset(k0))),
           arith::AddIOp::create(c.b, c.loc, base1,
                                 c.constant(dist.dim(1).offset(k1)))});
  return out;
}

/// base + row * pitch + col * bytes, all i32.
static Value byteAddress(ThreadCoords &c, int64_t base, Value row,
                         int64_t pitch, Value col, int64_t bytes) {
  Value r = arith::MulIOp::create(c.b, c.loc, row, c.constant(pitch));
  Value cc = arith::MulIOp::create(c.b, c.loc, col, c.constant(bytes));
  Value sum = arith::AddIOp::create(c.b, c.loc, r, cc);
  return arith::AddIOp::create(c.b, c.loc, sum, c.constant(base));
}

/// Writes an operand tile as [row][k] rows of `pitch` bytes at `base`.
static void stageOperand(ThreadCoords &c, Value tile, ValueRange values,
                         unsigned contractDim, int64_t base, int64_t pitch,
                         int64_t elemBytes) {
  std::optional<TileDistribution> dist = TileDistribution::get(tile.getType());
  for (auto [pos, value] : llvm::zip(heldPositions(c, *dist), values)) {
    auto [r, col] = pos;
    Value row = contractDim == 1 ? r : col;
    Value kk = contractDim == 1 ? col : r;
    storeScratch(c.b, c.loc, value,
                 byteAddress(c, base, row, pitch, kk, elemBytes));
  }
}

/// Writes a scale tile linearly (row-major) at `base`.
static void stageScale(ThreadCoords &c, Value tile, ValueRange values,
                       int64_t base) {
  std::optional<TileDistribution> dist = TileDistribution::get(tile.getType());
  int64_t cols = dist->getType().getDimSize(1);
  for (auto [pos, value] : llvm::zip(heldPositions(c, *dist), values))
    storeScratch(c.b, c.loc, value,
                 byteAddress(c, base, pos.first, cols * 4, pos.second, 4));
}

/// Runs the warp-level MMAs over the staged operands and writes the 32-bit
/// accumulators to the result rows.
static void emitMmas(ThreadCoords &c, const MatmulGeometry &g, Type elemType) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  MLIRContext *ctx = b.getContext();
  bool isInt = elemType.isInteger(8);
  Type accType = isInt ? Type(b.getI32Type()) : Type(b.getF32Type());
  auto resultType = LLVM::LLVMStructType::getLiteral(
      ctx, {accType, accType, accType, accType});
  NVVM::MMATypes ptxType = isInt              ? NVVM::MMATypes::s8
                           : elemType.isF16() ? NVVM::MMATypes::f16
                                              : NVVM::MMATypes::bf16;
  std::optional<NVVM::MMAIntOverflow> overflow;
  if (isInt) // the verifier bounds K so that int32 sums cannot overflow
    overflow = NVVM::MMAIntOverflow::wrapped;
  Type wordType = elemType.isF16() ? Type(VectorType::get({2}, elemType))
                                   : Type(b.getI32Type());

  Value group = arith::ShRUIOp::create(b, loc, c.lane, c.constant(2));
  Value quad = arith::AndIOp::create(b, loc, c.lane, c.constant(3));
  Value warpM = arith::AndIOp::create(b, loc, c.warp, c.constant(g.warpsM - 1));
  Value warpN = arith::ShRUIOp::create(b, loc, c.warp,
                                       c.constant(llvm::Log2_32(g.warpsM)));
  Value rowInBlock = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, warpM, c.constant(kMmaM)), group);
  Value colInBlock = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, warpN, c.constant(kMmaN)), group);
  auto loadWord = [&](int64_t base, Value row, int64_t rowOffset, int64_t pitch,
                      int64_t word) -> Value {
    Value r = arith::AddIOp::create(b, loc, row, c.constant(rowOffset));
    Value w = arith::AddIOp::create(b, loc, quad, c.constant(word));
    Value v = loadScratch(b, loc, b.getI32Type(),
                          byteAddress(c, base, r, pitch, w, 4));
    return wordType == v.getType()
               ? v
               : Value(LLVM::BitcastOp::create(b, loc, wordType, v));
  };

  int64_t tilesM = g.m / (kMmaM * g.warpsM), tilesN = g.n / (kMmaN * g.warpsN);
  Value zero = isInt ? arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0))
                     : arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  SmallVector<SmallVector<Value, 4>> acc(tilesM * tilesN,
                                         SmallVector<Value, 4>(4, zero));
  for (int64_t ks = 0; ks < g.k / g.kPerMma(); ++ks) {
    int64_t word0 = ks * kMmaKWords;
    SmallVector<SmallVector<Value, 4>> a(tilesM), bf(tilesN);
    for (int64_t i = 0; i < tilesM; ++i) {
      int64_t row = i * kMmaM * g.warpsM;
      a[i] = {loadWord(g.lhsBase, rowInBlock, row, g.pitchA, word0),
              loadWord(g.lhsBase, rowInBlock, row + 8, g.pitchA, word0),
              loadWord(g.lhsBase, rowInBlock, row, g.pitchA, word0 + 4),
              loadWord(g.lhsBase, rowInBlock, row + 8, g.pitchA, word0 + 4)};
    }
    for (int64_t j = 0; j < tilesN; ++j) {
      int64_t col = j * kMmaN * g.warpsN;
      bf[j] = {loadWord(g.rhsBase, colInBlock, col, g.pitchB, word0),
               loadWord(g.rhsBase, colInBlock, col, g.pitchB, word0 + 4)};
    }
    for (int64_t i = 0; i < tilesM; ++i)
      for (int64_t j = 0; j < tilesN; ++j) {
        SmallVector<Value, 4> &cfrag = acc[i * tilesN + j];
        Value d = NVVM::MmaOp::create(
            b, loc, resultType, a[i], bf[j], cfrag, {kMmaM, kMmaN, g.kPerMma()},
            std::nullopt, overflow,
            std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
            std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                           NVVM::MMALayout::col});
        for (int64_t e = 0; e < 4; ++e)
          cfrag[e] = LLVM::ExtractValueOp::create(b, loc, d, e);
      }
  }
  barrier(b, loc); // every warp is done reading the operands

  // Accumulator fragment e holds row group + 8 * (e / 2), column
  // 2 * quad + e % 2 of its 16x8 block.
  Value col2 = arith::MulIOp::create(b, loc, quad, c.constant(2));
  for (int64_t i = 0; i < tilesM; ++i)
    for (int64_t j = 0; j < tilesN; ++j)
      for (int64_t e = 0; e < 4; ++e) {
        Value row = arith::AddIOp::create(
            b, loc, rowInBlock, c.constant(i * kMmaM * g.warpsM + 8 * (e / 2)));
        Value colBase = arith::MulIOp::create(b, loc, warpN, c.constant(kMmaN));
        Value col = arith::AddIOp::create(
            b, loc, arith::AddIOp::create(b, loc, colBase, col2),
            c.constant(j * kMmaN * g.warpsN + e % 2));
        storeScratch(b, loc, acc[i * tilesN + j][e],
                     byteAddress(c, g.resultBase, row, g.pitchC, col, 4));
      }
  barrier(b, loc);
}

/// Shared by both matmul ops: stage, multiply, read back with the epilogue.
template <typename OpTy>
static LogicalResult
lowerMatmul(OpTy op, ValueRange lhs, ValueRange rhs, ValueRange lhsScale,
            ValueRange rhsScale, ValueRange acc, Type lhsScaleType,
            Type rhsScaleType, ConversionPatternRewriter &rw) {
  RankedTensorType resultType = op.getResult().getType();
  FailureOr<MatmulGeometry> geometry =
      getGeometry(op, op.getLhs(), op.getLhsContractDim(), lhsScaleType,
                  rhsScaleType, resultType);
  if (failed(geometry))
    return failure();
  const MatmulGeometry &g = *geometry;
  std::optional<TileDistribution> out = TileDistribution::get(resultType);
  if (!out)
    return rw.notifyMatchFailure(op, "result has no blocked layout");
  Location loc = op.getLoc();
  ThreadCoords c(rw, loc);
  Type elemType = op.getLhs().getType().getElementType();

  stageOperand(c, op.getLhs(), lhs, op.getLhsContractDim(), g.lhsBase, g.pitchA,
               g.elemBytes);
  stageOperand(c, op.getRhs(), rhs, op.getRhsContractDim(), g.rhsBase, g.pitchB,
               g.elemBytes);
  if (lhsScaleType) {
    stageScale(c, op->getOperand(1), lhsScale, g.lhsScaleBase);
    stageScale(c, op->getOperand(3), rhsScale, g.rhsScaleBase);
  }
  barrier(rw, loc);
  emitMmas(c, g, elemType);

  bool isInt = elemType.isInteger(8);
  Type f32 = rw.getF32Type();
  SmallVector<Value> results;
  for (auto [slot, pos] : llvm::enumerate(heldPositions(c, *out))) {
    auto [row, col] = pos;
    Value at = byteAddress(c, g.resultBase, row, g.pitchC, col, 4);
    Value v = loadScratch(rw, loc, isInt ? rw.getI32Type() : f32, at);
    if (isInt) {
      v = arith::SIToFPOp::create(rw, loc, f32, v);
      Value sa =
          loadScratch(rw, loc, f32,
                      g.lhsScaleElems == 1 ? c.constant(g.lhsScaleBase)
                                           : byteAddress(c, g.lhsScaleBase, row,
                                                         4, c.constant(0), 0));
      Value sb =
          loadScratch(rw, loc, f32,
                      g.rhsScaleElems == 1 ? c.constant(g.rhsScaleBase)
                                           : byteAddress(c, g.rhsScaleBase, col,
                                                         4, c.constant(0), 0));
      v = arith::MulFOp::create(rw, loc, v,
                                arith::MulFOp::create(rw, loc, sa, sb));
    }
    if (!acc.empty())
      v = arith::AddFOp::create(rw, loc, acc[slot], v);
    results.push_back(v);
  }
  barrier(rw, loc); // the scratch buffer is free again
  rw.replaceOpWithMultiple(op, {results});
  return success();
}

struct QMatmulLowering : public OpConversionPattern<QMatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(QMatmulOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    if (op.getMma() != MmaKind::MmaSync)
      return rw.notifyMatchFailure(op, "not selected for mma_sync");
    return lowerMatmul(
        op, adaptor.getLhs(), adaptor.getRhs(), adaptor.getLhsScale(),
        adaptor.getRhsScale(), op.getAcc() ? adaptor.getAcc() : ValueRange(),
        op.getLhsScale().getType(), op.getRhsScale().getType(), rw);
  }
};

struct MatmulLowering : public OpConversionPattern<MatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MatmulOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    if (op.getMma() != MmaKind::MmaSync)
      return rw.notifyMatchFailure(op, "not selected for mma_sync");
    return lowerMatmul(
        op, adaptor.getLhs(), adaptor.getRhs(), ValueRange(), ValueRange(),
        op.getAcc() ? adaptor.getAcc() : ValueRange(), Type(), Type(), rw);
  }
};

} // namespace

int64_t mlir::sage::getMatmulScratchBytes(Operation *op) {
  FailureOr<MatmulGeometry> g = failure();
  if (auto q = dyn_cast<QMatmulOp>(op))
    g = getGeometry(op, q.getLhs(), q.getLhsContractDim(),
                    q.getLhsScale().getType(), q.getRhsScale().getType(),
                    q.getResult().getType());
  else if (auto m = dyn_cast<MatmulOp>(op))
    g = getGeometry(op, m.getLhs(), m.getLhsContractDim(), Type(), Type(),
                    m.getResult().getType());
  return succeeded(g) ? g->totalBytes : 0;
}

void mlir::sage::populateMatmulToNVVMPatterns(const TypeConverter &converter,
                                              RewritePatternSet &patterns) {
  patterns.add<QMatmulLowering, MatmulLowering>(converter,
                                                patterns.getContext());
}
