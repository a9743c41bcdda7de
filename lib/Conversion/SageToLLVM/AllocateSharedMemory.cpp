//===- AllocateSharedMemory.cpp - place shared tiles by liveness ----------===//

#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Conversion/SageToLLVM/Passes.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Layout/SharedLayouts.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::sage {
#define GEN_PASS_DEF_SAGEGPUALLOCATESHAREDMEMORY
#include "sage/Conversion/SageToLLVM/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Buffers start at multiples of this (TMA boxes and tensor-map staging
/// need 128 bytes). A tile with an S-byte swizzle starts at a multiple of
/// its 8-row atom, 8 * S bytes: the swizzle XORs absolute address bits
/// [7, 7 + log2(S / 16)) into the chunk bits.
constexpr int64_t kAlignment = 128;

/// One thing to place: a local_alloc or an op's scratch.
struct Buffer {
  Operation *op;
  int64_t bytes, alignment;
  int64_t first, last; // program positions, inclusive
  int64_t offset = -1;
};

int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

struct AllocateSharedMemoryPass
    : public sage::impl::SageGPUAllocateSharedMemoryBase<
          AllocateSharedMemoryPass> {
  using SageGPUAllocateSharedMemoryBase::SageGPUAllocateSharedMemoryBase;
  void runOnOperation() override {
    getOperation().walk([&](FunctionOpInterface func) { allocate(func); });
  }

  void allocate(FunctionOpInterface func) {
    // Program positions: an op's `first` when it starts, `last` after its
    // regions, so a region op spans everything nested in it.
    DenseMap<Operation *, std::pair<int64_t, int64_t>> span;
    int64_t clock = 0;
    std::function<void(Operation *)> number = [&](Operation *op) {
      int64_t first = clock++;
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (Operation &inner : block)
            number(&inner);
      span[op] = {first, clock++};
    };
    for (Block &block : func.getFunctionBody())
      for (Operation &op : block)
        number(&op);

    // The producer of a warp_specialize runs beside the consumers: what it
    // uses is live for the whole op.
    auto lastOf = [&](Operation *op, int64_t last) {
      if (sagegpu::getWarpRole(op) == sagegpu::WarpRole::Producer)
        last = std::max(
            last,
            span[op->getParentOfType<sagegpu::WarpSpecializeOp>()].second);
      return last;
    };

    SmallVector<Buffer> buffers;
    func.walk([&](Operation *op) {
      if (auto alloc = dyn_cast<sagegpu::LocalAllocOp>(op)) {
        sagegpu::SharedTileType type = alloc.getResult().getType();
        int64_t alignment = kAlignment;
        if (auto shared = dyn_cast_or_null<sagegpu::SharedEncodingAttr>(
                type.getEncoding()))
          alignment = std::max<int64_t>(
              alignment, layout::kAtomRows * int64_t(shared.getSwizzle()));
        int64_t last = span[op].second;
        // A use nested deeper keeps the buffer live across the whole op
        // that holds it in the alloc's block (a loop reuses it each trip);
        // a ring's slots are uses of the ring.
        // A wgmma dot reads its operands until the dot_wait that completes
        // it, which is a use too.
        auto keepLive = [&](Operation *user) {
          if (Operation *at = alloc->getBlock()->findAncestorOpInBlock(*user))
            last = std::max(last, lastOf(user, span[at].second));
        };
        sagegpu::forEachSharedUser(alloc, [&](Operation *user) {
          keepLive(user);
          if (auto dot = dyn_cast<sagegpu::DotOp>(user))
            sagegpu::forEachWait(
                dot, [&](sagegpu::DotWaitOp wait) { keepLive(wait); });
        });
        buffers.push_back(
            {op, type.getSizeInBytes(), alignment, span[op].first, last});
      } else if (int64_t bytes = getOpScratchBytes(op)) {
        // A splat accumulator's bytes are stored once, at the kernel's
        // entry (WgmmaToNVVM): they are live throughout.
        auto dot = dyn_cast<sagegpu::DotOp>(op);
        if (dot && getSplatAccumulatorBits(dot))
          buffers.push_back({op, bytes, kAlignment, 0, clock});
        else
          buffers.push_back({op, bytes, kAlignment, span[op].first,
                             lastOf(op, span[op].second)});
      }
    });

    // Disjoint bytes for everything when they fit the budget: reusing
    // bytes only adds barriers (every reuse is a write after another
    // thread's read). Above it, buffers share by liveness.
    int64_t disjoint = 0;
    for (const Buffer &buf : buffers)
      disjoint = alignUp(disjoint, buf.alignment) + buf.bytes;
    bool reuse = disjoint > reuseAbove;

    // Largest first; each takes the lowest offset clear of the placed
    // buffers it is live with.
    llvm::stable_sort(buffers, [](const Buffer &a, const Buffer &b) {
      return a.bytes > b.bytes;
    });
    int64_t total = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      Buffer &buf = buffers[i];
      SmallVector<std::pair<int64_t, int64_t>> taken;
      for (size_t j = 0; j < i; ++j)
        if (!reuse ||
            (buffers[j].first <= buf.last && buf.first <= buffers[j].last))
          taken.push_back(
              {buffers[j].offset, buffers[j].offset + buffers[j].bytes});
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [lo, hi] : taken) {
        if (offset + buf.bytes <= lo)
          break;
        offset = std::max(offset, alignUp(hi, buf.alignment));
      }
      buf.offset = offset;
      total = std::max(total, offset + buf.bytes);
    }

    Builder b(func.getContext());
    for (const Buffer &buf : buffers) {
      if (auto alloc = dyn_cast<sagegpu::LocalAllocOp>(buf.op))
        alloc.setOffset(buf.offset);
      else
        buf.op->setAttr(kScratchOffsetAttrName,
                        b.getI64IntegerAttr(buf.offset));
    }
    if (total > 0)
      func->setAttr(SageDialect::kSharedMemoryAttrName,
                    b.getI64IntegerAttr(alignUp(total, kAlignment)));
  }
};

} // namespace
