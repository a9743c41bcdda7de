//===- InsertBarriers.cpp - order the threads' shared-memory accesses -----===//

#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Conversion/SageToLLVM/Passes.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <limits>

namespace mlir::sage {
#define GEN_PASS_DEF_SAGEGPUINSERTBARRIERS
#include "sage/Conversion/SageToLLVM/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;
using namespace mlir::sagegpu;

namespace {

/// One access to a byte range of shared memory.
struct Access {
  int64_t lo, hi; // [lo, hi)
  bool write;
  bool async;          // through the async proxy (wgmma reads)
  bool warp0 = false;  // made by warp 0 alone, in program order (mbarrier
                       // set-up by its copy leader, tensor-map assembly)
  Value slot;          // the index of the ring slot accessed, if one is
  bool atomic = false; // an mbarrier arrival or wait: they order each other
  /// Every thread writes these 32 bits to each word of the range, then reads
  /// it (a dot's splat accumulator): two such accesses with the same bits
  /// need no barrier between them.
  std::optional<uint32_t> splat;
  bool overlaps(const Access &o) const { return lo < o.hi && o.lo < hi; }
  /// Whether `later` must wait for this access at a barrier.
  bool hazard(const Access &later) const {
    return overlaps(later) && (write || later.write) &&
           !(warp0 && later.warp0) && !(atomic && later.atomic) &&
           !(splat && splat == later.splat);
  }
};

/// What an op does to shared memory. `visibleByMbarrier` accesses (TMA
/// writes) need no barrier before their readers, who wait on the mbarrier.
struct Effects {
  SmallVector<Access> accesses;
  SmallVector<Access> visibleByMbarrier;
};

/// The bytes `shared` names: its local_alloc's placement (a ring's slot:
/// the whole ring, its index recorded), or, where that is not known (a tile
/// passed in, or not yet allocated), all of shared memory.
Access rangeOf(Value shared, bool write, bool async = false,
               bool warp0 = false) {
  LocalAllocOp alloc = getAllocation(shared);
  if (!alloc || !alloc.getOffset())
    return {0, std::numeric_limits<int64_t>::max(), write, async, warp0};
  int64_t lo = *alloc.getOffset();
  Value slot;
  if (auto ring = shared.getDefiningOp<RingSlotOp>())
    slot = ring.getIndex();
  return {lo,    lo + alloc.getResult().getType().getSizeInBytes(),
          write, async,
          warp0, slot};
}

/// `index` as `(base + offset) mod size` (`arith.remui` by a constant of
/// `base` or of `base + constant`, as sagegpu-pipeline computes slots).
std::optional<std::tuple<Value, int64_t, int64_t>> slotOf(Value index) {
  auto rem = index.getDefiningOp<arith::RemUIOp>();
  IntegerAttr size;
  if (!rem || !matchPattern(rem.getRhs(), m_Constant(&size)) ||
      size.getInt() <= 0)
    return std::nullopt;
  Value base = rem.getLhs();
  int64_t offset = 0;
  IntegerAttr c;
  if (auto add = base.getDefiningOp<arith::AddIOp>();
      add && matchPattern(add.getRhs(), m_Constant(&c))) {
    base = add.getLhs();
    offset = c.getInt();
  }
  return std::make_tuple(base, offset % size.getInt(), size.getInt());
}

/// Whether `a` and `b` are provably different slots of one ring: slots
/// (base + i) mod S and (base + j) mod S with i != j (mod S).
bool differentSlots(const Access &a, const Access &b) {
  if (!a.slot || !b.slot || a.lo != b.lo || a.hi != b.hi)
    return false;
  auto sa = slotOf(a.slot), sb = slotOf(b.slot);
  return sa && sb && std::get<0>(*sa) == std::get<0>(*sb) &&
         std::get<2>(*sa) == std::get<2>(*sb) &&
         std::get<1>(*sa) != std::get<1>(*sb);
}

Effects effectsOf(Operation *op) {
  Effects e;
  if (auto alloc = dyn_cast<LocalAllocOp>(op)) {
    if (alloc.getInit())
      e.accesses.push_back(rangeOf(alloc, /*write=*/true));
  } else if (auto store = dyn_cast<LocalStoreOp>(op)) {
    e.accesses.push_back(rangeOf(store.getDest(), true));
  } else if (auto load = dyn_cast<LocalLoadOp>(op)) {
    e.accesses.push_back(rangeOf(load.getSource(), false));
  } else if (auto copy = dyn_cast<AsyncCopyOp>(op)) {
    e.accesses.push_back(rangeOf(copy.getDest(), true));
  } else if (auto store = dyn_cast<TmaStoreOp>(op)) {
    // The copy engine reads the tile (async proxy); the op waits for that
    // read, so a later write only needs the other threads ordered.
    e.accesses.push_back(rangeOf(store.getSource(), false, true));
  } else if (auto tma = dyn_cast<TmaLoadOp>(op)) {
    // The copy leader arms the mbarrier it initialised itself (mbarrier updates
    // are atomic): only the box's bytes count.
    e.visibleByMbarrier.push_back(rangeOf(tma.getDest(), true, true));
  } else if (auto bulk = dyn_cast<BulkLoadOp>(op)) {
    e.visibleByMbarrier.push_back(rangeOf(bulk.getDest(), true, true));
  } else if (isa<MbarrierInitOp, MbarrierInvalOp>(op)) {
    e.accesses.push_back(rangeOf(op->getOperand(0), true, false, true));
  } else if (isa<MbarrierWaitOp, MbarrierArriveOp>(op)) {
    Access a = rangeOf(op->getOperand(0), isa<MbarrierArriveOp>(op));
    a.atomic = true;
    e.accesses.push_back(a);
  } else if (auto dot = dyn_cast<DotOp>(op)) {
    bool async = isWgmma(dot.getMmaKind());
    if (isa<SharedTileType>(dot.getLhs().getType()))
      e.accesses.push_back(rangeOf(dot.getLhs(), false, async));
    e.accesses.push_back(rangeOf(dot.getRhs(), false, async));
    if (std::optional<uint32_t> bits = getSplatAccumulatorBits(dot)) {
      int64_t lo = getScratchOffset(op);
      Access splat{lo, lo + getOpScratchBytes(op), true, false};
      splat.splat = bits;
      e.accesses.push_back(splat);
    }
  } else if (auto wait = dyn_cast<DotWaitOp>(op)) {
    // A wgmma reads its operands until the wait that completes it: its
    // reads happen here as well, so a later write is ordered after this
    // wait in every warpgroup, not just after the dot.
    for (Value input : wait.getInputs())
      if (DotOp dot = getWaitedDot(input))
        llvm::append_range(e.accesses, effectsOf(dot).accesses);
  } else if (int64_t bytes = getOpScratchBytes(op)) {
    int64_t lo = getScratchOffset(op);
    e.accesses.push_back(
        {lo, lo + bytes, true, false, isa<MakeTensorMapOp>(op)});
  }
  return e;
}

/// The accesses since the last barrier.
using Pending = SmallVector<Access>;

/// Groups of accesses in flight, oldest first.
using Groups = SmallVector<Pending>;

/// Both control-flow paths' groups, aligned by age.
void mergeGroups(Groups &groups, const Groups &other) {
  size_t n = std::max(groups.size(), other.size());
  Groups merged(n);
  for (const Groups *side : {static_cast<const Groups *>(&groups), &other})
    for (auto [i, g] : llvm::enumerate(*side))
      merged[n - side->size() + i].append(g.begin(), g.end());
  groups = std::move(merged);
}

/// What a barrier may have to order: the accesses made since the last one,
/// and the cp.async copies still in flight, which write when a wait
/// completes their group, not when they are issued (`groups`, oldest first;
/// `open`, the group being filled). `dots` are the shared reads of the
/// wgmma groups still in flight (one per dot, oldest first), which no
/// thread may write before a sagegpu.dot_wait completes them: a barrier
/// does not wait for the tensor cores.
struct State {
  Pending pending;
  Groups groups;
  Pending open;
  Groups dots;

  /// Both control-flow paths' accesses.
  void merge(const State &o) {
    pending.append(o.pending.begin(), o.pending.end());
    open.append(o.open.begin(), o.open.end());
    mergeGroups(groups, o.groups);
    mergeGroups(dots, o.dots);
  }
};

struct Inserter {
  /// Bytes some wgmma reads through the async proxy: a barrier after
  /// generic writes to them also fences, so that whichever barrier orders
  /// the writes before the read makes them visible to that proxy.
  SmallVector<Access> asyncReads;
  /// Set when a write overlaps an in-flight wgmma's operands.
  bool failed = false;

  bool needsFence(const Pending &pending) const {
    for (const Access &p : pending)
      if (p.write && !p.async)
        for (const Access &r : asyncReads)
          if (p.overlaps(r))
            return true;
    return false;
  }

  void barrierBefore(Operation *op, State &state, bool fence, bool insert) {
    if (insert) {
      OpBuilder b(op);
      auto barrier = BarrierOp::create(b, op->getLoc());
      if (fence || needsFence(state.pending))
        barrier.setFenceAsync(true);
    }
    state.pending.clear();
  }

  /// Walks `block` from `state`, inserting barriers when `insert`; returns
  /// the state at its end.
  State run(Block &block, State state, bool insert) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (isa<BarrierOp>(op)) {
        state.pending.clear();
        continue;
      }
      if (isa<AsyncCommitGroupOp>(op)) {
        state.groups.push_back(std::move(state.open));
        state.open.clear();
        continue;
      }
      if (auto wait = dyn_cast<AsyncWaitOp>(op)) {
        // The older groups have landed: their writes are now the waiting
        // thread's, to be ordered before other threads read them.
        while (state.groups.size() > wait.getPending()) {
          Pending &done = state.groups.front();
          state.pending.append(done.begin(), done.end());
          state.groups.erase(state.groups.begin());
        }
        continue;
      }
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        // What came before the loop and clashes with its body is ordered
        // once, before the loop, not on every trip.
        bool clash = false;
        loop.getBody()->walk([&](Operation *inner) {
          Effects e = effectsOf(inner);
          for (ArrayRef<Access> list : {ArrayRef<Access>(e.accesses),
                                        ArrayRef<Access>(e.visibleByMbarrier)})
            for (const Access &a : list)
              for (const Access &p : state.pending)
                clash |= p.hazard(a);
        });
        if (clash)
          barrierBefore(loop, state, /*fence=*/false, insert);
        // The body's end meets its start on the next trip.
        State end = run(*loop.getBody(), state, /*insert=*/false);
        State entry = state;
        entry.merge(end);
        State after = run(*loop.getBody(), entry, insert);
        after.merge(state); // zero trips
        state = std::move(after);
        continue;
      }
      if (auto ws = dyn_cast<WarpSpecializeOp>(op)) {
        // The roles meet once, before they split: what came before (the
        // mbarriers' set-up) is ordered for every warp. Each region's
        // barriers then order its own warps; the roles order each other's
        // accesses through mbarriers only. Nothing follows the op.
        if (!state.pending.empty())
          barrierBefore(ws, state, /*fence=*/false, insert);
        for (Region *region : {&ws.getProducer(), &ws.getConsumers()})
          run(region->front(), State(), insert);
        state = State();
        continue;
      }
      if (auto branch = dyn_cast<scf::IfOp>(op)) {
        State out = run(branch.getThenRegion().front(), state, insert);
        if (!branch.getElseRegion().empty())
          out.merge(run(branch.getElseRegion().front(), state, insert));
        else
          out.merge(state);
        state = std::move(out);
        continue;
      }
      if (auto wait = dyn_cast<DotWaitOp>(op)) {
        // The older wgmma groups are complete: their operands may be
        // written again (after a barrier, for the other warpgroups).
        while (state.dots.size() > wait.getPendings())
          state.dots.erase(state.dots.begin());
      }
      Effects e = effectsOf(&op);
      bool conflict = false, fence = false;
      auto check = [&](const Access &a) {
        for (const Access &p : state.pending)
          if (p.hazard(a)) {
            conflict = true;
            fence |= a.async && p.write && !p.async;
          }
        if (!a.write || !insert)
          return;
        for (const Pending &dot : state.dots)
          for (const Access &r : dot)
            if (r.overlaps(a) && !differentSlots(r, a)) {
              op.emitOpError("writes shared memory that an in-flight wgmma "
                             "reads: a sagegpu.dot_wait must complete the "
                             "dot first");
              failed = true;
              return;
            }
      };
      for (const Access &a : e.accesses)
        check(a);
      for (const Access &a : e.visibleByMbarrier)
        check(a);
      if (conflict)
        barrierBefore(&op, state, fence, insert);
      if (isa<AsyncCopyOp>(op))
        state.open.append(e.accesses.begin(), e.accesses.end());
      else
        state.pending.append(e.accesses.begin(), e.accesses.end());
      if (auto dot = dyn_cast<DotOp>(op); dot && isWgmma(dot.getMmaKind()))
        state.dots.push_back(e.accesses);
    }
    return state;
  }
};

struct InsertBarriersPass
    : public sage::impl::SageGPUInsertBarriersBase<InsertBarriersPass> {
  void runOnOperation() override {
    getOperation().walk([&](FunctionOpInterface func) {
      Inserter inserter;
      func.walk([&](Operation *op) {
        for (const Access &a : effectsOf(op).accesses)
          if (a.async)
            inserter.asyncReads.push_back(a);
      });
      for (Block &block : func.getFunctionBody())
        inserter.run(block, State(), /*insert=*/true);
      if (inserter.failed || failed(checkTurns(func)))
        signalPassFailure();
    });
  }

  /// A barrier of all consumer warps between a warpgroup's wait for its
  /// ping-pong turn and its pass would deadlock: the warpgroup holding the
  /// turn waits there for one that waits for the turn.
  static LogicalResult checkTurns(FunctionOpInterface func) {
    WalkResult walk = func.walk([](WarpgroupTurnOp turn) {
      if (turn.getPass() || turn.getOnly())
        return WalkResult::advance();
      for (Operation *op = turn->getNextNode(); op; op = op->getNextNode()) {
        auto next = dyn_cast<WarpgroupTurnOp>(op);
        if (next && next.getPass())
          break;
        Operation *barrier = nullptr;
        op->walk([&](BarrierOp b) { barrier = b; });
        if (barrier) {
          barrier->emitOpError()
              << "orders all consumer warps inside a ping-pong turn, which "
                 "would deadlock (the warpgroup holding the turn would wait "
                 "for one waiting for its turn): the shared-memory accesses "
                 "that need it must come before the turn's first matmul or "
                 "after its last";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }
};

} // namespace
