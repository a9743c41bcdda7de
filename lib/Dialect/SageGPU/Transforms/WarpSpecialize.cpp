//===- WarpSpecialize.cpp - a TMA producer warpgroup beside the consumers -===//
//
// A kernel whose loop is marked sage.warp_specialize runs one more
// warpgroup, the producer, which issues the loop's TMA copies into rings of
// S buffers as soon as the consumers have freed a slot; the consumers (the
// program's warps, which run the rest of the kernel) wait for each slot's
// copies and free it once read. The two roles meet only at mbarriers:
// "full" (the copy engine completes it) and "empty" (every consumer thread
// arrives), so no consumer waits at a program-wide barrier for a copy to be
// issued, and the producer runs up to S iterations ahead.
//
//===----------------------------------------------------------------------===//

#include "LoopCopies.h"

#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::sagegpu {
#define GEN_PASS_DEF_SAGEGPUWARPSPECIALIZE
#include "sage/Dialect/SageGPU/Transforms/Passes.h.inc"
} // namespace mlir::sagegpu

using namespace mlir;
using namespace mlir::sage;
using namespace mlir::sagegpu;

namespace {

/// The registers a consumer thread may take: what the producer leaves of
/// the SM's 65536, a multiple of 8 (setmaxnreg), at most 240 (ptxas keeps a
/// few of the 255 addressable ones for itself).
int64_t consumerRegisters(int64_t producerRegisters, int64_t consumerThreads) {
  int64_t left = 65536 - WarpSpecializeOp::kProducerThreads * producerRegisters;
  return std::min<int64_t>(240, left / consumerThreads / 8 * 8);
}

struct Specializer {
  func::FuncOp func;
  /// The marked loops, in order, in one block: they share the rings.
  SmallVector<scf::ForOp> loops;
  int64_t stages;
  int64_t producerRegisters;
  /// The loops around the marked ones, outermost first (a persistent
  /// kernel's loop over tiles): the producer runs them too, and both roles
  /// count the iterations that used the rings across them.
  SmallVector<scf::ForOp> outer;
  /// Each marked loop's copies, in the order of the rings.
  SmallVector<SmallVector<LoopCopy>> copies;
  /// The consumer warpgroups (the ones that take turns with ping-pong).
  int64_t groups = 0;

  /// Whether `block` is the function's body or the body of an outer loop.
  bool isNestBlock(Block *block) {
    return block == &func.getBody().front() ||
           llvm::any_of(outer,
                        [&](scf::ForOp o) { return o.getBody() == block; });
  }

  /// The ops before the loop that the producer needs to compute `values`
  /// (side-effect-free scalar ops and the tensor maps, in the function body
  /// or the outer loops' bodies).
  FailureOr<llvm::SetVector<Operation *>> producerSlice(ValueRange values) {
    llvm::SetVector<Operation *> slice;
    SmallVector<Value> work(values.begin(), values.end());
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        bool outerIv = llvm::any_of(
            outer, [&](scf::ForOp o) { return v == o.getInductionVar(); });
        if (!outerIv && arg.getOwner() != &func.getBody().front())
          return emitError(v.getLoc())
                 << "the producer of a warp-specialised loop needs a value "
                    "carried by an enclosing loop: it can follow only the "
                    "enclosing loops' induction variables";
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (slice.contains(def))
        continue;
      bool scalar =
          llvm::none_of(def->getResultTypes(), llvm::IsaPred<RankedTensorType>);
      if (!isNestBlock(def->getBlock()) || def->getNumRegions() != 0 ||
          !scalar || !(isMemoryEffectFree(def) || isa<MakeTensorMapOp>(def)))
        return def->emitOpError()
               << "computes a value the producer of a warp-specialised loop "
                  "needs, but the producer only recomputes side-effect-free "
                  "scalar ops and tensor maps of the kernel body and its "
                  "enclosing loops";
      slice.insert(def);
      llvm::append_range(work, def->getOperands());
    }
    return slice;
  }

  /// Clones the ops of `slice` in `block`, in order, at `b`.
  void cloneLevel(OpBuilder &b, Block *block,
                  const llvm::SetVector<Operation *> &slice, IRMapping &map) {
    for (Operation &op : *block)
      if (slice.contains(&op))
        b.clone(op, map);
  }

  /// The producer at nest level `level` (0: the function body), the rings'
  /// iteration count `counter` on entry; returns it on exit.
  Value buildProducer(OpBuilder &b, size_t level, Value counter,
                      const llvm::SetVector<Operation *> &slice, IRMapping &map,
                      ArrayRef<std::pair<Value, Value>> rings, Value empty) {
    Location loc = loops.front().getLoc();
    cloneLevel(
        b, level == 0 ? &func.getBody().front() : outer[level - 1].getBody(),
        slice, map);
    if (level < outer.size()) {
      scf::ForOp o = outer[level];
      auto nest = scf::ForOp::create(
          b, o.getLoc(), map.lookupOrDefault(o.getLowerBound()),
          map.lookupOrDefault(o.getUpperBound()),
          map.lookupOrDefault(o.getStep()), ValueRange{counter});
      map.map(o.getInductionVar(), nest.getInductionVar());
      OpBuilder inside = OpBuilder::atBlockBegin(nest.getBody());
      Value next =
          buildProducer(inside, level + 1, nest.getRegionIterArgs().front(),
                        slice, map, rings, empty);
      scf::YieldOp::create(inside, loc, next);
      return nest.getResult(0);
    }
    for (auto [k, loop] : llvm::enumerate(loops)) {
      auto produce =
          scf::ForOp::create(b, loc, map.lookupOrDefault(loop.getLowerBound()),
                             map.lookupOrDefault(loop.getUpperBound()),
                             map.lookupOrDefault(loop.getStep()));
      produce->setAttr(SageDialect::kNumStagesAttrName,
                       loop->getAttr(SageDialect::kNumStagesAttrName));
      Value trips = getTripCountI32(produce);
      RingPosition made = getRingPosition(
          produce, stages, outer.empty() && k == 0 ? Value() : counter);
      OpBuilder pb = OpBuilder::atBlockTerminator(produce.getBody());
      Value freed =
          arith::XOrIOp::create(pb, loc, made.phase, constantI32(pb, loc, 1));
      MbarrierWaitOp::create(pb, loc, getRingSlot(pb, loc, empty, made.slot),
                             freed);
      map.map(loop.getInductionVar(), produce.getInductionVar());
      for (auto [copy, ring] : llvm::zip(copies[k], rings))
        issueCopy(pb, loc, copy, map, ring.first, ring.second, made.slot);
      counter = arith::AddIOp::create(b, loc, counter, trips);
    }
    return counter;
  }

  /// The copies of `loop` (errors name what keeps one from the producer).
  FailureOr<SmallVector<LoopCopy>> collectCopies(scf::ForOp loop) {
    SmallVector<LoopCopy> found;
    WalkResult walk = loop.getBody()->walk([&](Operation *op) {
      if (!isa<TmaLoadOp, BulkLoadOp>(op))
        return WalkResult::advance();
      std::optional<LoopCopy> copy = getLoopCopy(loop, op);
      if (!copy) {
        op->emitOpError(
            "cannot be issued by the producer of its warp-specialised loop: "
            "its buffer and mbarrier must be allocated in the loop body, its "
            "tensor map outside the loop and its coordinates computed from "
            "the induction variable without side effects");
        return WalkResult::interrupt();
      }
      found.push_back(std::move(*copy));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (found.empty())
      return loop.emitOpError("marked sage.warp_specialize has no TMA copies "
                              "for a producer to issue");
    // Every wgmma dot of an iteration must be complete by its end (or be the
    // accumulation kept in flight): the slot is then freed.
    for (DotOp dot : loop.getBody()->getOps<DotOp>()) {
      bool waited = !isWgmma(dot.getMmaKind());
      forEachWait(dot, [&](DotWaitOp wait) {
        waited |= wait->getBlock() == loop.getBody();
      });
      if (!waited)
        return dot.emitOpError("is still in flight at the end of its "
                               "warp-specialised iteration: the slot it "
                               "reads could not be freed");
    }
    return found;
  }

  /// The consumers' side of `loop` (`trips` iterations): reads from the
  /// rings at iteration `base` + its own and frees each slot once read;
  /// appends the maps its copies used to `maps`.
  void consume(scf::ForOp loop, ArrayRef<LoopCopy> loopCopies,
               ArrayRef<std::pair<Value, Value>> rings, Value empty, Value base,
               Value trips, SmallVectorImpl<Operation *> &maps) {
    Location loc = loop.getLoc();
    RingPosition at = getRingPosition(loop, stages, base);
    for (auto [read, ring] : llvm::zip(loopCopies, rings)) {
      LoopCopy copy = read;
      readFromRing(loc, copy, ring.first, ring.second, at);
      if (auto tma = dyn_cast<TmaLoadOp>(copy.copy))
        if (Operation *mapDef = tma.getMap().getDefiningOp())
          maps.push_back(mapDef);
      copy.copy->erase();
      copy.barrier->erase();
      copy.buffer->erase();
    }
    // Free each slot once read: the previous iteration's after the wait that
    // completes its dot when the accumulation stays in flight (and the last
    // one's after the loop), else this iteration's at its end.
    auto arrive = [&](OpBuilder &at, Value cond, Value iteration) {
      auto branch = scf::IfOp::create(at, loc, cond, /*withElse=*/false);
      OpBuilder inside = branch.getThenBodyBuilder();
      Value slot = arith::RemUIOp::create(inside, loc, iteration,
                                          constantI32(inside, loc, stages));
      MbarrierArriveOp::create(inside, loc,
                               getRingSlot(inside, loc, empty, slot));
    };
    if (DotWaitOp bound = keepAccumulationInFlight(loop)) {
      OpBuilder fb(bound->getBlock(), std::next(bound->getIterator()));
      Value previous = arith::AddIOp::create(fb, loc, at.iteration,
                                             constantI32(fb, loc, stages - 1));
      arrive(fb,
             arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::ne, at.local,
                                   constantI32(fb, loc, 0)),
             previous);
      // After the wait that completes the last dot (right after the loop).
      OpBuilder done(loop->getBlock(),
                     std::next(loop->getNextNode()->getIterator()));
      Value first = base ? base : constantI32(done, loc, 0);
      Value end = arith::AddIOp::create(done, loc, first, trips);
      arrive(done,
             arith::CmpIOp::create(done, loc, arith::CmpIPredicate::ne, trips,
                                   constantI32(done, loc, 0)),
             arith::AddIOp::create(done, loc, end,
                                   constantI32(done, loc, stages - 1)));
    } else {
      OpBuilder fb(loop.getBody()->getTerminator());
      MbarrierArriveOp::create(fb, loc, getRingSlot(fb, loc, empty, at.slot));
    }
    loop->removeAttr(SageDialect::kWarpSpecializeAttrName);
    if (loop->removeAttr(SageDialect::kPingPongAttrName))
      takeTurns(loop);
  }

  /// Ping-pong: each consumer warpgroup waits for its turn before the
  /// iteration's first wgmma dot and passes it on after issuing the last.
  void takeTurns(scf::ForOp loop) {
    Location loc = loop.getLoc();
    SmallVector<DotOp> dots;
    for (DotOp dot : loop.getBody()->getOps<DotOp>())
      if (isWgmma(dot.getMmaKind()))
        dots.push_back(dot);
    if (dots.empty())
      return;
    OpBuilder before(dots.front());
    WarpgroupTurnOp::create(before, loc, int32_t(groups), /*pass=*/false,
                            IntegerAttr());
    OpBuilder after(dots.back()->getBlock(),
                    std::next(dots.back()->getIterator()));
    WarpgroupTurnOp::create(after, loc, int32_t(groups), /*pass=*/true,
                            IntegerAttr());
  }

  LogicalResult run() {
    scf::ForOp first = loops.front();
    Location loc = first.getLoc();
    Block &entry = func.getBody().front();
    if (!func.getBody().hasOneBlock())
      return func.emitOpError("with a warp-specialised loop must have one "
                              "block");
    for (Operation *up = first->getParentOp(); up != func;
         up = up->getParentOp()) {
      auto o = dyn_cast<scf::ForOp>(up);
      if (!o)
        return first.emitOpError("marked sage.warp_specialize must be in the "
                                 "kernel body or in scf.for loops there, not "
                                 "in ")
               << up->getName();
      outer.insert(outer.begin(), o);
    }
    if (stages < 2)
      return first.emitOpError("marked sage.warp_specialize needs "
                               "sage.num_stages >= 2 (the slots the producer "
                               "fills ahead)");
    int64_t consumerThreads = WarpSpecializeOp::getConsumerThreadsOf(func);
    if (consumerThreads % WarpSpecializeOp::kProducerThreads != 0)
      return first.emitOpError()
             << "marked sage.warp_specialize needs whole consumer "
                "warpgroups: the kernel has "
             << consumerThreads / 32 << " warps";
    SmallVector<scf::ForOp> pingPong;
    for (scf::ForOp loop : loops)
      if (loop->hasAttr(SageDialect::kPingPongAttrName))
        pingPong.push_back(loop);
    groups = consumerThreads / WarpSpecializeOp::kProducerThreads;
    if (!pingPong.empty() && (groups < 2 || groups > 4))
      return pingPong.front().emitOpError()
             << "marked sage.ping_pong needs 2 to 4 consumer warpgroups to "
                "take turns, the kernel has "
             << groups;
    for (scf::ForOp loop : loops) {
      FailureOr<SmallVector<LoopCopy>> found = collectCopies(loop);
      if (failed(found))
        return failure();
      copies.push_back(std::move(*found));
    }
    // The later loops' copies go to the first loop's rings, one to one.
    for (auto [k, loop] : llvm::enumerate(loops)) {
      bool same = copies[k].size() == copies.front().size();
      for (size_t i = 0; same && i < copies[k].size(); ++i)
        same =
            copies[k][i].buffer.getType() == copies.front()[i].buffer.getType();
      if (!same)
        return loop.emitOpError(
            "is a warp-specialised loop whose copies differ from those of "
            "the first marked loop of its block: the loops share the rings, "
            "so they must copy the same tiles in the same order");
    }

    // What the producer needs from before the loops.
    SmallVector<Value> needs;
    for (scf::ForOp o : llvm::concat<scf::ForOp>(outer, loops))
      llvm::append_range(
          needs, ValueRange{o.getLowerBound(), o.getUpperBound(), o.getStep()});
    for (auto [loop, loopCopies] : llvm::zip(loops, copies))
      for (LoopCopy &copy : loopCopies) {
        for (Operation *op : copy.coordinates)
          for (Value operand : op->getOperands())
            if (loop.isDefinedOutsideOfLoop(operand))
              needs.push_back(operand);
        // A TMA copy's map, the outside inputs of either kind of copy.
        for (Value operand : copy.inputs())
          if (loop.isDefinedOutsideOfLoop(operand))
            needs.push_back(operand);
      }
    FailureOr<llvm::SetVector<Operation *>> slice = producerSlice(needs);
    if (failed(slice))
      return failure();

    // The rings and their mbarriers, set up before the roles split.
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    SmallVector<std::pair<Value, Value>> rings =
        createCopyRings(b, loc, copies.front(), stages);
    Value empty = createMbarrierRing(b, loc, stages, consumerThreads);

    auto ws = WarpSpecializeOp::create(
        b, loc, producerRegisters,
        consumerRegisters(producerRegisters, consumerThreads));
    Block *consumers = &ws.getConsumers().emplaceBlock();
    Block *producer = &ws.getProducer().emplaceBlock();
    for (Block *block : {consumers, producer}) {
      OpBuilder end = OpBuilder::atBlockEnd(block);
      WarpYieldOp::create(end, loc);
    }

    // The producer: the slice and the loop nest, each iteration of a
    // marked loop waiting for its slot to be free and issuing its copies.
    OpBuilder p = OpBuilder::atBlockBegin(producer);
    IRMapping map;
    buildProducer(p, 0, constantI32(p, loc, 0), *slice, map, rings, empty);

    // The consumers: the rest of the kernel. Enclosing loops carry the
    // rings' iteration count.
    while (ws->getNextNode() != entry.getTerminator())
      ws->getNextNode()->moveBefore(consumers->getTerminator());
    Value base;
    if (!outer.empty()) {
      IRRewriter rewriter(func.getContext());
      rewriter.setInsertionPoint(outer.front());
      base = constantI32(rewriter, loc, 0);
      for (scf::ForOp &o : outer) {
        NamedAttrList attrs(o->getDiscardableAttrDictionary());
        auto grown = o.replaceWithAdditionalYields(
            rewriter, base, /*replaceInitOperandUsesInLoop=*/false,
            [](OpBuilder &, Location, ArrayRef<BlockArgument> args) {
              return SmallVector<Value>{args.front()};
            });
        if (failed(grown))
          return o.emitOpError("could not carry the rings' iteration count");
        o = cast<scf::ForOp>(grown->getOperation());
        o->setDiscardableAttrs(attrs.getDictionary(func.getContext()));
        base = o.getRegionIterArgs().back();
      }
    }
    // The last warpgroup hands the first turn to warpgroup 0, which takes
    // the turn the last iteration passes it after the loops: every named
    // barrier's arrivals are matched.
    if (!pingPong.empty()) {
      auto only = [&](int64_t g) {
        return IntegerAttr::get(IntegerType::get(func.getContext(), 32), g);
      };
      OpBuilder first(pingPong.front());
      WarpgroupTurnOp::create(first, loc, int32_t(groups), /*pass=*/true,
                              only(groups - 1));
      OpBuilder last(pingPong.back()->getBlock(),
                     std::next(pingPong.back()->getIterator()));
      WarpgroupTurnOp::create(last, loc, int32_t(groups), /*pass=*/false,
                              only(0));
    }
    SmallVector<Operation *> maps;
    for (auto [k, loop] : llvm::enumerate(loops)) {
      Value trips = getTripCountI32(loop);
      consume(loop, copies[k], rings, empty, base, trips, maps);
      // The next loop (or the enclosing loop's next trip) goes on counting.
      if (k + 1 < loops.size() || !outer.empty()) {
        OpBuilder after(loop->getBlock(), std::next(loop->getIterator()));
        base = arith::AddIOp::create(
            after, loc, base ? base : constantI32(after, loc, 0), trips);
      }
    }
    // Only the producer's copies use these maps: the consumers do not
    // build them.
    for (Operation *mapDef : maps) {
      if (!mapDef->getBlock())
        continue;
      if (!mapDef->use_empty())
        return mapDef->emitOpError(
            "is used both by the copies of a warp-specialised loop and by "
            "the consumers: give the consumers' copies a map of their own");
      mapDef->erase();
    }

    // The enclosing loops carry the count on.
    if (!outer.empty()) {
      Value next = base;
      for (scf::ForOp &o : llvm::reverse(outer)) {
        auto yield = cast<scf::YieldOp>(o.getBody()->getTerminator());
        yield->setOperand(yield->getNumOperands() - 1, next);
        next = o.getResults().back();
      }
    }

    // After the loops every copy has landed and every mbarrier wait is done.
    OpBuilder after(consumers->getTerminator());
    SmallVector<Value> allBars{empty};
    for (auto [tiles, bars] : rings)
      allBars.push_back(bars);
    for (Value bars : allBars)
      for (int64_t k = 0; k < stages; ++k)
        MbarrierInvalOp::create(
            after, loc,
            getRingSlot(after, loc, bars, constantI32(after, loc, k)));
    return success();
  }
};

struct WarpSpecializePass
    : public sagegpu::impl::SageGPUWarpSpecializeBase<WarpSpecializePass> {
  using SageGPUWarpSpecializeBase::SageGPUWarpSpecializeBase;
  void runOnOperation() override {
    if (producerRegisters < 24 || producerRegisters > 256 ||
        producerRegisters % 8 != 0) {
      getOperation().emitError()
          << "producer-registers must be a multiple of 8 from 24 to 256, got "
          << static_cast<int>(producerRegisters);
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp func) {
      SmallVector<scf::ForOp> marked;
      func.walk([&](scf::ForOp loop) {
        if (loop->hasAttr(SageDialect::kWarpSpecializeAttrName))
          marked.push_back(loop);
      });
      if (marked.empty())
        return;
      if (SageDialect::getMaxnreg(func->getParentOfType<ModuleOp>())) {
        marked.front().emitOpError(
            "marked sage.warp_specialize in a kernel with a register cap "
            "(sage.maxnreg): the roles' registers are set by setmaxnreg, drop "
            "the launch's maxnreg");
        return signalPassFailure();
      }
      for (scf::ForOp loop : ArrayRef(marked).drop_front()) {
        if (loop->getBlock() != marked.front()->getBlock()) {
          loop.emitOpError("is a loop marked sage.warp_specialize outside "
                           "the block of the first marked loop: the marked "
                           "loops of a kernel share the producer, one after "
                           "the other in one block");
          return signalPassFailure();
        }
        if (loop->getAttr(SageDialect::kNumStagesAttrName) !=
            marked.front()->getAttr(SageDialect::kNumStagesAttrName)) {
          loop.emitOpError("has other sage.num_stages than the first loop "
                           "marked sage.warp_specialize: the loops share the "
                           "rings");
          return signalPassFailure();
        }
      }
      auto stages = marked.front()->getAttrOfType<IntegerAttr>(
          SageDialect::kNumStagesAttrName);
      Specializer specializer{func, marked, stages ? stages.getInt() : 1,
                              producerRegisters};
      if (failed(specializer.run()))
        signalPassFailure();
    });
  }
};

} // namespace
