//===- SageOps.cpp - sage op verifiers ------------------------------------===//
//
// Verifiers reject every ill-formed op with a diagnostic; none of them may
// assert, since sage-opt and the JIT feed them arbitrary user IR.
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Layout/SharedLayouts.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::sage;

#define GET_OP_CLASSES
#include "sage/Dialect/Sage/IR/SageOps.cpp.inc"

/// Every tile is rank 2 (guaranteed by the ODS type constraints).
static constexpr int64_t kTileRank = 2;

static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t limit) {
  if (axis < 0 || axis >= limit)
    return op->emitOpError()
           << "axis must be in [0, " << limit - 1 << "], got " << axis;
  return success();
}

/// `shape` with `axis` replaced by 1.
static SmallVector<int64_t> keepDimShape(ArrayRef<int64_t> shape,
                                         int64_t axis) {
  SmallVector<int64_t> out(shape);
  out[axis] = 1;
  return out;
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

//===----------------------------------------------------------------------===//
// Program structure
//===----------------------------------------------------------------------===//

LogicalResult ProgramIdOp::verify() { return verifyAxis(*this, getAxis(), 3); }

LogicalResult NumProgramsOp::verify() {
  return verifyAxis(*this, getAxis(), 3);
}

LogicalResult ClusterBarrierOp::verify() {
  auto module = (*this)->getParentOfType<ModuleOp>();
  if (!module || SageDialect::getNumCtas(module) < 2)
    return emitOpError() << "needs a module whose programs run in clusters ('"
                         << SageDialect::kNumCtasAttrName << "' > 1)";
  std::optional<TargetInfo> target = SageDialect::getTarget(module);
  if (target && target->getCapability() < 90)
    return emitOpError() << "needs sm_90 or later (thread-block clusters), "
                            "the module targets sm_"
                         << target->getCapability();
  return success();
}

/// Programmatic dependent launch (griddepcontrol) is sm_90's.
static LogicalResult verifyGridDependencyTarget(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  std::optional<TargetInfo> target =
      module ? SageDialect::getTarget(module) : std::nullopt;
  if (target && target->getCapability() < 90)
    return op->emitOpError()
           << "needs sm_90 or later (programmatic dependent launch), the "
              "module targets sm_"
           << target->getCapability();
  return success();
}

LogicalResult GridDependencyWaitOp::verify() {
  return verifyGridDependencyTarget(*this);
}

LogicalResult LaunchDependentsOp::verify() {
  return verifyGridDependencyTarget(*this);
}

/// A counter is an i32 in global memory (every target orders it with
/// acquire and release: sm_70's memory model).
static LogicalResult verifyCounter(Operation *op, PtrType counter) {
  if (!counter.getPointeeType().isInteger(32))
    return op->emitOpError() << "needs a counter of i32, got " << counter;
  return success();
}

LogicalResult CounterAddOp::verify() {
  return verifyCounter(*this, getCounter().getType());
}

LogicalResult CounterWaitOp::verify() {
  return verifyCounter(*this, getCounter().getType());
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

static LogicalResult verifyTileAccess(Operation *op, PtrType ptr,
                                      RankedTensorType tile, ValueRange offsets,
                                      ValueRange strides, ValueRange bounds) {
  int64_t rank = tile.getRank();
  int64_t entries = static_cast<int64_t>(offsets.size());
  if (entries < rank || entries > rank + kMaxLeadingDims)
    return op->emitOpError()
           << "expects " << rank << " to " << rank + kMaxLeadingDims
           << " offsets (up to " << kMaxLeadingDims
           << " leading dimensions, then one per tile dimension), got "
           << entries;
  if (strides.size() != offsets.size() || bounds.size() != offsets.size())
    return op->emitOpError() << "expects one stride and one bound per offset ("
                             << entries << "), got " << strides.size()
                             << " strides and " << bounds.size() << " bounds";
  if (tile.getElementType() != ptr.getPointeeType())
    return op->emitOpError()
           << "tile element type " << tile.getElementType()
           << " does not match pointee type " << ptr.getPointeeType();
  return success();
}

LogicalResult LoadOp::verify() {
  if (failed(verifyTileAccess(*this, getPtr().getType(), getResult().getType(),
                              getOffsets(), getStrides(), getBounds())))
    return failure();
  if (getSigma16Rows() && getResult().getType().getDimSize(0) % 16 != 0)
    return emitOpError() << "sigma16_rows permutes rows inside every 16: the "
                            "tile needs a multiple of 16 rows, got "
                         << getResult().getType().getDimSize(0);
  return success();
}

bool MakeTensorMapOp::isValidBox(ArrayRef<int64_t> box, int64_t inner,
                                 Type elem, int64_t swizzle) {
  unsigned bits = elem.getIntOrFloatBitWidth();
  int64_t innerBytes = box[inner] * (bits / 8), outer = box[1 - inner];
  // A swizzled slab needs whole 8-row atoms (layout::shared).
  return bits % 8 == 0 && swizzle != 0 && layout::isValidSwizzle(swizzle) &&
         innerBytes > 0 && innerBytes % swizzle == 0 &&
         outer >= layout::kAtomRows && outer % layout::kAtomRows == 0 &&
         outer <= kMaxBoxEntries;
}

LogicalResult MakeTensorMapOp::verify() {
  if (getBox().size() != 2 || getStrides().size() != getBounds().size() ||
      getStrides().size() < 2 || getStrides().size() > 2 + kMaxLeadingDims)
    return emitOpError() << "describes a 2-D box of a view with up to "
                         << kMaxLeadingDims
                         << " leading dimensions: expects a 2-D box and 2 to "
                         << 2 + kMaxLeadingDims
                         << " strides and as many bounds, got "
                         << getStrides().size() << " strides and "
                         << getBounds().size() << " bounds";
  if (!getScratch().getType().getPointeeType().isInteger(8))
    return emitOpError() << "scratch must be a !sage.ptr<i8>";
  if (getTyped() && !getPtr().getType().getPointeeType().isF32())
    return emitOpError() << "a typed map counts f32 elements, not "
                         << getPtr().getType().getPointeeType();
  int64_t inner = getInner();
  APInt unit;
  if (!matchPattern(getTileStrides()[inner], m_ConstantInt(&unit)) || unit != 1)
    return emitOpError() << "stride of the inner dimension " << inner
                         << " must be the constant 1";
  Type elem = getPtr().getType().getPointeeType();
  if (!isValidBox(getBox(), inner, elem, getSwizzle()))
    return emitOpError() << "box " << shapeStr(getBox()) << " of " << elem
                         << " with swizzle " << getSwizzle()
                         << " must span whole swizzle widths (32, 64 or 128 "
                            "bytes) of the inner dimension and a multiple of "
                            "8 rows, 8 to 256";
  auto func = (*this)->getParentOfType<FunctionOpInterface>();
  auto bytes = func ? func->getAttrOfType<IntegerAttr>(
                          SageDialect::kGlobalScratchAttrName)
                    : IntegerAttr();
  if (!bytes || (static_cast<int64_t>(getSlot()) + 1) * kBytes > bytes.getInt())
    return emitOpError()
           << "slot " << getSlot()
           << " lies outside the function's 'sage.global_scratch'";
  return success();
}

LogicalResult StoreOp::verify() {
  auto tile = cast<RankedTensorType>(getValue().getType());
  if (failed(verifyTileAccess(*this, getPtr().getType(), tile, getOffsets(),
                              getStrides(), getBounds())))
    return failure();
  if (getAtomicAdd() && !tile.getElementType().isF32())
    return emitOpError() << "atomic_add needs an f32 tile, got "
                         << tile.getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// Tile construction, broadcasting, reductions
//===----------------------------------------------------------------------===//

LogicalResult SplatOp::verify() {
  auto type = cast<RankedTensorType>(getResult().getType());
  if (type.getElementType() != getValue().getType())
    return emitOpError() << "scalar type " << getValue().getType()
                         << " does not match tile element type "
                         << type.getElementType();
  return success();
}

LogicalResult IotaOp::verify() {
  return verifyAxis(*this, getAxis(), kTileRank);
}

/// Checks a `groups` mask of index bits along a dimension of `extent`: a
/// power of two, the mask below it, nonzero and not all of its bits.
static LogicalResult verifyGroups(Operation *op, uint32_t groups,
                                  int64_t extent) {
  if (!llvm::isPowerOf2_64(extent) || extent < 2)
    return op->emitOpError()
           << "groups need a power-of-two extent of at least 2, got " << extent;
  if (groups >= extent || groups == extent - 1)
    return op->emitOpError()
           << "groups " << groups << " must be some, not all, of the index "
           << "bits below " << extent;
  return success();
}

std::optional<unsigned> BroadcastOp::getGroupedDim() {
  if (!getGroups())
    return std::nullopt;
  ArrayRef<int64_t> from = getSource().getType().getShape();
  ArrayRef<int64_t> to = getResult().getType().getShape();
  for (unsigned d = 0; d < 2; ++d)
    if (from[d] != 1 && from[d] != to[d])
      return d;
  return std::nullopt;
}

LogicalResult BroadcastOp::verify() {
  auto src = cast<RankedTensorType>(getSource().getType());
  auto dst = cast<RankedTensorType>(getResult().getType());
  if (src.getElementType() != dst.getElementType())
    return emitOpError() << "element type changes from " << src.getElementType()
                         << " to " << dst.getElementType();
  std::optional<unsigned> grouped = getGroupedDim();
  if (getGroups() && !grouped)
    return emitOpError() << "groups need a dimension whose size is neither 1 "
                            "nor the result's";
  for (auto [i, s, d] : llvm::enumerate(src.getShape(), dst.getShape())) {
    if (grouped && i == *grouped) {
      uint32_t groups = *getGroups();
      if (failed(verifyGroups(*this, groups, d)))
        return failure();
      int64_t want = int64_t(1) << llvm::popcount(groups);
      if (s != want)
        return emitOpError()
               << "groups " << groups << " take " << want
               << " entries along dimension " << i << ", got " << s;
      continue;
    }
    if (s != d && s != 1)
      return emitOpError() << "dimension " << i << " of size " << s
                           << " cannot broadcast to " << d
                           << " (only size-1 dimensions expand)";
  }
  return success();
}

LogicalResult ReduceOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), kTileRank)))
    return failure();
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (in.getElementType().isInteger(1))
    return emitOpError() << "cannot reduce i1 tiles";
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from input " << in.getElementType();
  SmallVector<int64_t> expected = keepDimShape(in.getShape(), getAxis());
  std::optional<uint32_t> groups = getGroups();
  if (groups) {
    if (failed(verifyGroups(*this, *groups, in.getDimSize(getAxis()))))
      return failure();
    expected[getAxis()] = int64_t(1) << llvm::popcount(*groups);
  }
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result shape must be " << shapeStr(expected)
                         << (groups ? " (one entry per group along the axis)"
                                    : " (reduced axis kept with size 1)")
                         << ", got " << shapeStr(out.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// SageBwd building blocks
//===----------------------------------------------------------------------===//

LogicalResult SmoothOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), kTileRank)))
    return failure();
  auto in = cast<RankedTensorType>(getInput().getType());
  if (getSmoothed().getType().getShape() != in.getShape())
    return emitOpError() << "smoothed tile must have the input's shape "
                         << shapeStr(in.getShape());
  SmallVector<int64_t> expected = keepDimShape(in.getShape(), getAxis());
  if (getMean().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "mean must have shape " << shapeStr(expected)
                         << ", got "
                         << shapeStr(getMean().getType().getShape());
  return success();
}

/// Checks a (values, scales) pair against a scheme: the shared part of
/// quantize and dequantize.
static LogicalResult verifyQuantizedPair(Operation *op,
                                         QuantSchemeAttrInterface scheme,
                                         RankedTensorType floatTile,
                                         RankedTensorType quantTile,
                                         RankedTensorType scales) {
  if (floatTile.getShape() != quantTile.getShape())
    return op->emitOpError() << "quantized and float tiles differ in shape: "
                             << shapeStr(quantTile.getShape()) << " vs "
                             << shapeStr(floatTile.getShape());
  Type storage = scheme.getStorageType(op->getContext());
  if (quantTile.getElementType() != storage)
    return op->emitOpError()
           << "scheme " << scheme << " stores " << storage
           << ", but the quantized tile holds " << quantTile.getElementType();
  SmallVector<int64_t> granule = scheme.getGranuleShape(floatTile.getShape());
  for (auto [dim, g] : llvm::zip_equal(floatTile.getShape(), granule))
    if (g <= 0 || dim % g != 0)
      return op->emitOpError()
             << "scheme " << scheme << " granule " << shapeStr(granule)
             << " does not tile " << shapeStr(floatTile.getShape());
  SmallVector<int64_t> expected = scheme.getScaleShape(floatTile.getShape());
  if (scales.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "scheme " << scheme << " needs scales of shape "
           << shapeStr(expected) << ", got " << shapeStr(scales.getShape());
  return success();
}

LogicalResult QuantizeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto scheme = getScheme();
  if (failed(scheme.verifyInputType(in.getElementType(),
                                    [&] { return emitOpError(); })))
    return failure();
  if (getScale() && getScale().getType() != getScales().getType())
    return emitOpError() << "given scale type " << getScale().getType()
                         << " differs from the scales result type "
                         << getScales().getType();
  if (getUnsaturated() && !getScale())
    return emitOpError() << "unsaturated needs a given scale (a computed "
                            "absmax scale keeps the clamp)";
  return verifyQuantizedPair(*this, scheme, in,
                             cast<RankedTensorType>(getOutput().getType()),
                             getScales().getType());
}

LogicalResult DequantizeOp::verify() {
  return verifyQuantizedPair(*this, getScheme(), getOutput().getType(),
                             cast<RankedTensorType>(getInput().getType()),
                             getScales().getType());
}

/// The largest contraction whose int32 sum of i8 products cannot overflow:
/// 127 * 127 * 131072 < 2^31. It relies on the schemes never producing -128.
static constexpr int64_t kMaxInt8Contraction = 131072;
/// The same for an unsigned lhs (u8 x s8 products): 255 * 127 * 65536 < 2^31.
static constexpr int64_t kMaxUInt8Contraction = 65536;

namespace {
/// Operand geometry shared by both matmuls.
struct MatmulShape {
  int64_t m, n, k;
};
} // namespace

static FailureOr<MatmulShape>
verifyContraction(Operation *op, RankedTensorType lhs, RankedTensorType rhs,
                  int64_t lhsDim, int64_t rhsDim, RankedTensorType result) {
  if (lhsDim < 0 || lhsDim > 1 || rhsDim < 0 || rhsDim > 1)
    return op->emitOpError() << "contracted dimensions must be 0 or 1, got ("
                             << lhsDim << ", " << rhsDim << ")";
  int64_t k = lhs.getDimSize(lhsDim);
  if (rhs.getDimSize(rhsDim) != k)
    return op->emitOpError()
           << "contracted sizes differ: lhs dimension " << lhsDim << " is " << k
           << ", rhs dimension " << rhsDim << " is " << rhs.getDimSize(rhsDim);
  MatmulShape shape{lhs.getDimSize(1 - lhsDim), rhs.getDimSize(1 - rhsDim), k};
  if (result.getShape() != ArrayRef<int64_t>{shape.m, shape.n})
    return op->emitOpError() << "result must be " << shape.m << "x" << shape.n
                             << ", got " << shapeStr(result.getShape());
  return shape;
}

/// A scale tile for `operand` contracted along `contractDim`: rank 2, size 1
/// along the contraction, and 1 or the full size along the other dimension.
static LogicalResult verifyMatmulScale(Operation *op, StringRef which,
                                       RankedTensorType operand,
                                       RankedTensorType scale,
                                       int64_t contractDim) {
  if (scale.getDimSize(contractDim) != 1)
    return op->emitOpError()
           << which << " scale varies along the contracted dimension "
           << contractDim << " (shape " << shapeStr(scale.getShape())
           << "); only scales constant along the contraction factor out of "
              "the integer product";
  int64_t other = 1 - contractDim;
  int64_t size = scale.getDimSize(other);
  if (size != 1 && size != operand.getDimSize(other))
    return op->emitOpError() << which << " scale must have size 1 or "
                             << operand.getDimSize(other) << " along dimension "
                             << other << ", got " << size;
  return success();
}

/// One i8 product of at most kMaxInt8Contraction elements (an unsigned
/// lhs: kMaxUInt8Contraction) fits its int32 accumulator.
static LogicalResult verifyInt8Contraction(Operation *op, int64_t k,
                                           bool lhsUnsigned = false) {
  int64_t most = lhsUnsigned ? kMaxUInt8Contraction : kMaxInt8Contraction;
  if (k <= most)
    return success();
  return op->emitOpError() << "contraction of " << k
                           << " elements may overflow the int32 accumulator "
                              "(at most "
                           << most << ")";
}

LogicalResult QMatmulOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType();
  FailureOr<MatmulShape> shape =
      verifyContraction(*this, lhs, rhs, getLhsContractDim(),
                        getRhsContractDim(), getResult().getType());
  if (failed(shape))
    return failure();
  if (failed(verifyInt8Contraction(*this, shape->k, getLhsUnsigned())))
    return failure();
  if (failed(verifyMatmulScale(*this, "lhs", lhs, getLhsScale().getType(),
                               getLhsContractDim())) ||
      failed(verifyMatmulScale(*this, "rhs", rhs, getRhsScale().getType(),
                               getRhsContractDim())))
    return failure();
  if (getRhsSigma16()) {
    if (shape->k % 16 != 0)
      return emitOpError() << "rhs_sigma16 permutes the contraction inside "
                              "every 16: it needs a multiple of 16, got "
                           << shape->k;
    if (getLhsContractDim() != 1)
      return emitOpError() << "rhs_sigma16 feeds lhs as a register A "
                              "operand: lhs must be contracted over its "
                              "columns (contract(1, _))";
  }
  return success();
}

LogicalResult MatmulOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType();
  if (lhs.getElementType() != rhs.getElementType())
    return emitOpError() << "operands must share an element type, got "
                         << lhs.getElementType() << " and "
                         << rhs.getElementType();
  // i8 products accumulate exactly in i32, 16-bit ones in f32.
  bool isInt = lhs.getElementType().isInteger(8);
  Type resultElem = getResult().getType().getElementType();
  if (resultElem.isInteger(32) != isInt)
    return emitOpError() << (isInt ? "i8" : "16-bit")
                         << " operands accumulate in "
                         << (isInt ? "i32" : "f32") << ", got a " << resultElem
                         << " result";
  FailureOr<MatmulShape> shape =
      verifyContraction(*this, lhs, rhs, getLhsContractDim(),
                        getRhsContractDim(), getResult().getType());
  if (failed(shape))
    return failure();
  return isInt ? verifyInt8Contraction(*this, shape->k) : success();
}

LogicalResult SoftmaxUpdateOp::verify() {
  int64_t rows = getLogits().getType().getDimSize(0);
  ArrayRef<int64_t> stats = getRowMax().getType().getShape();
  if (stats != ArrayRef<int64_t>{rows, 1})
    return emitOpError() << "row statistics must be " << rows
                         << "x1 for logits of " << rows << " rows, got "
                         << shapeStr(stats);
  return success();
}

//===----------------------------------------------------------------------===//
// Layout relations (LayoutRelationsOpInterface)
//===----------------------------------------------------------------------===//

void BroadcastOp::getTiedTiles(SmallVectorImpl<std::pair<Value, Value>> &tied) {
  if (getSource().getType().getShape() == getResult().getType().getShape())
    tied.push_back({getSource(), getResult()});
}

void BroadcastOp::getSlicedTiles(SmallVectorImpl<SliceRelation> &sliced) {
  ArrayRef<int64_t> from = getSource().getType().getShape();
  ArrayRef<int64_t> to = getResult().getType().getShape();
  // An Mx1 or 1xN source is a slice of the result; a 1x1 source holds one
  // value that any layout replicates, so it is left free. A grouped source
  // is the grouped slice of the result along its grouped dimension (its
  // other dimension, if it expands, expands within the grouped slice's
  // layout: the lowering re-indexes registers the same way).
  if (std::optional<unsigned> d = getGroupedDim()) {
    if (from[1 - *d] == to[1 - *d])
      sliced.push_back({getSource(), getResult(), *d, *getGroups()});
    return;
  }
  for (unsigned d = 0; d < 2; ++d)
    if (from[d] == 1 && to[d] != 1 && from[1 - d] != 1)
      sliced.push_back({getSource(), getResult(), d});
}

void ReduceOp::getSlicedTiles(SmallVectorImpl<SliceRelation> &sliced) {
  sliced.push_back(
      {getResult(), getInput(), getAxis(), getGroups().value_or(0)});
}

void QMatmulOp::getTiedTiles(SmallVectorImpl<std::pair<Value, Value>> &tied) {
  if (getAcc())
    tied.push_back({getAcc(), getResult()});
}

void MatmulOp::getTiedTiles(SmallVectorImpl<std::pair<Value, Value>> &tied) {
  if (getAcc())
    tied.push_back({getAcc(), getResult()});
}
