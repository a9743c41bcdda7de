//===- LoopCopies.cpp - the copy-engine copies a loop can issue ahead -----===//

#include "LoopCopies.h"

#include "sage/Dialect/Sage/IR/MmaShapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::sage;
using namespace mlir::sagegpu;

/// The ops of `body` that `values` depend on, in body order, when all are
/// side-effect free and hold no regions and the only block argument among
/// their inputs is the induction variable (a value carried from the last
/// iteration is not known ahead); nullopt otherwise.
static std::optional<SmallVector<Operation *>> sliceIn(scf::ForOp loop,
                                                       ValueRange values) {
  Block *body = loop.getBody();
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work(values.begin(), values.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v);
        arg && arg.getOwner() == body && v != loop.getInductionVar())
      return std::nullopt;
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != body || slice.contains(def))
      continue; // defined outside the body, or the induction variable
    if (!isPure(def) || def->getNumRegions() != 0)
      return std::nullopt;
    slice.insert(def);
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

std::optional<LoopCopy> mlir::sagegpu::getLoopCopy(scf::ForOp loop,
                                                   Operation *copy) {
  Block *body = loop.getBody();
  if (!isa<TmaLoadOp, BulkLoadOp>(copy))
    return std::nullopt;
  // Both ops end with (barrier, dest).
  unsigned n = copy->getNumOperands();
  auto buffer = copy->getOperand(n - 1).getDefiningOp<LocalAllocOp>();
  auto barrier = copy->getOperand(n - 2).getDefiningOp<LocalAllocOp>();
  if (copy->getBlock() != body || !buffer || !barrier || buffer.getInit() ||
      buffer->getBlock() != body || barrier->getBlock() != body)
    return std::nullopt;
  auto tma = dyn_cast<TmaLoadOp>(copy);
  if (tma && !loop.isDefinedOutsideOfLoop(tma.getMap()))
    return std::nullopt;
  for (Operation *user : barrier->getUsers())
    if (user->getBlock() != body ||
        !(user == copy ||
          isa<MbarrierInitOp, MbarrierWaitOp, MbarrierInvalOp>(user)))
      return std::nullopt;
  for (Operation *user : buffer->getUsers())
    if (!body->findAncestorOpInBlock(*user))
      return std::nullopt;
  // A TMA copy's map is outside the loop: its coordinates follow it.
  OperandRange inputs = copy->getOperands().drop_back(2);
  std::optional<SmallVector<Operation *>> coordinates =
      sliceIn(loop, tma ? inputs.drop_front() : inputs);
  if (!coordinates)
    return std::nullopt;
  return LoopCopy{copy, buffer, barrier, std::move(*coordinates)};
}

Value mlir::sagegpu::constantI32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

SharedTileType mlir::sagegpu::getRingType(SharedTileType tile, int64_t stages) {
  SmallVector<int64_t> shape{stages};
  llvm::append_range(shape, tile.getShape());
  return SharedTileType::get(tile.getContext(), shape, tile.getElementType(),
                             tile.getEncoding());
}

Value mlir::sagegpu::getRingSlot(OpBuilder &b, Location loc, Value ring,
                                 Value index) {
  auto type = cast<SharedTileType>(ring.getType());
  SmallVector<int64_t> shape(type.getShape().drop_front());
  if (shape.empty())
    shape = {1}; // one mbarrier
  return RingSlotOp::create(b, loc,
                            SharedTileType::get(b.getContext(), shape,
                                                type.getElementType(),
                                                type.getEncoding()),
                            ring, index);
}

Value mlir::sagegpu::createMbarrierRing(OpBuilder &b, Location loc,
                                        int64_t stages, int64_t count) {
  Value bars = LocalAllocOp::create(
      b, loc, SharedTileType::get(b.getContext(), {stages}, b.getI64Type(), {}),
      Value(), IntegerAttr());
  for (int64_t k = 0; k < stages; ++k)
    MbarrierInitOp::create(
        b, loc, getRingSlot(b, loc, bars, constantI32(b, loc, k)), count);
  return bars;
}

SmallVector<std::pair<Value, Value>>
mlir::sagegpu::createCopyRings(OpBuilder &b, Location loc,
                               ArrayRef<LoopCopy> copies, int64_t stages) {
  SmallVector<std::pair<Value, Value>> rings;
  for (LoopCopy copy : copies) {
    Value ring = LocalAllocOp::create(
        b, loc, getRingType(copy.buffer.getResult().getType(), stages), Value(),
        IntegerAttr());
    rings.push_back({ring, createMbarrierRing(b, loc, stages, 1)});
  }
  return rings;
}

RingPosition mlir::sagegpu::getRingPosition(scf::ForOp loop, int64_t stages,
                                            Value base) {
  Location loc = loop.getLoc();
  OpBuilder top = OpBuilder::atBlockBegin(loop.getBody());
  Value local = arith::DivUIOp::create(
                    top, loc,
                    arith::SubIOp::create(top, loc, loop.getInductionVar(),
                                          loop.getLowerBound()),
                    loop.getStep())
                    .getResult();
  if (!local.getType().isInteger(32))
    local = arith::TruncIOp::create(top, loc, top.getI32Type(), local);
  Value it =
      base ? arith::AddIOp::create(top, loc, base, local).getResult() : local;
  Value cStages = constantI32(top, loc, stages);
  Value slot = arith::RemUIOp::create(top, loc, it, cStages);
  Value phase = arith::RemUIOp::create(
      top, loc, arith::DivUIOp::create(top, loc, it, cStages),
      constantI32(top, loc, 2));
  return {local, it, slot, phase};
}

void mlir::sagegpu::readFromRing(Location loc, LoopCopy copy, Value tiles,
                                 Value barriers, const RingPosition &at) {
  OpBuilder slotAt(copy.buffer);
  copy.buffer.getResult().replaceAllUsesExcept(
      getRingSlot(slotAt, loc, tiles, at.slot), copy.copy);
  for (Operation *user : llvm::make_early_inc_range(copy.barrier->getUsers())) {
    if (auto wait = dyn_cast<MbarrierWaitOp>(user)) {
      OpBuilder w(wait);
      MbarrierWaitOp::create(w, wait.getLoc(),
                             getRingSlot(w, loc, barriers, at.slot), at.phase);
    }
    if (user != copy.copy)
      user->erase();
  }
}

Value mlir::sagegpu::getTripCountI32(scf::ForOp loop) {
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  Value span =
      arith::SubIOp::create(b, loc, loop.getUpperBound(), loop.getLowerBound());
  Value trips = arith::CeilDivSIOp::create(b, loc, span, loop.getStep());
  Value zero =
      arith::ConstantOp::create(b, loc, b.getIntegerAttr(trips.getType(), 0));
  trips = arith::MaxSIOp::create(b, loc, trips, zero);
  if (!trips.getType().isInteger(32))
    trips = arith::TruncIOp::create(b, loc, b.getI32Type(), trips);
  return trips;
}

void mlir::sagegpu::issueCopy(OpBuilder &b, Location loc, const LoopCopy &copy,
                              IRMapping &map, Value tiles, Value barriers,
                              Value index) {
  for (Operation *op : copy.coordinates)
    if (!map.contains(op->getResult(0)))
      b.clone(*op, map);
  // The copy itself, on the slot's tile and mbarrier, its inputs mapped.
  map.map(copy.buffer->getResult(0), getRingSlot(b, loc, tiles, index));
  map.map(copy.barrier->getResult(0), getRingSlot(b, loc, barriers, index));
  b.clone(*copy.copy, map);
}

DotWaitOp mlir::sagegpu::keepAccumulationInFlight(scf::ForOp loop,
                                                  Operation *mustPrecede) {
  Block *body = loop.getBody();
  SmallVector<DotOp> dots;
  body->walk([&](DotOp dot) {
    if (isWgmma(dot.getMmaKind()))
      dots.push_back(dot);
  });
  if (dots.size() != 1 || dots.front()->getBlock() != body)
    return {};
  DotOp dot = dots.front();
  auto acc = dyn_cast<BlockArgument>(dot.getAcc());
  if (!acc || acc.getOwner() != body || acc == loop.getInductionVar() ||
      !acc.hasOneUse() || !dot->hasOneUse())
    return {};
  auto wait = dyn_cast<DotWaitOp>(*dot->user_begin());
  unsigned index = acc.getArgNumber() - 1;
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  if (!wait || wait.getInputs().size() != 1 || !wait.getResult(0).hasOneUse() ||
      yield.getOperand(index) != wait.getResult(0) ||
      (mustPrecede && !mustPrecede->isBeforeInBlock(dot)))
    return {};
  OpBuilder b(wait);
  auto bound = DotWaitOp::create(b, wait.getLoc(), ValueRange{}, 1);
  yield.setOperand(index, dot.getResult());
  wait->erase();
  OpBuilder after(loop->getContext());
  after.setInsertionPointAfter(loop);
  Value carried = loop.getResult(index);
  auto done = DotWaitOp::create(after, loop.getLoc(), ValueRange{carried}, 0);
  carried.replaceAllUsesExcept(done.getResult(0), done);
  return bound;
}
