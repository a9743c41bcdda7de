//===- MatmulToNVVM.cpp - qmatmul and matmul on tensor cores --------------===//
//
// Operands arrive in any distributed encoding and are staged through shared
// memory K-major (each row of A and of B holds its K elements together),
// which both instruction families need for int8 and which is how a
// transposed operand (dV = P^T dO, dK = dS^T Q) becomes K-major; loads the
// copy selection marked go there by cp.async or TMA instead. The tensor
// cores (mma.sync, or wgmma from descriptors or with A from registers) then
// leave the products in their accumulator registers, which *are* the
// result: its encoding is the instruction's accumulator
// (`#sagegpu.mma`, anchored by `sagegpu-assign-layouts`), and the warp and
// register placement of every instruction is read off that encoding's
// linear layout. The scales (and the accumulator operand) are applied to
// each register where it is.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Conversion/SageToLLVM/Tma.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// mma.sync rows of shared memory are padded by this many bytes so that the
/// eight rows a fragment load touches fall in different banks.
constexpr int64_t kRowPadBytes = 16;
/// Bytes of one 8-row x 16-byte wgmma core matrix.
constexpr int64_t kCoreMatrixBytes = 128;
/// Bytes of K in one row of a core matrix (a chunk).
constexpr int64_t kChunkBytes = 16;

/// How a staged operand is arranged in shared memory.
enum class OperandLayout {
  /// K-major rows padded by kRowPadBytes: what fragment loads (mma.sync, A of
  /// wgmma_reg_a) read without bank conflicts.
  PaddedRows,
  /// 16-byte chunks of K, chunk-major: wgmma's unswizzled core matrices, and
  /// where a TMA box lands.
  CoreMatrices,
};

/// Sizes and shared-memory placement of one matmul.
struct MatmulGeometry {
  MmaKind kind;
  int64_t m, n, k;
  int64_t elemBytes;
  int64_t warps;
  int64_t lhsScaleElems = 0, rhsScaleElems = 0;
  int64_t lhsScaleBase = 0, rhsScaleBase = 0;
  int64_t barrierBase = 0; // wgmma: the mbarrier TMA copies complete
  int64_t lhsBase, rhsBase;
  int64_t totalBytes;

  int64_t kBytes() const { return k * elemBytes; }
  /// mma.sync: bytes per staged operand row (padded).
  int64_t rowPitch() const { return kBytes() + kRowPadBytes; }
  /// wgmma: bytes between K-adjacent core matrices of an operand of
  /// `rows` rows (the chunk-major layout keeps a chunk of every row
  /// together).
  int64_t chunkPitch(int64_t rows) const { return rows * kChunkBytes; }
  OperandLayout layoutOf(bool lhs) const {
    return readsFromDescriptor(kind, lhs) ? OperandLayout::CoreMatrices
                                          : OperandLayout::PaddedRows;
  }
  int64_t operandBytes(bool lhs) const {
    int64_t rows = lhs ? m : n;
    return layoutOf(lhs) == OperandLayout::PaddedRows ? rows * rowPitch()
                                                      : rows * kBytes();
  }
};

static int64_t alignTo16(int64_t v) { return (v + 15) / 16 * 16; }

/// Fails with a diagnostic when the shapes do not fit the chosen instruction.
static FailureOr<MatmulGeometry> getGeometry(Operation *op, Value lhs,
                                             Value rhs, unsigned lhsContract,
                                             Type lhsScale, Type rhsScale,
                                             RankedTensorType result,
                                             std::optional<MmaKind> kind) {
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  if (!kind)
    return op->emitOpError("has no instruction choice (run sage-select-mma)");
  auto encoding = sagegpu::getDistributedEncoding(result);
  if (!encoding)
    return op->emitOpError(
        "needs its accumulator encoding (run sagegpu-assign-layouts)");
  auto expected = sagegpu::getAccumulatorEncoding(
      op->getContext(), *kind, result.getDimSize(0), result.getDimSize(1),
      encoding.getNumWarps());
  if (sagegpu::getLinearLayout(result) !=
      expected.toLinearLayout(result.getShape()))
    return op->emitOpError() << "result encoding " << result.getEncoding()
                             << " is not the accumulator of "
                             << stringifyMmaKind(*kind) << ", " << expected;
  MatmulGeometry g;
  g.kind = *kind;
  g.m = result.getDimSize(0);
  g.n = result.getDimSize(1);
  g.k = lhsType.getDimSize(lhsContract);
  g.elemBytes = lhsType.getElementTypeBitWidth() / 8;
  g.warps = encoding.getNumWarps();
  int64_t bits = g.elemBytes * 8;
  if (g.kind == MmaKind::MmaSync &&
      !fitsMmaSync(g.m, g.n, g.k, bits, g.warps)) {
    MmaSyncTiling t = mmaSyncTiling(g.m, g.warps);
    return op->emitOpError()
           << "mma_sync lowering needs M a multiple of " << 16 * t.warpsM
           << ", N of " << 8 * t.warpsN << " and K of " << mmaK(bits)
           << ", got " << g.m << "x" << g.n << "x" << g.k;
  }
  if (isWgmma(g.kind) && !fitsWgmma(g.m, g.n, g.k, bits, g.warps))
    return op->emitOpError()
           << "wgmma lowering needs warps in groups of 4, M in 64-row blocks "
              "per warpgroup, a legal N <= 256 and K a multiple of "
           << mmaK(bits) << ", got " << g.m << "x" << g.n << "x" << g.k
           << " with " << g.warps << " warps";
  for (auto [operand, lhs] : {std::pair<Value, bool>{lhs, true}, {rhs, false}})
    if (auto load = operand.getDefiningOp<LoadOp>())
      if (load.getCopy() == CopyKind::Tma &&
          g.layoutOf(lhs) != OperandLayout::CoreMatrices)
        return op->emitOpError("copies an operand with TMA, which writes the "
                               "layout only wgmma's shared-memory operands "
                               "read");
  if (lhsScale)
    g.lhsScaleElems = cast<RankedTensorType>(lhsScale).getNumElements();
  if (rhsScale)
    g.rhsScaleElems = cast<RankedTensorType>(rhsScale).getNumElements();
  g.rhsScaleBase = g.lhsScaleElems * 4;
  g.lhsBase = alignTo16((g.lhsScaleElems + g.rhsScaleElems) * 4);
  if (isWgmma(g.kind)) {
    // TMA boxes land at 128-byte boundaries, past the mbarrier that
    // completes them.
    g.barrierBase = g.lhsBase;
    g.lhsBase = (g.barrierBase + kMbarrierBytes + 127) / 128 * 128;
  }
  g.rhsBase = g.lhsBase + g.operandBytes(/*lhs=*/true);
  g.totalBytes = g.rhsBase + g.operandBytes(/*lhs=*/false);
  return g;
}

/// base + row * pitch + col * bytes, all i32.
static Value byteAddress(ThreadCoords &c, int64_t base, Value row,
                         int64_t pitch, Value col, int64_t bytes) {
  Value r = arith::MulIOp::create(c.b, c.loc, row, c.constant(pitch));
  Value cc = arith::MulIOp::create(c.b, c.loc, col, c.constant(bytes));
  Value sum = arith::AddIOp::create(c.b, c.loc, r, cc);
  return arith::AddIOp::create(c.b, c.loc, sum, c.constant(base));
}

/// Byte offset of element (row, k) inside a staged operand of `rows` rows.
static Value operandOffset(ThreadCoords &c, const MatmulGeometry &g,
                           OperandLayout layout, int64_t rows, Value row,
                           Value k) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  Value kByte = arith::MulIOp::create(b, loc, k, c.constant(g.elemBytes));
  if (layout == OperandLayout::PaddedRows)
    return arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, row, c.constant(g.rowPitch())),
        kByte);
  // wgmma, no swizzle: 16-byte chunks of K, chunk-major ([chunk][row][16
  // bytes]), which is where a TMA box of the same tile lands. Core matrices
  // are 128 bytes apart along M/N (the descriptor's stride offset) and
  // chunkPitch(rows) along K (its leading offset).
  Value chunk = arith::ShRUIOp::create(b, loc, kByte, c.constant(4));
  Value inChunk = arith::AndIOp::create(b, loc, kByte, c.constant(15));
  return arith::AddIOp::create(
      b, loc,
      arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, chunk, c.constant(g.chunkPitch(rows))),
          arith::MulIOp::create(b, loc, row, c.constant(kChunkBytes))),
      inChunk);
}

/// Writes an operand tile at `base`, rows being its non-contracted index.
static void stageOperand(ThreadCoords &c, const MatmulGeometry &g, Value tile,
                         ValueRange values, unsigned contractDim,
                         OperandLayout layout, int64_t base) {
  std::optional<TileDistribution> dist = TileDistribution::get(tile.getType());
  int64_t rows = dist->getType().getDimSize(1 - contractDim);
  for (auto [pos, value] : llvm::zip(c.positions(*dist), values)) {
    auto [r, col] = pos;
    Value row = contractDim == 1 ? r : col;
    Value kk = contractDim == 1 ? col : r;
    Value at = arith::AddIOp::create(c.b, c.loc,
                                     operandOffset(c, g, layout, rows, row, kk),
                                     c.constant(base));
    storeScratch(c.b, c.loc, value, at);
  }
}

/// Copies the tile `load` reads straight from global to shared memory with
/// 16-byte cp.async pieces (sage-select-copies guaranteed the alignment and a
/// unit stride along the contraction). Pieces past the bounds are zero-filled
/// (a source size below 16), which is the masking a register load does.
static void stageOperandAsync(ThreadCoords &c, const MatmulGeometry &g,
                              LoadOp load, unsigned contractDim,
                              OperandLayout layout, int64_t base,
                              ConversionPatternRewriter &rw) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  Type i64 = b.getI64Type();
  unsigned other = 1 - contractDim;
  RankedTensorType tile = load.getResult().getType();
  int64_t rows = tile.getDimSize(other);
  int64_t perPiece = 16 / g.elemBytes;
  int64_t piecesPerRow = g.kBytes() / 16;
  int64_t pieces = rows * piecesPerRow, threads = g.warps * 32;
  auto remap = [&](Value v) { return rw.getRemappedValue(v); };
  Value ptr = remap(load.getPtr());
  Value rowStart = remap(load.getOffsets()[other]);
  Value kStart = remap(load.getOffsets()[contractDim]);
  Value rowStride = remap(load.getStrides()[other]);
  Value rowBound = remap(load.getBounds()[other]);
  Value kBound = remap(load.getBounds()[contractDim]);
  auto i64Const = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value zero = i64Const(0);
  for (int64_t first = 0; first < pieces; first += threads) {
    Value piece = arith::AddIOp::create(b, loc, c.tid, c.constant(first));
    Value inTile = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         piece, c.constant(pieces));
    Value row = arith::DivUIOp::create(b, loc, piece, c.constant(piecesPerRow));
    Value k = arith::MulIOp::create(
        b, loc, arith::RemUIOp::create(b, loc, piece, c.constant(piecesPerRow)),
        c.constant(perPiece));
    Value dst = arith::AddIOp::create(
        b, loc, operandOffset(c, g, layout, rows, row, k), c.constant(base));
    Value dstAddr = sharedAddress(b, loc, dst);
    Value gRow = arith::AddIOp::create(
        b, loc, rowStart, arith::ExtUIOp::create(b, loc, i64, row));
    Value gK = arith::AddIOp::create(b, loc, kStart,
                                     arith::ExtUIOp::create(b, loc, i64, k));
    Value rowOk = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, gRow, zero),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, gRow,
                              rowBound));
    // Bytes of this piece inside the bounds: clamp((kBound - gK) * e, 0, 16).
    Value left =
        arith::MulIOp::create(b, loc, arith::SubIOp::create(b, loc, kBound, gK),
                              i64Const(g.elemBytes));
    Value clamped = arith::MaxSIOp::create(
        b, loc, arith::MinSIOp::create(b, loc, left, i64Const(16)), zero);
    Value kOk =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, gK, zero);
    Value bytes = arith::SelectOp::create(
        b, loc, arith::AndIOp::create(b, loc, rowOk, kOk), clamped, zero);
    Value element = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, gRow, rowStride), gK);
    // A piece with no bytes in bounds reads nothing, but keep its address
    // inside the allocation's range anyway: point it at the base.
    element = arith::SelectOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bytes, zero),
        zero, element);
    Value src = LLVM::GEPOp::create(
        b, loc, ptr.getType(), tile.getElementType(), ptr, ValueRange{element});
    inlinePtx(b, loc, Type(),
              ValueRange{dstAddr, src,
                         arith::TruncIOp::create(b, loc, b.getI32Type(), bytes),
                         inTile},
              "@$3 cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,b");
  }
}

/// Writes a scale tile linearly (row-major) at `base`.
static void stageScale(ThreadCoords &c, Value tile, ValueRange values,
                       int64_t base) {
  std::optional<TileDistribution> dist = TileDistribution::get(tile.getType());
  int64_t cols = dist->getType().getDimSize(1);
  for (auto [pos, value] : llvm::zip(c.positions(*dist), values))
    storeScratch(c.b, c.loc, value,
                 byteAddress(c, base, pos.first, cols * 4, pos.second, 4));
}

/// The warp part of `acc`'s positions in this thread (the lane part is the
/// instruction's own fragment layout).
static std::pair<Value, Value> warpOrigin(ThreadCoords &c,
                                          const layout::LinearLayout &acc) {
  layout::LinearLayout::Bases none(acc.getNumBits(layout::InDim::Lane));
  return c.threadOffset(acc.withBases(layout::InDim::Lane, none));
}

/// Where value e of a 16x8 accumulator fragment sits relative to its
/// first: row 8 * (e / 2), column e % 2 (mma.sync, and wgmma per 8 columns).
static layout::Coord fragmentOffset(int64_t e) {
  return {int32_t(8 * (e / 2)), int32_t(e % 2)};
}

static Type accumulatorType(OpBuilder &b, Type elemType) {
  return elemType.isInteger(8) ? Type(b.getI32Type()) : Type(b.getF32Type());
}

static Value zeroOf(OpBuilder &b, Location loc, Type type) {
  return arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
}

/// 32-bit words of K per 32-byte K step of one instruction.
constexpr int64_t kWordsPerStep = 8;

/// Word `word` (4 bytes of K) of row `row` of a PaddedRows operand at `base`.
static Value loadPaddedWord(ThreadCoords &c, const MatmulGeometry &g,
                            int64_t base, Value row, Value word) {
  return loadScratch(c.b, c.loc, c.b.getI32Type(),
                     byteAddress(c, base, row, g.rowPitch(), word, 4));
}

/// The A fragment of 16 rows from `firstRow` for K step `ks` of a
/// PaddedRows operand: words (g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4)
/// for lane 4g + q, the layout mma.sync (m16n8k32 / m16n8k16) and wgmma's
/// register A (per warp) share.
static SmallVector<Value, 4> loadAFragment(ThreadCoords &c,
                                           const MatmulGeometry &g,
                                           Value firstRow, int64_t ks) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  Value row = arith::AddIOp::create(
      b, loc, firstRow, arith::ShRUIOp::create(b, loc, c.lane, c.constant(2)));
  Value word = arith::AddIOp::create(
      b, loc, arith::AndIOp::create(b, loc, c.lane, c.constant(3)),
      c.constant(ks * kWordsPerStep));
  Value row8 = arith::AddIOp::create(b, loc, row, c.constant(8));
  Value word4 = arith::AddIOp::create(b, loc, word, c.constant(4));
  return {loadPaddedWord(c, g, g.lhsBase, row, word),
          loadPaddedWord(c, g, g.lhsBase, row8, word),
          loadPaddedWord(c, g, g.lhsBase, row, word4),
          loadPaddedWord(c, g, g.lhsBase, row8, word4)};
}

/// mma.sync m16n8k32 (int8) / m16n8k16 (f16, bf16): each group of four
/// slots of the accumulator layout `acc` is one instruction's fragment, at
/// the tile the layout puts it. Returns the accumulator slots in order, or
/// failure when `acc` is not made of such fragments.
static FailureOr<SmallVector<Value>>
emitMmaSync(ThreadCoords &c, const MatmulGeometry &g, Type elemType,
            const layout::LinearLayout &acc) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  bool isInt = elemType.isInteger(8);
  Type accType = accumulatorType(b, elemType);
  auto resultType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), {accType, accType, accType, accType});
  NVVM::MMATypes ptxType = isInt              ? NVVM::MMATypes::s8
                           : elemType.isF16() ? NVVM::MMATypes::f16
                                              : NVVM::MMATypes::bf16;
  std::optional<NVVM::MMAIntOverflow> overflow;
  if (isInt) // the verifier bounds K so that int32 sums cannot overflow
    overflow = NVVM::MMAIntOverflow::wrapped;
  Type wordType = elemType.isF16() ? Type(VectorType::get({2}, elemType))
                                   : Type(b.getI32Type());

  // Each instruction's tile, from the layout.
  constexpr int64_t kFragment = 4;
  int64_t tiles = acc.getNumRegisters() / kFragment;
  SmallVector<layout::Coord> origins;
  for (int64_t t = 0; t < tiles; ++t) {
    layout::Coord origin = acc.applyDim(layout::InDim::Register, t * kFragment);
    for (int64_t e = 0; e < kFragment; ++e)
      if (acc.applyDim(layout::InDim::Register, t * kFragment + e) !=
          (origin ^ fragmentOffset(e)))
        return failure();
    origins.push_back(origin);
  }
  auto [warpRow, warpCol] = warpOrigin(c, acc);
  Value group = arith::ShRUIOp::create(b, loc, c.lane, c.constant(2));
  Value quad = arith::AndIOp::create(b, loc, c.lane, c.constant(3));
  auto asWord = [&](Value v) -> Value {
    return wordType == v.getType()
               ? v
               : Value(LLVM::BitcastOp::create(b, loc, wordType, v));
  };
  auto loadBWord = [&](int64_t col, int64_t word) {
    Value row = arith::AddIOp::create(
        b, loc, arith::AddIOp::create(b, loc, warpCol, group), c.constant(col));
    return asWord(
        loadPaddedWord(c, g, g.rhsBase, row,
                       arith::AddIOp::create(b, loc, quad, c.constant(word))));
  };

  Value zero = zeroOf(b, loc, accType);
  SmallVector<SmallVector<Value, 4>> accs(tiles,
                                          SmallVector<Value, 4>(4, zero));
  for (int64_t ks = 0; ks < g.kBytes() / 32; ++ks) {
    int64_t word0 = ks * kWordsPerStep;
    // Fragments shared by the tiles of one row (A) or column (B) block.
    DenseMap<int32_t, SmallVector<Value, 4>> a;
    DenseMap<int32_t, SmallVector<Value, 2>> bf;
    for (auto [t, origin] : llvm::enumerate(origins)) {
      SmallVector<Value, 4> &fa = a[origin.row];
      if (fa.empty()) {
        Value firstRow =
            arith::AddIOp::create(b, loc, warpRow, c.constant(origin.row));
        for (Value word : loadAFragment(c, g, firstRow, ks))
          fa.push_back(asWord(word));
      }
      SmallVector<Value, 2> &fb = bf[origin.col];
      if (fb.empty())
        fb = {loadBWord(origin.col, word0), loadBWord(origin.col, word0 + 4)};
      SmallVector<Value, 4> &frag = accs[t];
      Value d = NVVM::MmaOp::create(
          b, loc, resultType, fa, fb, frag,
          {16, 8, mmaK(elemType.getIntOrFloatBitWidth())}, std::nullopt,
          overflow, std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
          std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                         NVVM::MMALayout::col});
      for (int64_t e = 0; e < kFragment; ++e)
        frag[e] = LLVM::ExtractValueOp::create(b, loc, d, e);
    }
  }
  SmallVector<Value> slots;
  for (const SmallVector<Value, 4> &frag : accs)
    slots.append(frag.begin(), frag.end());
  return slots;
}

/// A wgmma shared-memory descriptor for a K-major, unswizzled block of an
/// operand of `rows` rows, starting at byte `offset` of the scratch buffer.
static Value wgmmaDescriptor(ThreadCoords &c, const MatmulGeometry &g,
                             int64_t rows, Value offset) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  Type i64 = b.getI64Type();
  Value ptr = getScratchPtr(b, loc, offset);
  Value addr = LLVM::PtrToIntOp::create(b, loc, i64, ptr);
  auto field = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  // Fields count 16-byte units: start address (bits 0-13), leading offset
  // (16-29, between K-adjacent core matrices), stride offset (32-45,
  // between 8-row groups).
  Value start = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, addr, field(4)), field(0x3FFF));
  int64_t leading = (g.chunkPitch(rows) >> 4) << 16;
  int64_t stride = (kCoreMatrixBytes >> 4) << 32;
  return arith::OrIOp::create(b, loc, start, field(leading | stride));
}

/// One wgmma with A from registers (a warp's 16 rows of the 64-row block,
/// in the mma.sync A layout) and B from `descB`, accumulating into `acc`.
/// MLIR 22's NVVM dialect has no op for this form: it is inline PTX, whose
/// accumulators are tied outputs.
static Value emitWgmmaRegA(ThreadCoords &c, const MatmulGeometry &g,
                           Type elemType, Value acc, ArrayRef<Value> a,
                           Value descB) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  bool isInt = elemType.isInteger(8);
  int64_t values = g.n / 2;
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
     << "wgmma.mma_async.sync.aligned.m64n" << g.n << "k"
     << mmaK(elemType.getIntOrFloatBitWidth())
     << (isInt              ? ".s32.s8.s8 "
         : elemType.isF16() ? ".f32.f16.f16 "
                            : ".f32.bf16.bf16 ");
  list(0, values);
  os << ", ";
  list(aFirst, 4);
  // Scale D by p; the 16-bit forms also take A and B scales (1) and B's
  // transpose (0: K-major).
  os << ", $" << descIndex << ", p" << (isInt ? "" : ", 1, 1, 0") << ";\n}";
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
  operands.push_back(c.constant(1));
  return inlinePtx(b, loc, acc.getType(), operands, text, constraints);
}

/// wgmma m64nNk32 (int8) / m64nNk16 (f16, bf16), one instruction per
/// 64-row block a warpgroup owns in the accumulator layout `acc` (its N / 2
/// slots per block are the instruction's registers, in order); B comes from
/// shared memory, A too (`wgmma`) or from registers (`wgmma_reg_a`), loaded
/// from its padded rows before the wgmma fence as the fragments of each
/// warp's 16 rows. Returns the accumulator slots in order, or failure when
/// `acc` is not made of such blocks.
static FailureOr<SmallVector<Value>>
emitWgmma(ThreadCoords &c, const MatmulGeometry &g, Type elemType,
          const layout::LinearLayout &acc) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  MLIRContext *ctx = b.getContext();
  bool isInt = elemType.isInteger(8);
  Type accType = accumulatorType(b, elemType);
  int64_t values = g.n / 2; // accumulator registers per thread per block
  auto structType =
      LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(values, accType));
  NVVM::WGMMATypes inType = isInt              ? NVVM::WGMMATypes::s8
                            : elemType.isF16() ? NVVM::WGMMATypes::f16
                                               : NVVM::WGMMATypes::bf16;
  NVVM::WGMMATypes outType =
      isInt ? NVVM::WGMMATypes::s32 : NVVM::WGMMATypes::f32;

  // Each block's first row (relative to the warpgroup's), from the layout:
  // value 4j + e of a block is fragment value e of its 8-column group j.
  int64_t blocks = acc.getNumRegisters() / values;
  SmallVector<int32_t> blockRows;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    layout::Coord origin = acc.applyDim(layout::InDim::Register, blk * values);
    if (origin.col != 0)
      return failure();
    for (int64_t v = 0; v < values; ++v)
      if (acc.applyDim(layout::InDim::Register, blk * values + v) !=
          (origin ^ fragmentOffset(v % 4) ^
           layout::Coord{0, int32_t(8 * (v / 4))}))
        return failure();
    blockRows.push_back(origin.row);
  }
  // The warp's first row: 16 per warp of its warpgroup, plus the
  // warpgroup's 64-row block.
  Value warpRow = warpOrigin(c, acc).first;
  Value groupRow = arith::AndIOp::create(b, loc, warpRow, c.constant(~63));

  SmallVector<Value> accs;
  Value zero = zeroOf(b, loc, accType);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    Value init = LLVM::UndefOp::create(b, loc, structType);
    for (int64_t v = 0; v < values; ++v)
      init = LLVM::InsertValueOp::create(b, loc, init, zero, v);
    accs.push_back(init);
  }
  bool regA = g.kind == MmaKind::WgmmaRegA;
  int64_t steps = g.kBytes() / 32;
  // Register A: fragments [block][step], in registers before the fence.
  SmallVector<SmallVector<Value, 4>> aFragments;
  if (regA)
    for (int32_t row : blockRows) {
      Value first = arith::AddIOp::create(b, loc, warpRow, c.constant(row));
      for (int64_t ks = 0; ks < steps; ++ks)
        aFragments.push_back(loadAFragment(c, g, first, ks));
    }
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (auto [blk, row] : llvm::enumerate(blockRows)) {
    // Where this block of A starts in its core matrices (descriptor form):
    // 16 bytes per row in each chunk of K.
    Value aBlock =
        regA ? Value()
             : arith::MulIOp::create(
                   b, loc,
                   arith::AddIOp::create(b, loc, groupRow, c.constant(row)),
                   c.constant(kChunkBytes));
    for (int64_t ks = 0; ks < steps; ++ks) {
      // Each step takes two chunks (32 bytes) of K.
      Value descB = wgmmaDescriptor(
          c, g, g.n, c.constant(g.rhsBase + ks * 2 * g.chunkPitch(g.n)));
      if (regA) {
        accs[blk] = emitWgmmaRegA(c, g, elemType, accs[blk],
                                  aFragments[blk * steps + ks], descB);
        continue;
      }
      Value aOffset = arith::AddIOp::create(
          b, loc, aBlock, c.constant(g.lhsBase + ks * 2 * g.chunkPitch(g.m)));
      Value descA = wgmmaDescriptor(c, g, g.m, aOffset);
      accs[blk] = NVVM::WgmmaMmaAsyncOp::create(
          b, loc, structType, accs[blk], descA, descB,
          NVVM::MMAShapeAttr::get(ctx, 64, g.n,
                                  mmaK(elemType.getIntOrFloatBitWidth())),
          NVVM::WGMMATypesAttr::get(ctx, inType),
          NVVM::WGMMATypesAttr::get(ctx, inType),
          NVVM::WGMMATypesAttr::get(ctx, outType),
          NVVM::WGMMAScaleOutAttr::get(ctx, NVVM::WGMMAScaleOut::one),
          NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
          NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
          NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
          NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::col),
          NVVM::MMAIntOverflowAttr());
    }
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);

  SmallVector<Value> slots;
  for (Value block : accs)
    for (int64_t v = 0; v < values; ++v)
      slots.push_back(LLVM::ExtractValueOp::create(b, loc, block, v));
  return slots;
}

/// Shared by both matmul ops: stage, multiply, apply the epilogue in place.
template <typename OpTy>
static LogicalResult
lowerMatmul(OpTy op, ValueRange lhs, ValueRange rhs, ValueRange lhsScale,
            ValueRange rhsScale, ValueRange acc, Type lhsScaleType,
            Type rhsScaleType, ConversionPatternRewriter &rw) {
  RankedTensorType resultType = op.getResult().getType();
  FailureOr<MatmulGeometry> geometry =
      getGeometry(op, op.getLhs(), op.getRhs(), op.getLhsContractDim(),
                  lhsScaleType, rhsScaleType, resultType, op.getMma());
  if (failed(geometry))
    return failure();
  const MatmulGeometry &g = *geometry;
  std::optional<TileDistribution> out = TileDistribution::get(resultType);
  if (!out)
    return rw.notifyMatchFailure(op, "result has no distributed layout");
  Location loc = op.getLoc();
  ThreadCoords c(rw, loc);
  Type elemType = op.getLhs().getType().getElementType();

  bool copiedAsync = false;
  SmallVector<TmaBox> boxes;
  auto stage = [&](Value operand, ValueRange values, unsigned contractDim,
                   bool isLhs) {
    int64_t base = isLhs ? g.lhsBase : g.rhsBase;
    OperandLayout layout = g.layoutOf(isLhs);
    auto load = operand.getDefiningOp<LoadOp>();
    if (load && load.getCopy() == CopyKind::Tma) {
      boxes.push_back(
          {rw.getRemappedValue(load.getMap()),
           rw.getRemappedValue(load.getOffsets()[1 - contractDim]),
           rw.getRemappedValue(load.getOffsets()[contractDim]), g.elemBytes,
           base, load.getResult().getType().getNumElements() * g.elemBytes});
    } else if (load && load.getCopy() == CopyKind::CpAsync) {
      stageOperandAsync(c, g, load, contractDim, layout, base, rw);
      copiedAsync = true;
    } else {
      stageOperand(c, g, operand, values, contractDim, layout, base);
    }
  };
  stage(op.getLhs(), lhs, op.getLhsContractDim(), /*isLhs=*/true);
  stage(op.getRhs(), rhs, op.getRhsContractDim(), /*isLhs=*/false);
  if (lhsScaleType) {
    stageScale(c, op->getOperand(1), lhsScale, g.lhsScaleBase);
    stageScale(c, op->getOperand(3), rhsScale, g.rhsScaleBase);
  }
  if (!boxes.empty())
    issueTmaCopies(c, g.barrierBase, boxes);
  if (copiedAsync) {
    NVVM::CpAsyncCommitGroupOp::create(rw, loc);
    NVVM::CpAsyncWaitGroupOp::create(rw, loc, 0);
  }
  if (isWgmma(g.kind)) // wgmma reads through the async proxy
    NVVM::FenceProxyOp::create(
        rw, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(rw.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  barrier(rw, loc);
  if (!boxes.empty())
    waitTmaCopies(c, g.barrierBase);
  FailureOr<SmallVector<Value>> products =
      isWgmma(g.kind) ? emitWgmma(c, g, elemType, out->getLayout())
                      : emitMmaSync(c, g, elemType, out->getLayout());
  if (failed(products))
    return op.emitOpError("result encoding does not tile the instruction's "
                          "accumulator fragments");
  barrier(rw, loc); // every warp is done reading the operands
  if (!boxes.empty())
    releaseTmaBarrier(c, g.barrierBase);

  bool isInt = elemType.isInteger(8);
  Type f32 = rw.getF32Type();
  SmallVector<Value> results;
  for (auto [slot, pos] : llvm::enumerate(c.positions(*out))) {
    auto [row, col] = pos;
    Value v = (*products)[slot];
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
  barrier(rw, loc); // the scale reads are done: the scratch buffer is free
  rw.replaceOpWithMultiple(op, {results});
  return success();
}

struct QMatmulLowering : public OpConversionPattern<QMatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(QMatmulOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
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
    return lowerMatmul(
        op, adaptor.getLhs(), adaptor.getRhs(), ValueRange(), ValueRange(),
        op.getAcc() ? adaptor.getAcc() : ValueRange(), Type(), Type(), rw);
  }
};

} // namespace

int64_t mlir::sage::getMatmulScratchBytes(Operation *op) {
  FailureOr<MatmulGeometry> g = failure();
  if (auto q = dyn_cast<QMatmulOp>(op))
    g = getGeometry(op, q.getLhs(), q.getRhs(), q.getLhsContractDim(),
                    q.getLhsScale().getType(), q.getRhsScale().getType(),
                    q.getResult().getType(), q.getMma());
  else if (auto m = dyn_cast<MatmulOp>(op))
    g = getGeometry(op, m.getLhs(), m.getRhs(), m.getLhsContractDim(), Type(),
                    Type(), m.getResult().getType(), m.getMma());
  return succeeded(g) ? g->totalBytes : 0;
}

void mlir::sage::populateMatmulToNVVMPatterns(const TypeConverter &converter,
                                              RewritePatternSet &patterns) {
  patterns.add<QMatmulLowering, MatmulLowering>(converter,
                                                patterns.getContext());
}
