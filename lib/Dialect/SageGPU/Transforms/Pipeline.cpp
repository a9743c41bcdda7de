//===- Pipeline.cpp - a loop's copy-engine copies issued stages ahead -----===//
//
// In an scf.for with sage.num_stages = S, a copy-engine copy (TMA or bulk)
// that refills a per-iteration buffer becomes a ring of S buffers and S
// mbarriers, set up once: the first S - 1 iterations' copies are issued
// before the loop, and iteration `it` issues iteration `it + S - 1`'s where
// its own was, then reads slot `it % S` and waits for its phase
// `(it / S) % 2`. The copy of an iteration is thus in flight during the
// S - 1 iterations before it.
//
// The rings and the first copies go as early as the loop's block allows
// (issuePoint): their memory latency then passes under the work before the
// loop (the SageBwd forward quantizes its query block there).
//
// A loop whose one wgmma dot accumulates into a carried value keeps that
// accumulation in flight across iterations (keepAccumulationInFlight): the
// next iteration's dot is issued before the current one completes.
//
//===----------------------------------------------------------------------===//

#include "LoopCopies.h"

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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

/// Whether the first copies may be issued before `op` (they move up past
/// it): it holds no regions, and it only reads memory or fills a shared
/// buffer of its own (a local_alloc: the rings get other bytes, as
/// sagegpu-allocate-shared-memory sees them live from their new place). A
/// write to global memory may be what a copy reads; the wait for the
/// previous grid (no declared effects) is where what the copies read
/// becomes visible; mbarrier operations (an earlier loop's release) keep
/// their order.
bool copiesMayPass(Operation *op) {
  if (op->getNumRegions() != 0)
    return false;
  if (isa<LocalAllocOp>(op))
    return true;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return isPure(op);
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  return llvm::all_of(list, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Read>(e.getEffect());
  });
}

/// The op of the loop's block before which its rings are set up and its
/// first copies issued: the earliest that follows every op the copies may
/// not pass. The pure ops that compute what the copies and the loop's
/// bounds use move up with them (the kernel may compute a bound just before
/// its loop); every other definition they use stops them.
Operation *issuePoint(scf::ForOp loop, ArrayRef<LoopCopy> copies) {
  llvm::SmallPtrSet<Value, 16> used;
  auto use = [&](ValueRange values) {
    used.insert(values.begin(), values.end());
  };
  use(loop.getOperands().take_front(3)); // bounds and step
  for (const LoopCopy &copy : copies) {
    use(copy.inputs());
    for (Operation *op : copy.coordinates)
      use(op->getOperands());
  }
  // The ops between the last one the copies may not pass and the loop:
  // those carried up (in order), then the point, then the others (in order).
  Operation *point = loop;
  SmallVector<Operation *> carried;
  for (Operation *prev = loop->getPrevNode(); prev;
       prev = prev->getPrevNode()) {
    bool defines = llvm::any_of(prev->getResults(),
                                [&](Value r) { return used.contains(r); });
    if (defines && isPure(prev) && prev->getNumRegions() == 0) {
      carried.push_back(prev);
      use(prev->getOperands());
    } else if (defines || !copiesMayPass(prev)) {
      break;
    } else {
      point = prev;
    }
  }
  for (Operation *op : llvm::reverse(carried))
    if (point->isBeforeInBlock(op))
      op->moveBefore(point);
  return point;
}

struct Pipeliner {
  scf::ForOp loop;
  int64_t stages;

  /// Issues every copy for the iteration whose induction variable is `iv`
  /// into slot `index` of its rings, if `iv` is below the upper bound (one
  /// branch for all: one barrier orders their refills).
  scf::IfOp issue(OpBuilder &b, Location loc, ArrayRef<LoopCopy> copies,
                  ArrayRef<std::pair<Value, Value>> rings, Value iv,
                  Value index) {
    Value exists = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iv,
                                         loop.getUpperBound());
    auto branch = scf::IfOp::create(b, loc, exists, /*withElse=*/false);
    OpBuilder inside = branch.getThenBodyBuilder();
    IRMapping map;
    map.map(loop.getInductionVar(), iv);
    for (auto [copy, ring] : llvm::zip(copies, rings))
      issueCopy(inside, loc, copy, map, ring.first, ring.second, index);
    return branch;
  }

  void run(MutableArrayRef<LoopCopy> copies) {
    Location loc = loop.getLoc();
    OpBuilder b(issuePoint(loop, copies));
    Value lb = loop.getLowerBound(), step = loop.getStep();
    Type ivType = lb.getType();
    auto ivConst = [&](OpBuilder &at, int64_t v) -> Value {
      return arith::ConstantOp::create(at, loc, at.getIntegerAttr(ivType, v));
    };

    // The rings, set up before the loop with the first S - 1 copies.
    SmallVector<std::pair<Value, Value>> rings =
        createCopyRings(b, loc, copies, stages);
    for (int64_t k = 0; k + 1 < stages; ++k) {
      Value iv = arith::AddIOp::create(
          b, loc, lb,
          arith::MulIOp::create(b, loc, step, ivConst(b, k)).getResult());
      issue(b, loc, copies, rings, iv, constantI32(b, loc, k));
    }

    // In the body: this iteration's slot and phase, the copy S - 1 ahead.
    RingPosition at = getRingPosition(loop, stages);
    // Every copy S - 1 ahead, where the first of them was issued.
    OpBuilder here(copies.front().copy);
    Value ahead = arith::AddIOp::create(
        here, loc, loop.getInductionVar(),
        arith::MulIOp::create(here, loc, step, ivConst(here, stages - 1))
            .getResult());
    Value next = arith::RemUIOp::create(
        here, loc,
        arith::AddIOp::create(here, loc, at.iteration,
                              constantI32(here, loc, stages - 1)),
        constantI32(here, loc, stages));
    scf::IfOp refill = issue(here, loc, copies, rings, ahead, next);
    for (auto [copy, ring] : llvm::zip(copies, rings)) {
      readFromRing(loc, copy, ring.first, ring.second, at);
      copy.copy->erase();
      copy.barrier->erase();
      copy.buffer->erase();
    }

    // After the loop every copy issued has been waited for.
    OpBuilder after(loop->getContext());
    after.setInsertionPointAfter(loop);
    for (auto [tiles, bars] : rings)
      for (int64_t k = 0; k < stages; ++k)
        MbarrierInvalOp::create(
            after, loc,
            getRingSlot(after, loc, bars, constantI32(after, loc, k)));
    // With the accumulation in flight, the refill writes the slot that the
    // previous iteration's dot read, (it + S - 1) % S = (it - 1) % S: it
    // moves after the wait that completes that dot (one barrier orders
    // every warpgroup's wait before it); the dot in flight reads it % S.
    if (DotWaitOp bound = keepAccumulationInFlight(loop, refill))
      refill->moveAfter(bound);
  }
};

struct PipelinePass : public sagegpu::impl::SageGPUPipelineBase<PipelinePass> {
  void runOnOperation() override {
    getOperation().walk([&](scf::ForOp loop) {
      auto stages =
          loop->getAttrOfType<IntegerAttr>(SageDialect::kNumStagesAttrName);
      if (!stages || stages.getInt() < 2)
        return;
      SmallVector<LoopCopy> copies;
      for (Operation &op : *loop.getBody())
        if (std::optional<LoopCopy> copy = getLoopCopy(loop, &op))
          copies.push_back(std::move(*copy));
      if (!copies.empty())
        Pipeliner{loop, stages.getInt()}.run(copies);
    });
  }
};

} // namespace
