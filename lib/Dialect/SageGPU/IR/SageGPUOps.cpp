//===- SageGPUOps.cpp - sagegpu op verifiers and folders ------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

using namespace mlir;
using namespace mlir::sagegpu;

#define GET_OP_CLASSES
#include "sage/Dialect/SageGPU/IR/SageGPUOps.cpp.inc"

LogicalResult ConvertLayoutOp::verify() {
  for (Type type : {getSource().getType(), getResult().getType()})
    if (!getDistributedEncoding(type))
      return emitOpError() << "converts rank-2 tiles with distributed "
                              "encodings, not "
                           << type;
  return success();
}

namespace {
/// Where a load rebuilt for its one user goes. In the user's block, where
/// the kernel issued it: kernels order loads early so that their latency
/// overlaps other work (a scale loaded before a matmul's wait). A load
/// outside the user's loop moves to the user instead: re-issued there (an
/// L1 hit), it holds no registers across the loop.
static void setLoadInsertionPoint(PatternRewriter &rw, sage::LoadOp load,
                                  Operation *user) {
  if (load->getBlock() == user->getBlock())
    rw.setInsertionPoint(load);
  else
    rw.setInsertionPoint(user);
}

/// convert_layout(load) -> load in the new encoding: every thread loads the
/// elements it holds, so the load needs no exchange. Only for a load used
/// once (other users keep its encoding).
struct LoadInNewEncoding : public OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op,
                                PatternRewriter &rw) const override {
    auto load = op.getSource().getDefiningOp<sage::LoadOp>();
    if (!load || !load->hasOneUse())
      return failure();
    setLoadInsertionPoint(rw, load, op);
    auto moved = sage::LoadOp::create(
        rw, load.getLoc(), op.getResult().getType(), load.getPtr(),
        load.getOffsets(), load.getStrides(), load.getBounds());
    rw.replaceOp(op, moved);
    moved.setSigma16Rows(load.getSigma16Rows());
    rw.eraseOp(load);
    return success();
  }
};

/// trans(load) -> the load of the transposed view (the tile dimensions'
/// offsets, strides and bounds swapped), in the transpose's encoding.
struct LoadTransposed : public OpRewritePattern<TransOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransOp op,
                                PatternRewriter &rw) const override {
    auto load = op.getSource().getDefiningOp<sage::LoadOp>();
    // Rows in sigma16 order would become permuted columns: not a load.
    if (!load || !load->hasOneUse() || load.getSigma16Rows())
      return failure();
    auto swap = [](OperandRange r) {
      SmallVector<Value> swapped(r);
      std::swap(swapped[r.size() - 2], swapped[r.size() - 1]);
      return swapped;
    };
    setLoadInsertionPoint(rw, load, op);
    rw.replaceOp(op, sage::LoadOp::create(
                         rw, load.getLoc(), op.getResult().getType(),
                         load.getPtr(), swap(load.getOffsets()),
                         swap(load.getStrides()), swap(load.getBounds())));
    rw.eraseOp(load);
    return success();
  }
};
} // namespace

void ConvertLayoutOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                  MLIRContext *ctx) {
  results.add<LoadInNewEncoding>(ctx);
}

void TransOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *ctx) {
  results.add<LoadTransposed>(ctx);
}

OpFoldResult ConvertLayoutOp::fold(FoldAdaptor) {
  // Same type: nothing moves.
  if (getSource().getType() == getResult().getType())
    return getSource();
  // convert(convert(x)) is one conversion from x's encoding.
  if (auto inner = getSource().getDefiningOp<ConvertLayoutOp>()) {
    if (inner.getSource().getType() == getResult().getType())
      return inner.getSource();
    getSourceMutable().assign(inner.getSource());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Shared memory
//===----------------------------------------------------------------------===//

/// A register tile and a shared tile hold the same elements.
static LogicalResult verifySameTile(Operation *op, RankedTensorType tile,
                                    SharedTileType shared) {
  if (tile.getShape() != shared.getShape() ||
      tile.getElementType() != shared.getElementType())
    return op->emitOpError()
           << "moves a " << tile << " tile to or from a shared tile of another "
           << "shape or element type, " << shared;
  if (!getDistributedEncoding(tile))
    return op->emitOpError()
           << "needs the register tile's distributed encoding, got " << tile;
  return success();
}

LogicalResult LocalAllocOp::verify() {
  SharedTileType type = getResult().getType();
  if (getInit()) {
    if (type.isMbarrier())
      return emitOpError("cannot initialise mbarriers from registers");
    return verifySameTile(*this, getInit().getType(), type);
  }
  return success();
}

LocalAllocOp mlir::sagegpu::getAllocation(Value shared) {
  if (auto slot = shared.getDefiningOp<RingSlotOp>())
    shared = slot.getRing();
  return shared.getDefiningOp<LocalAllocOp>();
}

void mlir::sagegpu::forEachSharedUser(LocalAllocOp alloc,
                                      function_ref<void(Operation *)> fn) {
  for (Operation *user : alloc->getUsers()) {
    fn(user);
    if (auto slot = dyn_cast<RingSlotOp>(user))
      for (Operation *slotUser : slot->getUsers())
        fn(slotUser);
  }
}

LogicalResult RingSlotOp::verify() {
  SharedTileType ring = getRing().getType(), slot = getResult().getType();
  SmallVector<int64_t> want;
  if (ring.isRing())
    want.assign(ring.getShape().begin() + 1, ring.getShape().end());
  else if (ring.isMbarrier())
    want = {1};
  else
    return emitOpError() << "takes a ring of tiles (rank 3) or of mbarriers, "
                            "not "
                         << ring;
  if (slot.getShape() != ArrayRef<int64_t>(want) ||
      slot.getElementType() != ring.getElementType() ||
      slot.getEncoding() != ring.getEncoding())
    return emitOpError() << "a slot of " << ring << " is "
                         << SharedTileType::get(getContext(), want,
                                                ring.getElementType(),
                                                ring.getEncoding())
                         << ", not " << slot;
  return success();
}

LogicalResult LocalLoadOp::verify() {
  return verifySameTile(*this, getResult().getType(), getSource().getType());
}

LogicalResult LocalStoreOp::verify() {
  return verifySameTile(*this, getValue().getType(), getDest().getType());
}

LogicalResult AsyncCopyOp::verify() {
  if (getOffsets().size() != 2 || getStrides().size() != 2 ||
      getBounds().size() != 2)
    return emitOpError("takes two offsets, strides and bounds (a 2-D view)");
  auto ptr = cast<sage::PtrType>(getPtr().getType());
  if (ptr.getPointeeType() != getDest().getType().getElementType())
    return emitOpError() << "copies " << ptr.getPointeeType()
                         << " elements into a tile of "
                         << getDest().getType().getElementType();
  return success();
}

/// A TMA copy's shared tile is swizzled and, when its map is known, the
/// map's box lands (or is read) as that tile.
static LogicalResult verifyTmaTile(Operation *op, Value mapValue,
                                   ValueRange leading, SharedTileType tile,
                                   StringRef copies) {
  if (static_cast<int64_t>(leading.size()) > sage::kMaxLeadingDims)
    return op->emitOpError()
           << "names " << leading.size() << " leading indices, at most "
           << sage::kMaxLeadingDims << " (a tensor map has rank 5 at most)";
  auto encoding = dyn_cast_or_null<SharedEncodingAttr>(tile.getEncoding());
  if (!encoding || encoding.getSwizzle() == 0)
    return op->emitOpError()
           << copies << " a swizzled #sagegpu.shared tile, not " << tile;
  auto map = mapValue.getDefiningOp<sage::MakeTensorMapOp>();
  if (!map)
    return success();
  if (map.getBox() != tile.getShape() ||
      map.getInner() != int64_t(encoding.getInner()) ||
      map.getSwizzle() != int64_t(encoding.getSwizzle()) ||
      map.getPtr().getType().getPointeeType() != tile.getElementType())
    return op->emitOpError()
           << "the map's box [" << map.getBox()[0] << ", " << map.getBox()[1]
           << "] of " << map.getPtr().getType().getPointeeType() << " (inner "
           << map.getInner() << ", swizzle " << map.getSwizzle()
           << ") does not land as " << tile;
  if (map.getNumLeading() != static_cast<int64_t>(leading.size()))
    return op->emitOpError()
           << "names " << leading.size() << " leading indices, its map has "
           << map.getNumLeading() << " leading dimensions";
  return success();
}

LogicalResult TmaLoadOp::verify() {
  return verifyTmaTile(*this, getMap(), getLeading(), getDest().getType(),
                       "copies into");
}

LogicalResult BulkLoadOp::verify() {
  SharedTileType tile = getDest().getType();
  auto ptr = cast<sage::PtrType>(getPtr().getType());
  if (ptr.getPointeeType() != tile.getElementType())
    return emitOpError() << "copies " << ptr.getPointeeType()
                         << " elements into a tile of "
                         << tile.getElementType();
  auto encoding = dyn_cast_or_null<SharedEncodingAttr>(tile.getEncoding());
  if (encoding && encoding.getSwizzle() != 0)
    return emitOpError() << "copies contiguous elements: its tile must be "
                            "unswizzled, not "
                         << tile;
  ArrayRef<int64_t> shape = tile.getShape();
  if (shape.size() > 2 || (shape.size() == 2 && shape[0] != 1 && shape[1] != 1))
    return emitOpError() << "copies a row or a column (a 1-D tile or one "
                            "dimension 1), not "
                         << tile;
  return success();
}

LogicalResult TmaStoreOp::verify() {
  if (getAdd() && !getSource().getType().getElementType().isF32())
    return emitOpError() << "adds f32 tiles only (as sage.store atomic_add), "
                            "not "
                         << getSource().getType().getElementType();
  auto map = getMap().getDefiningOp<sage::MakeTensorMapOp>();
  if (map && map.getTyped() != getAdd())
    return emitOpError() << (getAdd() ? "adds through a map that counts bytes: "
                                        "a bulk reduction needs a typed map"
                                      : "stores through a typed map: only a "
                                        "bulk reduction (add) uses one");
  return verifyTmaTile(*this, getMap(), getLeading(), getSource().getType(),
                       "stores from");
}

//===----------------------------------------------------------------------===//
// Tensor cores and tile plumbing
//===----------------------------------------------------------------------===//

sage::MmaKind DotOp::getMmaKind() {
  auto mma = cast<MmaEncodingAttr>(getResult().getType().getEncoding());
  if (mma.getKind() == sage::MmaKind::MmaSync)
    return sage::MmaKind::MmaSync;
  return isa<SharedTileType>(getLhs().getType()) ? sage::MmaKind::Wgmma
                                                 : sage::MmaKind::WgmmaRegA;
}

/// Whether `use` yields an in-flight wgmma result to the next iteration of
/// an scf.for whose body uses it only as dot accumulators (the tensor cores
/// order the accumulations) and whose result only sagegpu.dot_wait reads.
static bool isCarriedInFlight(OpOperand &use) {
  auto yield = dyn_cast<scf::YieldOp>(use.getOwner());
  auto loop = yield ? dyn_cast<scf::ForOp>(yield->getParentOp()) : nullptr;
  if (!loop)
    return false;
  unsigned index = use.getOperandNumber();
  for (OpOperand &inner : loop.getRegionIterArgs()[index].getUses()) {
    auto dot = dyn_cast<DotOp>(inner.getOwner());
    if (!dot || &inner != &dot.getAccMutable())
      return false;
  }
  return llvm::all_of(loop.getResult(index).getUsers(),
                      [](Operation *user) { return isa<DotWaitOp>(user); });
}

bool DotOp::isMNMajorRhs() {
  SharedTileType rhs = getRhs().getType();
  auto encoding = cast<SharedEncodingAttr>(rhs.getEncoding());
  return encoding.getInner() != getRhsContractDim() &&
         encoding.getSwizzle() != 0 &&
         rhs.getElementType().getIntOrFloatBitWidth() == 16 &&
         sage::isWgmma(getMmaKind());
}

LogicalResult DotOp::verify() {
  Type lhsType = getLhs().getType();
  SharedTileType rhs = getRhs().getType();
  RankedTensorType result = getResult().getType();
  unsigned lc = getLhsContractDim(), rc = getRhsContractDim();
  if (lc > 1 || rc > 1)
    return emitOpError("contracts dimension 0 or 1 of each operand");
  ArrayRef<int64_t> lhsShape;
  Type lhsElem;
  if (auto shared = dyn_cast<SharedTileType>(lhsType)) {
    if (shared.isMbarrier())
      return emitOpError("takes tiles, not mbarriers");
    lhsShape = shared.getShape();
    lhsElem = shared.getElementType();
    if (cast<SharedEncodingAttr>(shared.getEncoding()).getInner() != lc)
      return emitOpError("reads shared operands K-major: the lhs encoding's "
                         "contiguous dimension must be the contracted one");
  } else if (auto tile = dyn_cast<RankedTensorType>(lhsType)) {
    auto dotOp = dyn_cast_or_null<DotOperandEncodingAttr>(tile.getEncoding());
    if (!dotOp || dotOp.getOperand() != 0 || lc != 1)
      return emitOpError() << "takes a register lhs only as an [M, K] tile in "
                              "the #sagegpu.dot_op A encoding, got "
                           << tile;
    if (dotOp.getParent() != result.getEncoding())
      return emitOpError() << "register lhs fragments must be of the result's "
                              "accumulator encoding, got "
                           << dotOp.getParent();
    lhsShape = tile.getShape();
    lhsElem = tile.getElementType();
  } else {
    return emitOpError("lhs must be a shared or register tile");
  }
  auto rhsEncoding = cast<SharedEncodingAttr>(rhs.getEncoding());
  if (rhsEncoding.getInner() != rc && !isMNMajorRhs())
    return emitOpError("reads shared operands K-major (or, on wgmma, a "
                       "swizzled 16-bit rhs MN-major): the rhs encoding's "
                       "contiguous dimension must be the contracted one");
  if (lhsElem != rhs.getElementType())
    return emitOpError() << "multiplies " << lhsElem << " by "
                         << rhs.getElementType();
  if (getLhsUnsigned() && !lhsElem.isInteger(8))
    return emitOpError() << "reads an unsigned lhs only of i8, not " << lhsElem;
  if (lhsShape[lc] != rhs.getShape()[rc])
    return emitOpError() << "contracts " << lhsShape[lc] << " against "
                         << rhs.getShape()[rc] << " elements";
  if (result.getDimSize(0) != lhsShape[1 - lc] ||
      result.getDimSize(1) != rhs.getShape()[1 - rc])
    return emitOpError() << "result " << result << " is not "
                         << lhsShape[1 - lc] << "x" << rhs.getShape()[1 - rc];
  Type accElem = result.getElementType();
  bool int8 = lhsElem.isInteger(8);
  if (!(int8 && accElem.isInteger(32)) &&
      !((lhsElem.isF16() || lhsElem.isBF16()) && accElem.isF32()))
    return emitOpError() << "accumulates i8 in i32 and f16/bf16 in f32, not "
                         << lhsElem << " in " << accElem;
  if (!isa_and_nonnull<MmaEncodingAttr>(result.getEncoding()))
    return emitOpError() << "result must carry an #sagegpu.mma accumulator "
                            "encoding, got "
                         << result;
  if (sage::isWgmma(getMmaKind()))
    for (OpOperand &use : getResult().getUses())
      if (!isa<DotWaitOp>(use.getOwner()) && !isCarriedInFlight(use))
        return emitOpError("result is in flight until a sagegpu.dot_wait "
                           "(wgmma is asynchronous): only dot_wait may use "
                           "it (or an scf.for that carries it into the next "
                           "iteration's dot accumulators), not ")
               << use.getOwner()->getName();
  return success();
}

LogicalResult DotWaitOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferredReturnTypes) {
  llvm::append_range(inferredReturnTypes, operands.getTypes());
  return success();
}

DotOp mlir::sagegpu::getWaitedDot(Value value) {
  while (auto loop = value.getDefiningOp<scf::ForOp>())
    value = loop.getYieldedValues()[cast<OpResult>(value).getResultNumber()];
  auto dot = value.getDefiningOp<DotOp>();
  if (!dot ||
      !isa_and_nonnull<MmaEncodingAttr>(
          dot.getResult().getType().getEncoding()) ||
      !sage::isWgmma(dot.getMmaKind()))
    return nullptr;
  return dot;
}

void mlir::sagegpu::forEachWait(DotOp dot, function_ref<void(DotWaitOp)> fn) {
  SmallVector<Value> work{dot.getResult()};
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      if (auto wait = dyn_cast<DotWaitOp>(use.getOwner()))
        fn(wait);
      else if (auto yield = dyn_cast<scf::YieldOp>(use.getOwner()))
        if (auto loop = dyn_cast<scf::ForOp>(yield->getParentOp()))
          work.push_back(loop.getResult(use.getOperandNumber()));
    }
  }
}

LogicalResult DotWaitOp::verify() {
  for (auto [i, input] : llvm::enumerate(getInputs()))
    if (!getWaitedDot(input))
      return emitOpError() << "operand " << i
                           << " is not the result of a wgmma sagegpu.dot "
                              "(mma.sync dots are synchronous)";
  return success();
}

LogicalResult WarpgroupTurnOp::verify() {
  if (std::optional<int32_t> only = getOnly();
      only && (*only < 0 || *only >= int32_t(getWarpgroups())))
    return emitOpError() << "only names warpgroup " << *only << " of "
                         << getWarpgroups();
  auto ws = (*this)->getParentOfType<WarpSpecializeOp>();
  if (!ws || !ws.getConsumers().isAncestor((*this)->getParentRegion()))
    return emitOpError("must be in the consumers region of a "
                       "sagegpu.warp_specialize: the turns are the consumer "
                       "warpgroups'");
  if (ws.getConsumerThreads() !=
      int64_t(getWarpgroups()) * WarpSpecializeOp::kProducerThreads)
    return emitOpError() << "takes turns among " << getWarpgroups()
                         << " warpgroups, but the consumers are "
                         << ws.getConsumerThreads() /
                                WarpSpecializeOp::kProducerThreads;
  return success();
}

int64_t WarpSpecializeOp::getConsumerThreadsOf(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  return int64_t(module ? sage::SageDialect::getNumWarps(module) : 4) * 32;
}

LogicalResult WarpSpecializeOp::verify() {
  Operation *parent = (*this)->getParentOp();
  if (!parent || !isa<FunctionOpInterface>(parent))
    return emitOpError("must be directly in a function body: it splits the "
                       "whole program into two warp roles");
  if (!isa_and_nonnull<func::ReturnOp>((*this)->getNextNode()))
    return emitOpError("must be the last op of its function before the "
                       "return: the roles do not meet again");
  for (int64_t regs :
       {int64_t(getProducerRegisters()), int64_t(getConsumerRegisters())})
    if (regs % 8 != 0)
      return emitOpError() << "registers per thread must be a multiple of 8 "
                              "(setmaxnreg), got "
                           << regs;
  int64_t consumers = getConsumerThreads();
  if (consumers % kProducerThreads != 0)
    return emitOpError() << "the consumers must be whole warpgroups: "
                         << consumers / 32 << " warps";
  int64_t total = kProducerThreads * getProducerRegisters() +
                  consumers * getConsumerRegisters();
  if (total > 65536)
    return emitOpError() << "asks for " << total
                         << " registers: an SM has 65536 (128 producer "
                            "threads and "
                         << consumers << " consumer threads)";
  return success();
}

WarpRole mlir::sagegpu::getWarpRole(Operation *op) {
  for (Operation *at = op; at; at = at->getParentOp())
    if (auto ws = dyn_cast_or_null<WarpSpecializeOp>(at->getParentOp()))
      return at->getParentRegion() == &ws.getProducer() ? WarpRole::Producer
                                                        : WarpRole::Consumers;
  return WarpRole::All;
}

int64_t mlir::sagegpu::getRoleFirstThread(Operation *op) {
  if (getWarpRole(op) != WarpRole::Producer)
    return 0;
  return op->getParentOfType<WarpSpecializeOp>().getConsumerThreads();
}

LogicalResult TransOp::verify() {
  RankedTensorType in = getSource().getType(), out = getResult().getType();
  if (in.getDimSize(0) != out.getDimSize(1) ||
      in.getDimSize(1) != out.getDimSize(0) ||
      in.getElementType() != out.getElementType())
    return emitOpError() << "result " << out << " is not the transpose of "
                         << in;
  return success();
}
