//===- SageGPUAttrs.cpp - layout encodings and their linear layouts -------===//
//
// Each encoding's parameters are checked here, and its element-to-owner map
// is delegated to the one factory in sage/Layout/Encodings.h that defines it.
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Layout/Encodings.h"
#include "sage/Layout/SharedLayouts.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::sagegpu;
namespace layout = mlir::sage::layout;

#include "sage/Dialect/SageGPU/IR/SageGPUInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "sage/Dialect/SageGPU/IR/SageGPUAttrs.cpp.inc"

void SageGPUDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "sage/Dialect/SageGPU/IR/SageGPUAttrs.cpp.inc"
      >();
}

static layout::TileShape tileShape(ArrayRef<int64_t> shape) {
  return {shape[0], shape[1]};
}

template <typename T> static std::array<unsigned, 2> pair(ArrayRef<T> list) {
  return {unsigned(list[0]), unsigned(list[1])};
}

static LogicalResult verifyWarps(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<unsigned> warps, StringRef what) {
  if (warps.size() != 2)
    return emitError() << what << " needs two warp counts";
  for (unsigned w : warps)
    if (w == 0 || !llvm::isPowerOf2_32(w))
      return emitError() << what << " warp counts must be powers of two, got "
                         << w;
  return success();
}

/// Encodings describe rank-2 tiles with power-of-two extents.
static LogicalResult
verifyTileShape(ArrayRef<int64_t> shape,
                function_ref<InFlightDiagnostic()> emitError) {
  if (shape.size() != 2)
    return emitError() << "layout encodings describe rank-2 tiles, got rank "
                       << shape.size();
  for (int64_t extent : shape)
    if (extent <= 0 || !llvm::isPowerOf2_64(extent))
      return emitError() << "tiles with a layout encoding need power-of-two "
                            "extents, got "
                         << extent;
  return success();
}

//===----------------------------------------------------------------------===//
// BlockedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
BlockedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            ArrayRef<unsigned> size, ArrayRef<unsigned> threads,
                            ArrayRef<unsigned> warps) {
  for (ArrayRef<unsigned> list : {size, threads, warps}) {
    if (list.size() != 2)
      return emitError() << "blocked layout needs two entries per list";
    for (unsigned v : list)
      if (v == 0 || !llvm::isPowerOf2_32(v))
        return emitError() << "blocked layout entries must be powers of two, "
                              "got "
                           << v;
  }
  if (threads[0] * threads[1] != layout::kWarpSize)
    return emitError() << "threads per warp must multiply to 32, got "
                       << threads[0] * threads[1];
  return success();
}

layout::LinearLayout
BlockedEncodingAttr::toLinearLayout(ArrayRef<int64_t> shape) const {
  return layout::blocked(tileShape(shape), pair(getSize()), pair(getThreads()),
                         pair(getWarps()));
}

LogicalResult BlockedEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  return verifyTileShape(shape, emitError);
}

unsigned BlockedEncodingAttr::getNumWarps() const {
  return getWarps()[0] * getWarps()[1];
}

//===----------------------------------------------------------------------===//
// SliceEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
SliceEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          unsigned dim, DistributedEncodingAttrInterface parent,
                          unsigned groups, unsigned extent) {
  if (dim > 1)
    return emitError() << "slice dimension must be 0 or 1, got " << dim;
  if (!parent)
    return emitError() << "slice needs a distributed parent encoding";
  if (groups == 0 && extent != 0)
    return emitError() << "a slice without groups takes no extent";
  if (groups != 0 && (!llvm::isPowerOf2_32(extent) || groups >= extent))
    return emitError() << "groups " << groups
                       << " must be bits of the parent's extent along the "
                          "sliced dimension, a power of two, got extent "
                       << extent;
  return success();
}

layout::LinearLayout
SliceEncodingAttr::toLinearLayout(ArrayRef<int64_t> shape) const {
  // The parent fitted to the slice's own shape wraps the removed dimension
  // to one element: the lanes and warps spreading it become copies and its
  // register repeats vanish, exactly as when slicing a wider parent tile.
  // Grouped, the parent is laid out at its own extent and its indices along
  // `dim` projected onto the kept bits.
  SmallVector<int64_t> parentShape(shape);
  if (getGroups() != 0)
    parentShape[getDim()] = getExtent();
  return layout::slice(getParent().toLinearLayout(parentShape), getDim(),
                       getGroups());
}

LogicalResult SliceEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (failed(verifyTileShape(shape, emitError)))
    return failure();
  int64_t want = int64_t(1) << llvm::popcount(getGroups());
  if (shape[getDim()] != want)
    return emitError() << "a slice along dimension " << getDim()
                       << " describes tiles of extent " << want
                       << " there, got " << shape[getDim()];
  return success();
}

unsigned SliceEncodingAttr::getNumWarps() const {
  return getParent().getNumWarps();
}

//===----------------------------------------------------------------------===//
// MmaEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
MmaEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        sage::MmaKind kind, ArrayRef<unsigned> warps,
                        unsigned n) {
  if (failed(verifyWarps(emitError, warps, "mma encoding")))
    return failure();
  switch (kind) {
  case sage::MmaKind::MmaSync:
    if (n != 0)
      return emitError() << "mma_sync accumulators take no instruction N";
    return success();
  case sage::MmaKind::Wgmma:
    if (warps[0] % layout::kWarpsPerWarpgroup || warps[1] != 1)
      return emitError() << "wgmma accumulators need warps = [4k, 1], got ["
                         << warps[0] << ", " << warps[1] << "]";
    if (n < 8 || n > 256 || !llvm::isPowerOf2_32(n))
      return emitError() << "wgmma instruction N must be a power of two from "
                            "8 to 256, got "
                         << n;
    return success();
  case sage::MmaKind::WgmmaRegA:
    return emitError() << "the accumulator of wgmma_reg_a is "
                          "#sagegpu.mma<wgmma, ...>";
  }
  llvm_unreachable("unknown mma kind");
}

layout::LinearLayout
MmaEncodingAttr::toLinearLayout(ArrayRef<int64_t> shape) const {
  if (getKind() == sage::MmaKind::MmaSync)
    return layout::mmaV2Accumulator(tileShape(shape), pair(getWarps()));
  return layout::wgmmaAccumulator(tileShape(shape), getN(),
                                  getWarps()[0] / layout::kWarpsPerWarpgroup);
}

LogicalResult MmaEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  return verifyTileShape(shape, emitError);
}

unsigned MmaEncodingAttr::getNumWarps() const {
  return getWarps()[0] * getWarps()[1];
}

//===----------------------------------------------------------------------===//
// DotOperandEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
DotOperandEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               unsigned operand, MmaEncodingAttr parent,
                               unsigned bits, bool sigma16) {
  if (operand > 1)
    return emitError() << "dot operand index must be 0 (A) or 1 (B), got "
                       << operand;
  if (!parent)
    return emitError() << "dot operand needs an #sagegpu.mma parent";
  if (bits != 8 && bits != 16)
    return emitError() << "dot operands hold 8- or 16-bit elements, got "
                       << bits;
  if (operand == 1 && parent.getKind() == sage::MmaKind::Wgmma)
    return emitError() << "wgmma reads its B operand from shared memory, "
                          "not registers";
  if (sigma16 && (operand != 0 || bits != 8))
    return emitError() << "sigma16 permutes the contraction of 8-bit A "
                          "operands only";
  return success();
}

layout::LinearLayout
DotOperandEncodingAttr::toLinearLayout(ArrayRef<int64_t> shape) const {
  MmaEncodingAttr mma = getParent();
  layout::MmaVersion version = mma.getKind() == sage::MmaKind::MmaSync
                                   ? layout::MmaVersion::MmaSync
                                   : layout::MmaVersion::Wgmma;
  return layout::dotOperand(tileShape(shape), version, getOperand(), getBits(),
                            pair(mma.getWarps()), getSigma16());
}

LogicalResult DotOperandEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (failed(verifyTileShape(shape, emitError)))
    return failure();
  if (elementType.getIntOrFloatBitWidth() != getBits())
    return emitError() << "a " << getBits() << "-bit dot operand holds "
                       << getBits() << "-bit elements, not " << elementType;
  return success();
}

unsigned DotOperandEncodingAttr::getNumWarps() const {
  return getParent().getNumWarps();
}

//===----------------------------------------------------------------------===//
// SharedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
SharedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           unsigned swizzle, unsigned bits, unsigned inner) {
  if (!layout::isValidSwizzle(swizzle))
    return emitError() << "shared swizzle must be 0, 32, 64 or 128 bytes, got "
                       << swizzle;
  if (bits != 8 && bits != 16 && bits != 32)
    return emitError() << "shared tiles hold 8-, 16- or 32-bit elements, got "
                       << bits;
  if (inner > 1)
    return emitError() << "the contiguous dimension must be 0 or 1, got "
                       << inner;
  return success();
}

LogicalResult SharedEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (failed(verifyTileShape(shape, emitError)))
    return failure();
  if (elementType.getIntOrFloatBitWidth() != getBits())
    return emitError() << "a " << getBits() << "-bit shared layout holds "
                       << getBits() << "-bit elements, not " << elementType;
  std::string why = layout::checkSharedParams(tileShape(shape), getBits(),
                                              getSwizzle(), getInner());
  if (!why.empty())
    return emitError() << why;
  return success();
}

layout::LinearLayout
SharedEncodingAttr::toLinearLayout(ArrayRef<int64_t> shape) const {
  return layout::shared(tileShape(shape), getBits(), getSwizzle(), getInner());
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

DistributedEncodingAttrInterface
mlir::sagegpu::getDistributedEncoding(Type type) {
  auto tile = dyn_cast<RankedTensorType>(type);
  if (!tile || tile.getRank() != 2)
    return {};
  return dyn_cast_or_null<DistributedEncodingAttrInterface>(tile.getEncoding());
}

std::optional<layout::LinearLayout> mlir::sagegpu::getLinearLayout(Type type) {
  DistributedEncodingAttrInterface encoding = getDistributedEncoding(type);
  if (!encoding)
    return std::nullopt;
  ArrayRef<int64_t> shape = cast<RankedTensorType>(type).getShape();
  for (int64_t extent : shape)
    if (extent <= 0 || !llvm::isPowerOf2_64(extent))
      return std::nullopt;
  return encoding.toLinearLayout(shape);
}

BlockedEncodingAttr
mlir::sagegpu::getDefaultBlockedEncoding(MLIRContext *ctx, unsigned numWarps) {
  // Four consecutive columns per thread, eight threads across a row: a
  // warp covers 4 x 32 elements, the program's warps stack along rows.
  return BlockedEncodingAttr::get(ctx, {1, 4}, {4, 8}, {numWarps, 1});
}

BlockedEncodingAttr
mlir::sagegpu::getColumnBlockedEncoding(MLIRContext *ctx, unsigned numWarps,
                                        ArrayRef<int64_t> shape,
                                        int64_t elemBytes) {
  // Lanes and warps span the columns, so that no column repeat comes before
  // a thread's run of rows in its registers (the blocked encoding's register
  // order is dimension 1 first); up to 16 bytes of a column per thread.
  auto rows = unsigned(std::max<int64_t>(shape[0], 1));
  auto cols = unsigned(std::max<int64_t>(shape[1], 1));
  unsigned laneCols = std::clamp(cols / numWarps, 1u, 32u);
  unsigned laneRows = 32 / laneCols;
  unsigned size = std::clamp(rows / laneRows, 1u, unsigned(16 / elemBytes));
  return BlockedEncodingAttr::get(ctx, {size, 1}, {laneRows, laneCols},
                                  {1, numWarps});
}

BlockedEncodingAttr mlir::sagegpu::getTransposingBlockedEncoding(
    MLIRContext *ctx, unsigned numWarps, ArrayRef<int64_t> shape,
    int64_t storeBytes) {
  // The default's four columns a thread (its register bits 0-1, the row
  // loads' vector) and the rest of the thread's share of the tile down the
  // rows (register bits 2 and up, the transposed store's vector, at most
  // 16 bytes). Enough lanes down the rows that one store instruction fills
  // whole 32-byte sectors of each column it writes (partial sectors cost
  // the H100's pre-pass 13%), the rest across the columns; warps down the
  // rows, then across the columns.
  int64_t rows = shape[0], cols = shape[1];
  int64_t threads = 32 * int64_t(numWarps);
  int64_t colsPerThread = std::min<int64_t>(4, cols);
  if (rows * cols % (threads * colsPerThread))
    return {};
  int64_t rowsPerThread = std::clamp<int64_t>(
      rows * cols / (threads * colsPerThread), 1, 16 / storeBytes);
  if (rowsPerThread * storeBytes < 4)
    return {};
  int64_t laneRows =
      std::clamp<int64_t>(32 / (rowsPerThread * storeBytes), 1,
                          std::max<int64_t>(1, rows / rowsPerThread));
  int64_t laneCols = 32 / laneRows;
  int64_t warpRows =
      std::clamp<int64_t>(rows / (rowsPerThread * laneRows), 1, numWarps);
  int64_t warpCols = numWarps / warpRows;
  // Only a layout that covers the tile exactly, once.
  if (rowsPerThread * laneRows * warpRows != rows ||
      colsPerThread * laneCols * warpCols != cols)
    return {};
  return BlockedEncodingAttr::get(
      ctx, {unsigned(rowsPerThread), unsigned(colsPerThread)},
      {unsigned(laneRows), unsigned(laneCols)},
      {unsigned(warpRows), unsigned(warpCols)});
}

MmaEncodingAttr mlir::sagegpu::getAccumulatorEncoding(MLIRContext *ctx,
                                                      sage::MmaKind kind,
                                                      int64_t m, int64_t n,
                                                      unsigned numWarps) {
  if (!sage::isWgmma(kind)) {
    sage::MmaSyncTiling t = sage::mmaSyncTiling(m, numWarps);
    return MmaEncodingAttr::get(ctx, sage::MmaKind::MmaSync,
                                {unsigned(t.warpsM), unsigned(t.warpsN)}, 0);
  }
  // One wgmma per warpgroup and 64-row block spans the whole N.
  return MmaEncodingAttr::get(ctx, sage::MmaKind::Wgmma, {numWarps, 1},
                              unsigned(n));
}
