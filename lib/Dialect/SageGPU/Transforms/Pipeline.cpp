//===- Pipeline.cpp - a loop's TMA copies issued stages ahead -------------===//
//
// In an scf.for with sage.num_stages = S, a TMA copy that refills a
// per-iteration buffer becomes a ring of S buffers and S mbarriers, set up
// once: the first S - 1 iterations' copies are issued before the loop, and
// iteration `it` issues iteration `it + S - 1`'s where its own was, then
// reads slot `it % S` and waits for its phase `(it / S) % 2`. The copy of an
// iteration is thus in flight during the S - 1 iterations before it.
//
// A loop whose one wgmma dot accumulates into a carried value keeps that
// accumulation in flight across iterations (overlapAccumulation): the next
// iteration's dot is issued before the current one completes.
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::sagegpu {
#define GEN_PASS_DEF_SAGEGPUPIPELINE
#include "sage/Dialect/SageGPU/Transforms/Passes.h.inc"
} // namespace mlir::sagegpu

using namespace mlir;
using namespace mlir::sage;
using namespace mlir::sagegpu;

namespace {

/// A copy of the loop body to pipeline, and what it takes with it.
struct Copy {
  TmaLoadOp tma;
  LocalAllocOp buffer, barrier;
  /// The body's ops that compute the coordinates, in order.
  SmallVector<Operation *> coordinates;
};

/// The ops of `body` that `values` depend on, in body order, when all are
/// side-effect free and hold no regions and the only block argument among
/// their inputs is the induction variable (a value carried from the last
/// iteration is not known ahead); nullopt otherwise.
std::optional<SmallVector<Operation *>> sliceIn(scf::ForOp loop,
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

/// `tma` as a copy the loop can issue ahead: its buffer and mbarrier are
/// allocated in the body and used there only (the mbarrier by its
/// init, the copy, waits and inval), its map comes from outside the loop
/// and its coordinates from the induction variable (sliceIn).
std::optional<Copy> pipelinable(scf::ForOp loop, TmaLoadOp tma) {
  Block *body = loop.getBody();
  auto buffer = tma.getDest().getDefiningOp<LocalAllocOp>();
  auto barrier = tma.getBarrier().getDefiningOp<LocalAllocOp>();
  if (tma->getBlock() != body || !buffer || !barrier || buffer.getInit() ||
      buffer->getBlock() != body || barrier->getBlock() != body ||
      !loop.isDefinedOutsideOfLoop(tma.getMap()))
    return std::nullopt;
  for (Operation *user : barrier->getUsers())
    if (user->getBlock() != body ||
        !isa<MbarrierInitOp, MbarrierWaitOp, MbarrierInvalOp, TmaLoadOp>(user))
      return std::nullopt;
  for (Operation *user : buffer->getUsers())
    if (!body->findAncestorOpInBlock(*user))
      return std::nullopt;
  std::optional<SmallVector<Operation *>> coordinates =
      sliceIn(loop, {tma.getOuter(), tma.getInner()});
  if (!coordinates)
    return std::nullopt;
  return Copy{tma, buffer, barrier, std::move(*coordinates)};
}

/// Builds the i32 constant `v`.
Value i32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

/// `value` (an integer of the loop's type) as i32.
Value toI32(OpBuilder &b, Location loc, Value value) {
  if (value.getType().isInteger(32))
    return value;
  return arith::TruncIOp::create(b, loc, b.getI32Type(), value);
}

struct Pipeliner {
  scf::ForOp loop;
  int64_t stages;

  /// The ring type of `tile`'s buffer type.
  SharedTileType ringOf(SharedTileType tile) {
    SmallVector<int64_t> shape{stages};
    llvm::append_range(shape, tile.getShape());
    return SharedTileType::get(tile.getContext(), shape, tile.getElementType(),
                               tile.getEncoding());
  }

  Value slot(OpBuilder &b, Location loc, Value ring, Value index) {
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

  /// Issues every copy for the iteration whose induction variable is `iv`
  /// into slot `index` of its rings, if `iv` is below the upper bound (one
  /// branch for all: one barrier orders their refills).
  scf::IfOp issue(OpBuilder &b, Location loc, ArrayRef<Copy> copies,
                  ArrayRef<std::pair<Value, Value>> rings, Value iv,
                  Value index) {
    Value exists = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iv,
                                         loop.getUpperBound());
    auto branch = scf::IfOp::create(b, loc, exists, /*withElse=*/false);
    OpBuilder inside = branch.getThenBodyBuilder();
    IRMapping map;
    map.map(loop.getInductionVar(), iv);
    for (auto [copy, ring] : llvm::zip(copies, rings)) {
      for (Operation *op : copy.coordinates)
        if (!map.contains(op->getResult(0)))
          inside.clone(*op, map);
      TmaLoadOp tma = copy.tma;
      TmaLoadOp::create(inside, tma.getLoc(), tma.getMap(),
                        map.lookupOrDefault(tma.getOuter()),
                        map.lookupOrDefault(tma.getInner()),
                        slot(inside, loc, ring.second, index),
                        slot(inside, loc, ring.first, index));
    }
    return branch;
  }

  /// Leaves the loop's accumulation in flight across iterations when the
  /// body's one wgmma dot accumulates into a carried value that nothing
  /// else reads: the dot's result is carried as it is, and after the dot a
  /// `dot_wait` with no operands and pendings = 1 completes the previous
  /// iteration's, so the tensor cores never drain inside the loop. The
  /// refill moves after that wait: the slot it writes, (it + S - 1) % S =
  /// (it - 1) % S, is the one the previous iteration's dot read (one
  /// barrier orders every warpgroup's wait before it); the dot in flight
  /// reads slot it % S. After the loop a dot_wait completes the last dot.
  void overlapAccumulation(scf::IfOp refill) {
    Block *body = loop.getBody();
    SmallVector<DotOp> dots;
    body->walk([&](DotOp dot) {
      if (isWgmma(dot.getMmaKind()))
        dots.push_back(dot);
    });
    if (dots.size() != 1 || dots.front()->getBlock() != body)
      return;
    DotOp dot = dots.front();
    auto acc = dyn_cast<BlockArgument>(dot.getAcc());
    if (!acc || acc.getOwner() != body || acc == loop.getInductionVar() ||
        !acc.hasOneUse() || !dot->hasOneUse())
      return;
    auto wait = dyn_cast<DotWaitOp>(*dot->user_begin());
    unsigned index = acc.getArgNumber() - 1;
    auto yield = cast<scf::YieldOp>(body->getTerminator());
    if (!wait || wait.getInputs().size() != 1 ||
        !wait.getResult(0).hasOneUse() ||
        yield.getOperand(index) != wait.getResult(0) ||
        !refill->isBeforeInBlock(dot))
      return;
    OpBuilder b(wait);
    auto bound = DotWaitOp::create(b, wait.getLoc(), ValueRange{}, 1);
    yield.setOperand(index, dot.getResult());
    wait->erase();
    refill->moveAfter(bound);
    OpBuilder after(loop->getContext());
    after.setInsertionPointAfter(loop);
    Value carried = loop.getResult(index);
    auto done = DotWaitOp::create(after, loop.getLoc(), ValueRange{carried}, 0);
    carried.replaceAllUsesExcept(done.getResult(0), done);
  }

  void run(MutableArrayRef<Copy> copies) {
    Location loc = loop.getLoc();
    OpBuilder b(loop);
    Value lb = loop.getLowerBound(), step = loop.getStep();
    Type ivType = lb.getType();
    auto ivConst = [&](OpBuilder &at, int64_t v) -> Value {
      return arith::ConstantOp::create(at, loc, at.getIntegerAttr(ivType, v));
    };

    // The rings, set up before the loop with the first S - 1 copies.
    SmallVector<std::pair<Value, Value>> rings;
    for (Copy &copy : copies) {
      Value ring = LocalAllocOp::create(
          b, loc, ringOf(copy.buffer.getResult().getType()), Value(),
          IntegerAttr());
      Value bars = LocalAllocOp::create(
          b, loc,
          SharedTileType::get(b.getContext(), {stages}, b.getI64Type(), {}),
          Value(), IntegerAttr());
      for (int64_t k = 0; k < stages; ++k)
        MbarrierInitOp::create(b, loc, slot(b, loc, bars, i32(b, loc, k)), 1);
      rings.push_back({ring, bars});
    }
    for (int64_t k = 0; k + 1 < stages; ++k) {
      Value iv = arith::AddIOp::create(
          b, loc, lb,
          arith::MulIOp::create(b, loc, step, ivConst(b, k)).getResult());
      issue(b, loc, copies, rings, iv, i32(b, loc, k));
    }

    // In the body: this iteration's slot and phase, the copy S - 1 ahead.
    Block *body = loop.getBody();
    OpBuilder top = OpBuilder::atBlockBegin(body);
    Value iv = loop.getInductionVar();
    Value it =
        toI32(top, loc,
              arith::DivUIOp::create(
                  top, loc, arith::SubIOp::create(top, loc, iv, lb), step));
    Value cStages = i32(top, loc, stages);
    Value index = arith::RemUIOp::create(top, loc, it, cStages);
    Value phase = arith::RemUIOp::create(
        top, loc, arith::DivUIOp::create(top, loc, it, cStages),
        i32(top, loc, 2));
    // Every copy S - 1 ahead, where the first of them was issued.
    OpBuilder here(copies.front().tma);
    Value ahead = arith::AddIOp::create(
        here, loc, iv,
        arith::MulIOp::create(here, loc, step, ivConst(here, stages - 1))
            .getResult());
    Value next = arith::RemUIOp::create(
        here, loc,
        arith::AddIOp::create(here, loc, it, i32(here, loc, stages - 1)),
        cStages);
    scf::IfOp refill = issue(here, loc, copies, rings, ahead, next);
    for (auto [copy, ring] : llvm::zip(copies, rings)) {
      auto [tiles, bars] = ring;
      OpBuilder at(copy.buffer);
      copy.buffer.getResult().replaceAllUsesExcept(slot(at, loc, tiles, index),
                                                   copy.tma);
      for (Operation *user :
           llvm::make_early_inc_range(copy.barrier->getUsers())) {
        if (auto wait = dyn_cast<MbarrierWaitOp>(user)) {
          OpBuilder w(wait);
          MbarrierWaitOp::create(w, wait.getLoc(), slot(w, loc, bars, index),
                                 phase);
        }
        if (user != copy.tma.getOperation())
          user->erase();
      }
      copy.tma->erase();
      copy.barrier->erase();
      copy.buffer->erase();
    }

    // After the loop every copy issued has been waited for.
    OpBuilder after(loop->getContext());
    after.setInsertionPointAfter(loop);
    for (auto [tiles, bars] : rings)
      for (int64_t k = 0; k < stages; ++k)
        MbarrierInvalOp::create(after, loc,
                                slot(after, loc, bars, i32(after, loc, k)));
    overlapAccumulation(refill);
  }
};

struct PipelinePass : public sagegpu::impl::SageGPUPipelineBase<PipelinePass> {
  void runOnOperation() override {
    getOperation().walk([&](scf::ForOp loop) {
      auto stages =
          loop->getAttrOfType<IntegerAttr>(SageDialect::kNumStagesAttrName);
      if (!stages || stages.getInt() < 2)
        return;
      SmallVector<Copy> copies;
      for (auto tma : loop.getBody()->getOps<TmaLoadOp>())
        if (std::optional<Copy> copy = pipelinable(loop, tma))
          copies.push_back(std::move(*copy));
      if (!copies.empty())
        Pipeliner{loop, stages.getInt()}.run(copies);
    });
  }
};

} // namespace
