//===- PromoteOperands.cpp - matmul operands into shared memory -----------===//
//
// Turns each sage matmul into what the tensor cores execute: its operands
// become shared-memory tiles (filled by cp.async or TMA straight from global
// memory where the load allows, else stored from registers), wgmma's
// register A becomes a #sagegpu.dot_op tile, the product is a sagegpu.dot
// into a zero accumulator, and the scales and the accumulator operand are
// applied by ordinary tile ops on the #sagegpu.mma result. A wgmma dot is
// waited for (sagegpu.dot_wait) and its epilogue applied where the matmul's
// result is first used, so the ops in between run while it is in flight
// (right after the dot when the matmul accumulates onto an operand); the
// wait leaves the dots issued after it in flight. Scales copied to shared
// memory are read in the epilogue, but their copy is waited for before the
// dot's wait, where that wait's latency overlaps the dot.
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/IR/Divisibility.h"
#include "sage/Dialect/Sage/IR/LeadingDims.h"
#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"
#include "sage/Layout/LayoutConversion.h"
#include "sage/Layout/SharedLayouts.h"

#include "mlir/Analysis/DataFlow/IntegerRangeAnalysis.h"
#include "mlir/Analysis/DataFlow/Utils.h"
#include "mlir/Analysis/DataFlowFramework.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::sagegpu {
#define GEN_PASS_DEF_SAGEGPUPROMOTEOPERANDS
#include "sage/Dialect/SageGPU/Transforms/Passes.h.inc"
} // namespace mlir::sagegpu

using namespace mlir;
using namespace mlir::sage;
using namespace mlir::sagegpu;

namespace {

std::optional<MmaKind> mmaOf(Operation *matmul) {
  if (auto q = dyn_cast<QMatmulOp>(matmul))
    return q.getMma();
  return cast<MatmulOp>(matmul).getMma();
}

/// cp.async moves 16 bytes at a time, aligned on both sides.
constexpr int64_t kCopyBytes = 16;
/// The shortest vector of matmul scales copied to shared memory
/// (Promoter::copiedScale).
constexpr int64_t kMinCopiedScales = 128;
/// The contracted dimension of the matmul operand `use`, if it is one.
std::optional<unsigned> contractedDimOf(OpOperand &use) {
  Operation *owner = use.getOwner();
  if (auto q = dyn_cast<QMatmulOp>(owner)) {
    if (use.get() == q.getLhs() && use.getOperandNumber() == 0)
      return q.getLhsContractDim();
    if (use.get() == q.getRhs() && use.getOperandNumber() == 2)
      return q.getRhsContractDim();
  }
  if (auto m = dyn_cast<MatmulOp>(owner)) {
    if (use.getOperandNumber() == 0)
      return m.getLhsContractDim();
    if (use.getOperandNumber() == 1)
      return m.getRhsContractDim();
  }
  return std::nullopt;
}

/// `op`, or the op that holds it in `block` (null if none does).
Operation *ancestorIn(Block *block, Operation *op) {
  return block->findAncestorOpInBlock(*op);
}

/// Whether `a` runs before `b`, both nested in `home` (by the ops that hold
/// them there, or, held by one op, in their block when they share one).
bool runsBefore(Operation *a, Operation *b, Block *home) {
  Operation *x = ancestorIn(home, a), *y = ancestorIn(home, b);
  if (x != y)
    return x->isBeforeInBlock(y);
  return a->getBlock() == b->getBlock() && a->isBeforeInBlock(b);
}

/// The copy is issued where the load is and waited for before the matmul
/// (or, for a matmul in a loop nested in the load's block, before that
/// loop: a loop-invariant operand is copied once), with no global store in
/// between: cp.async and TMA read global memory asynchronously, possibly
/// after it.
bool copyCanMoveToUser(LoadOp load, Operation *user) {
  Operation *at = ancestorIn(load->getBlock(), user);
  if (!at || !load->isBeforeInBlock(at))
    return false;
  for (Operation *op = load->getNextNode(); op && op != at;
       op = op->getNextNode()) {
    bool writes = false;
    op->walk([&](StoreOp) { writes = true; });
    if (writes)
      return false;
  }
  return true;
}

/// The matmul `load` feeds and which of its dimensions is contracted, when
/// the tile can be copied straight to shared memory 16 bytes at a time.
/// Whether the rows of a view at `ptr`, `rowStride` elements of
/// `elemBytes` apart, start at 16-byte boundaries (the base and the row
/// pitch are proven multiples): what the asynchronous copies need.
bool hasAlignedRows(Value ptr, Value rowStride, int64_t elemBytes) {
  return knownAlignment(ptr) >= kCopyBytes &&
         knownDivisor(rowStride) * elemBytes >= kCopyBytes;
}

/// The number of leading dimensions of a sage.load or sage.store view.
int64_t leadingDimsOf(ValueRange offsets) {
  return static_cast<int64_t>(offsets.size()) - 2;
}

/// Whether every leading dimension of a view of `elemBytes` elements with
/// `strides` steps a proven multiple of 16 bytes: the tile of each index
/// then starts as aligned as the view's base.
bool hasAlignedLeadingDims(ValueRange strides, int64_t elemBytes) {
  return llvm::all_of(strides.drop_back(2), [&](Value stride) {
    return knownDivisor(stride) * elemBytes >= kCopyBytes;
  });
}

struct CopyUse {
  Operation *matmul;
  unsigned operand; // 0 for A
  unsigned contract;
  /// The tile's unit-stride dimension: `contract` (K-major), or the other
  /// one for a 16-bit B that only wgmma may read, MN-major, through TMA.
  unsigned inner;
  bool mnMajor() const { return inner != contract; }
};

/// With `mnMajor`, a 16-bit B whose unit stride is along N qualifies too
/// (then only a TMA copy for wgmma may take it: see canCopyWithTma).
std::optional<CopyUse> asyncCopyUse(LoadOp load, bool mnMajor) {
  // A copy moves rows as they are in memory, not in sigma16 order.
  if (load->use_empty() || load.getSigma16Rows())
    return std::nullopt;
  // Several uses (one operand feeding matmuls in loops one after the
  // other) share one copy when each reads it as the same operand of the
  // same kind of matmul, contracted the same way: any of them stands for
  // the others.
  OpOperand &use = *load->use_begin();
  std::optional<unsigned> contract = contractedDimOf(use);
  if (!contract)
    return std::nullopt;
  for (OpOperand &other : load->getUses())
    if (contractedDimOf(other) != contract ||
        other.getOperandNumber() != use.getOperandNumber() ||
        mmaOf(other.getOwner()) != mmaOf(use.getOwner()) ||
        !copyCanMoveToUser(load, other.getOwner()))
      return std::nullopt;
  RankedTensorType tile = load.getResult().getType();
  int64_t elemBytes = tile.getElementTypeBitWidth() / 8;
  int64_t leading = leadingDimsOf(load.getOffsets());
  auto unitStride = [&](unsigned dim) {
    APInt stride;
    return matchPattern(load.getStrides()[leading + dim],
                        m_ConstantInt(&stride)) &&
           stride == 1;
  };
  unsigned inner = *contract;
  if (!unitStride(inner)) {
    if (!mnMajor || use.getOperandNumber() != 1 || elemBytes != 2)
      return std::nullopt;
    inner = 1 - *contract;
  }
  unsigned other = 1 - inner;
  bool ok = unitStride(inner) &&
            tile.getDimSize(inner) * elemBytes % kCopyBytes == 0 &&
            hasAlignedRows(load.getPtr(), load.getStrides()[leading + other],
                           elemBytes) &&
            hasAlignedLeadingDims(load.getStrides(), elemBytes) &&
            knownDivisor(load.getOffsets()[leading + inner]) * elemBytes >=
                kCopyBytes;
  if (!ok)
    return std::nullopt;
  return CopyUse{use.getOwner(), use.getOperandNumber(), *contract, inner};
}

/// TMA copies the operands wgmma reads through descriptors (the others keep
/// cp.async; that choice has not been measured) into a swizzled tile whose
/// box the copy engine accepts; an MN-major B only for wgmma (its
/// transposed form), which mma.sync has not.
bool canCopyWithTma(const CopyUse &use, SharedTileType type) {
  std::optional<MmaKind> kind = mmaOf(use.matmul);
  if (!kind || !readsFromDescriptor(*kind, /*lhs=*/use.operand == 0) ||
      (use.mnMajor() && !isWgmma(*kind)))
    return false;
  auto encoding = cast<SharedEncodingAttr>(type.getEncoding());
  return MakeTensorMapOp::isValidBox(
      type.getShape(), use.inner, type.getElementType(), encoding.getSwizzle());
}

/// How deep `block` is nested in its function.
unsigned depthOf(Block *block) {
  unsigned depth = 0;
  for (Operation *op = block->getParentOp();
       op && !isa<FunctionOpInterface>(op);
       op = op->getBlock() ? op->getBlock()->getParentOp() : nullptr)
    ++depth;
  return depth;
}

/// Sets `b` right after the last definition among `values`, all of which
/// dominate one use: the innermost of their blocks, after the latest of
/// their ops there. A tensor map built there is built once per value of the
/// view, not once per loop iteration.
void setInsertionAfterAll(OpBuilder &b, ValueRange values) {
  Block *block = nullptr;
  Operation *after = nullptr;
  unsigned depth = 0;
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    Block *home = def ? def->getBlock() : cast<BlockArgument>(v).getOwner();
    unsigned d = depthOf(home);
    if (!block || d > depth) {
      block = home, after = def, depth = d;
    } else if (home == block && def &&
               (!after || after->isBeforeInBlock(def))) {
      after = def;
    }
  }
  if (after)
    b.setInsertionPointAfter(after);
  else
    b.setInsertionPointToStart(block);
}

/// A matmul-scale vector copied to shared memory: its tile and what
/// completes the copy, the mbarrier of a bulk copy or the commit group of a
/// cp.async one (Promoter::copiedScale).
struct ScaleCopy {
  Value buffer;
  Value barrier;
  Operation *commit = nullptr;
};

/// `v` without the integer casts the language puts between i32 indices and
/// i64 view operands.
Value withoutCasts(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<arith::ExtSIOp, arith::ExtUIOp, arith::IndexCastOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// Whether `bound` is `offset` + `length`: a view that ends with its tile
/// (the SageBwd forward's `end=`), so no element of the tile lies past it.
bool endsWithTile(Value offset, Value bound, int64_t length) {
  auto add = withoutCasts(bound).getDefiningOp<arith::AddIOp>();
  if (!add)
    return false;
  Value base = withoutCasts(offset);
  APInt c;
  for (auto [x, y] : {std::pair(add.getLhs(), add.getRhs()),
                      std::pair(add.getRhs(), add.getLhs())})
    if (withoutCasts(x) == base && matchPattern(y, m_ConstantInt(&c)) &&
        c == length)
      return true;
  return false;
}

/// Where the copy of a load goes and how.
struct Promoter {
  FunctionOpInterface func;
  bool cpAsync = false, tma = false, kernel = false;
  /// Integer ranges of the function's values, solved at the first question
  /// (only a bulk copy asks: most functions never pay for the analysis);
  /// null when the analysis failed: nothing is then known.
  std::unique_ptr<DataFlowSolver> ranges;
  bool rangesSolved = false;

  /// Whether `v` is known to be >= 0 (an offset that starts inside a view).
  /// Values made after the first question are not known.
  bool isNonNegative(Value v) {
    if (!rangesSolved) {
      rangesSolved = true;
      // Loop induction variables from their bounds, index math through arith.
      ranges = std::make_unique<DataFlowSolver>();
      dataflow::loadBaselineAnalyses(*ranges);
      ranges->load<dataflow::IntegerRangeAnalysis>();
      if (failed(ranges->initializeAndRun(func)))
        ranges.reset();
    }
    if (!ranges)
      return false;
    auto *range = ranges->lookupState<dataflow::IntegerValueRangeLattice>(v);
    return range && !range->getValue().isUninitialized() &&
           range->getValue().getValue().smin().isNonNegative();
  }

  /// A fresh mbarrier expecting one arrival (a copy's), at `b`.
  static Value newMbarrier(OpBuilder &b, Location loc) {
    auto type = SharedTileType::get(b.getContext(), {1}, b.getI64Type(), {});
    Value bar = LocalAllocOp::create(b, loc, type, Value(), IntegerAttr());
    MbarrierInitOp::create(b, loc, bar, 1);
    return bar;
  }

  /// Waits, at `b`, for the one phase of a fresh mbarrier (newMbarrier).
  static void waitFirstPhase(OpBuilder &b, Location loc, Value bar) {
    Value phase = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    MbarrierWaitOp::create(b, loc, bar, phase);
  }
  Value mapScratch; // the function's trailing tensor-map argument
  /// Each wait and a commit group it must complete.
  SmallVector<std::pair<AsyncWaitOp, Operation *>> waits;
  /// Register tiles already stored to shared memory, by tile and layout.
  DenseMap<std::pair<Value, Type>, Value> storedTiles;
  /// Loads replaced by copies, erased once their last matmul is gone.
  SmallVector<Operation *> replacedLoads;
  /// The shared tile each load copied by TMA went to.
  DenseMap<Operation *, Value> copiedLoads;
  /// The copy of each matmul-scale load (copiedScale).
  DenseMap<Operation *, ScaleCopy> copiedScales;
  /// Each wgmma wait and the dot it completes.
  SmallVector<std::pair<DotWaitOp, DotOp>> dotWaits;

  /// The tensor map of `load`'s view in the next slot of the function's
  /// global scratch (appending the scratch argument on first use), built
  /// right after the view's last value is defined.
  Value buildTensorMap(LoadOp load, unsigned inner, unsigned swizzle) {
    return buildTensorMap(
        load, load.getPtr(), load.getStrides(), load.getBounds(),
        load.getResult().getType().getShape(), inner, swizzle);
  }

  /// The tensor map of the view (`ptr`, `strides`, `bounds`) with a `box`
  /// box, for an op at `at` (as above).
  Value buildTensorMap(Operation *at, Value ptr, ValueRange strides,
                       ValueRange bounds, ArrayRef<int64_t> box, unsigned inner,
                       unsigned swizzle, bool typed = false) {
    OpBuilder b(at);
    if (!mapScratch) {
      MLIRContext *ctx = at->getContext();
      unsigned index = func.getNumArguments();
      (void)func.insertArgument(index,
                                PtrType::get(ctx, IntegerType::get(ctx, 8)),
                                DictionaryAttr::get(ctx), func.getLoc());
      mapScratch = func.getArgument(index);
    }
    auto bytes =
        func->getAttrOfType<IntegerAttr>(SageDialect::kGlobalScratchAttrName);
    int64_t slot = bytes ? bytes.getInt() / MakeTensorMapOp::kBytes : 0;
    func->setAttr(SageDialect::kGlobalScratchAttrName,
                  b.getI64IntegerAttr((slot + 1) * MakeTensorMapOp::kBytes));
    SmallVector<Value> view{ptr, mapScratch};
    llvm::append_range(view, strides);
    llvm::append_range(view, bounds);
    setInsertionAfterAll(b, view);
    return MakeTensorMapOp::create(
        b, at->getLoc(), TensorMapType::get(at->getContext()), ptr, strides,
        bounds, mapScratch, box, inner, swizzle, slot, typed);
  }

  /// A `sage.store ... tma` whose view the copy engine can write (a kernel
  /// on a TMA target, a unit-stride inner dimension, 16-byte aligned base
  /// and rows, a box of whole swizzle widths) becomes a store of the tile
  /// into a swizzled shared tile and a `sagegpu.tma_store` of it; any other
  /// loses the hint and stays a plain store.
  void storeWithTma(StoreOp store) {
    store.setTma(false);
    RankedTensorType tile = store.getValue().getType();
    int64_t elemBytes = tile.getElementTypeBitWidth() / 8;
    int64_t leading = leadingDimsOf(store.getOffsets());
    APInt unit;
    if (!tma || !kernel || elemBytes == 0 ||
        !matchPattern(store.getStrides()[leading + 1], m_ConstantInt(&unit)) ||
        unit != 1 ||
        !hasAlignedRows(store.getPtr(), store.getStrides()[leading],
                        elemBytes) ||
        !hasAlignedLeadingDims(store.getStrides(), elemBytes))
      return;
    unsigned swizzle = layout::widestSwizzle(tile.getDimSize(1) * elemBytes,
                                             tile.getDimSize(0));
    if (swizzle == 0 ||
        !MakeTensorMapOp::isValidBox(tile.getShape(), /*inner=*/1,
                                     tile.getElementType(), swizzle))
      return;
    MLIRContext *ctx = store.getContext();
    auto type = SharedTileType::get(
        ctx, tile.getShape(), tile.getElementType(),
        SharedEncodingAttr::get(ctx, swizzle, tile.getElementTypeBitWidth(),
                                /*inner=*/1));
    Value map = buildTensorMap(store, store.getPtr(), store.getStrides(),
                               store.getBounds(), tile.getShape(),
                               /*inner=*/1, swizzle,
                               /*typed=*/store.getAtomicAdd());
    OpBuilder b(store);
    Location loc = store.getLoc();
    Value staged =
        LocalAllocOp::create(b, loc, type, store.getValue(), IntegerAttr());
    TmaStoreOp::create(b, loc, map, store.getOffsets().drop_back(2),
                       store.getOffsets()[leading],
                       store.getOffsets()[leading + 1], staged,
                       store.getAtomicAdd());
    store.erase();
  }

  /// `load`'s tile copied by TMA into a new `type` shared tile, issued
  /// where the load is. Waited for before its first user, or before the
  /// loop that holds it (a loop-invariant tile: once, not every iteration);
  /// its bytes are free again once every thread has waited, after the last
  /// user (or its loop), where the barrier that orders the reads does. The
  /// load goes once its users are promoted.
  Value copyWithTma(LoadOp load, SharedTileType type) {
    Location loc = load.getLoc();
    unsigned inner = cast<SharedEncodingAttr>(type.getEncoding()).getInner();
    unsigned swizzle =
        cast<SharedEncodingAttr>(type.getEncoding()).getSwizzle();
    Value map = buildTensorMap(load, inner, swizzle);
    OpBuilder b(load);
    Value buffer = LocalAllocOp::create(b, loc, type, Value(), IntegerAttr());
    Value bar = newMbarrier(b, loc);
    ValueRange offsets = load.getOffsets();
    int64_t leading = leadingDimsOf(offsets);
    TmaLoadOp::create(b, loc, map, offsets.drop_back(2),
                      offsets[leading + 1 - inner], offsets[leading + inner],
                      bar, buffer);
    Block *home = load->getBlock();
    Operation *first = nullptr, *last = nullptr;
    for (Operation *user : load->getUsers()) {
      if (!first || runsBefore(user, first, home))
        first = user;
      if (!last || runsBefore(last, user, home))
        last = user;
    }
    b.setInsertionPoint(ancestorIn(home, first));
    waitFirstPhase(b, loc, bar);
    b.setInsertionPointAfter(ancestorIn(home, last));
    MbarrierInvalOp::create(b, loc, bar);
    replacedLoads.push_back(load);
    copiedLoads[load] = buffer;
    return buffer;
  }

  /// The shared tile that a copy fills with the scales `scale` of a matmul,
  /// as a `shape` row or column of f32 (one per result column or row), when
  /// `scale` is a load that every user reads as a matmul scale and its view
  /// (transposed when the load reads the vector the other way round) allows
  /// 16-byte copies: unit stride along the vector, aligned base and offset;
  /// else null. The copy is issued where the load was and waited for where
  /// the scales are applied, after the matmul: the scales hold no registers
  /// while the matmul is in flight (the SageBwd forward's per-key scales: 32
  /// registers a thread at 128 keys) and their latency hides under it.
  ///
  /// A view that ends with the vector from an offset known to be >= 0
  /// (every element exists) read by one matmul is copied by the copy engine,
  /// one bulk copy on an mbarrier, which a pipelined loop issues stages ahead
  /// in a ring as it does its TMA copies: no barrier between the threads. Any
  /// other is copied by cp.async (zero past the bounds), whose wait and the two
  /// barriers around its shared tile cost about 30 instructions a trip. Only
  /// vectors of kMinCopiedScales or more are copied, and none in a
  /// warp-specialised loop (measured on the H100: 128 keys 1-4% faster by bulk
  /// copy, 2-3% by cp.async; 64 keys 2% slower by bulk copy, 6% by cp.async;
  /// docs/lowering.md).
  std::optional<ScaleCopy> copiedScale(Value scale, ArrayRef<int64_t> shape) {
    auto load = scale.getDefiningOp<LoadOp>();
    if (!load || !cpAsync || !kernel)
      return {};
    if (auto copied = copiedScales.find(load); copied != copiedScales.end())
      return copied->second;
    for (OpOperand &use : load->getUses()) {
      auto q = dyn_cast<QMatmulOp>(use.getOwner());
      if (!q ||
          (&use != &q.getLhsScaleMutable() &&
           &use != &q.getRhsScaleMutable()) ||
          !copyCanMoveToUser(load, q))
        return {};
    }
    // The loops of a warp-specialised kernel share the producer's rings and
    // must copy alike, but a masked loop's view may end past the tensor (no
    // bulk copy), and cp.async's barriers would order the consumers inside
    // a ping-pong turn: there the scales stay loads.
    auto loop = load->getParentOfType<scf::ForOp>();
    if (loop && loop->hasAttr(SageDialect::kWarpSpecializeAttrName))
      return {};
    RankedTensorType tile = load.getResult().getType();
    if (!tile.getElementType().isF32() ||
        tile.getNumElements() < kMinCopiedScales || load.getSigma16Rows() ||
        shape.size() != 2 ||
        llvm::none_of(shape, [](int64_t n) { return n == 1; }))
      return {};
    bool transposed = tile.getShape() != shape;
    if (transposed &&
        (tile.getDimSize(0) != shape[1] || tile.getDimSize(1) != shape[0]))
      return {};
    // cp.async addresses 2-D views: the leading indices go into the
    // pointer. The view is read in `shape`'s orientation (its two
    // dimensions swapped when transposed).
    foldLeadingDims(load);
    auto view = [&](ValueRange values) {
      SmallVector<Value> out(values.begin(), values.end());
      if (transposed)
        std::swap(out[0], out[1]);
      return out;
    };
    SmallVector<Value> offsets = view(load.getOffsets()),
                       strides = view(load.getStrides()),
                       bounds = view(load.getBounds());
    unsigned inner = shape[0] == 1 ? 1 : 0;
    constexpr int64_t elemBytes = 4;
    APInt unit;
    if (!matchPattern(strides[inner], m_ConstantInt(&unit)) || unit != 1 ||
        shape[inner] * elemBytes % kCopyBytes != 0 ||
        knownAlignment(load.getPtr()) < kCopyBytes ||
        knownDivisor(offsets[inner]) * elemBytes < kCopyBytes)
      return {};
    unsigned outer = 1 - inner;
    APInt zero, rows;
    // Every element of the tile exists: the view's row 0 of at least one,
    // columns from offset >= 0 to its bound, offset + the length.
    bool bulk =
        tma && load->hasOneUse() &&
        matchPattern(offsets[outer], m_ConstantInt(&zero)) && zero.isZero() &&
        matchPattern(bounds[outer], m_ConstantInt(&rows)) && rows.sge(1) &&
        endsWithTile(offsets[inner], bounds[inner], shape[inner]) &&
        isNonNegative(offsets[inner]);
    MLIRContext *ctx = load.getContext();
    auto type = SharedTileType::get(
        ctx, shape, tile.getElementType(),
        SharedEncodingAttr::get(ctx, /*swizzle=*/0, 32, inner));
    OpBuilder b(load);
    Location loc = load.getLoc();
    Value buffer = LocalAllocOp::create(b, loc, type, Value(), IntegerAttr());
    replacedLoads.push_back(load);
    ScaleCopy copy{buffer, Value()};
    if (bulk) {
      copy.barrier = newMbarrier(b, loc);
      BulkLoadOp::create(b, loc, load.getPtr(), offsets[inner], copy.barrier,
                         buffer);
    } else {
      AsyncCopyOp::create(b, loc, load.getPtr(), offsets, strides, bounds,
                          buffer);
      copy.commit = AsyncCommitGroupOp::create(b, loc);
    }
    copiedScales[load] = copy;
    return copy;
  }

  /// The scales of `copy` (copiedScale) in registers as `type`, read here,
  /// where they are applied (a bulk copy's mbarrier is then done with: its
  /// one reader has waited). The copy is waited for here too, or before
  /// `waitBefore` when given: a wait for a product, which the copy's wait
  /// then does not follow.
  Value readScales(OpBuilder &b, Location loc, const ScaleCopy &copy,
                   RankedTensorType type, Operation *waitBefore = nullptr) {
    OpBuilder at = b;
    if (waitBefore)
      at.setInsertionPoint(waitBefore);
    if (copy.barrier) {
      waitFirstPhase(at, loc, copy.barrier);
      Value scales = LocalLoadOp::create(b, loc, type, copy.buffer);
      MbarrierInvalOp::create(b, loc, copy.barrier);
      return scales;
    }
    auto wait = AsyncWaitOp::create(at, loc, 0);
    waits.push_back({wait, copy.commit});
    return LocalLoadOp::create(b, loc, type, copy.buffer);
  }

  /// `operand` of `matmul`, contracted along `contract`, as a K-major
  /// shared tile (or, for a 16-bit wgmma B whose rows run along N, as it
  /// lies in memory: MN-major). A load whose tile can go straight to shared
  /// memory is replaced by a copy issued where the load was (so it overlaps the
  /// code in between); the wait for it is placed before `matmul`.
  ///
  /// A tile the copy engine fills takes the widest swizzle its rows allow
  /// (one request per slab of up to 128 bytes instead of one per 16-byte
  /// chunk); only wgmma's descriptors read it. The others stay unswizzled:
  /// threads address them, and a swizzle XORs each access's constant offset
  /// into its thread part, which costs an instruction and a register per
  /// access (the D = 64 and 128 backward kernels spilled with it).
  Value toShared(Operation *matmul, Value operand, unsigned contract) {
    MLIRContext *ctx = matmul->getContext();
    auto tile = cast<RankedTensorType>(operand.getType());
    auto tileType = [&](unsigned swizzle, unsigned inner) {
      auto encoding = SharedEncodingAttr::get(
          ctx, swizzle, tile.getElementTypeBitWidth(), inner);
      return SharedTileType::get(ctx, tile.getShape(), tile.getElementType(),
                                 encoding);
    };
    SharedTileType type = tileType(/*swizzle=*/0, contract);
    auto load = operand.getDefiningOp<LoadOp>();
    // One TMA copy serves every matmul the load feeds.
    if (load)
      if (auto copied = copiedLoads.find(load); copied != copiedLoads.end())
        return copied->second;
    std::optional<CopyUse> use;
    if (load && cpAsync)
      use = asyncCopyUse(load, /*mnMajor=*/tma && kernel);
    // The tile as it lies in memory, swizzled for the copy engine.
    unsigned inner = use ? use->inner : contract;
    unsigned swizzle =
        use ? layout::widestSwizzle(tile.getDimSize(inner) *
                                        tile.getElementTypeBitWidth() / 8,
                                    tile.getDimSize(1 - inner))
            : 0;
    SharedTileType swizzled = tileType(swizzle, inner);
    bool viaTma =
        use && tma && kernel && swizzle != 0 && canCopyWithTma(*use, swizzled);
    // An MN-major B goes through TMA or not at all (threads store it
    // K-major from registers). So does a tile for matmuls outside the
    // load's block or for several matmuls (cp.async's waits count the
    // groups committed in one block, for one matmul).
    if (use && !viaTma &&
        (use->mnMajor() || !load->hasOneUse() ||
         load->getBlock() != matmul->getBlock()))
      use.reset();
    if (!use) {
      // Stored once, right where the tile is defined: a tile from outside a
      // loop is not stored again every iteration, and one tile feeding
      // several matmuls the same way is stored once.
      Value &stored = storedTiles[{operand, type}];
      if (stored)
        return stored;
      OpBuilder b(matmul->getContext());
      if (Operation *def = operand.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(cast<BlockArgument>(operand).getOwner());
      stored = LocalAllocOp::create(b, operand.getLoc(), type, operand,
                                    IntegerAttr());
      return stored;
    }
    Location loc = load.getLoc();
    if (viaTma)
      return copyWithTma(load, swizzled);
    // cp.async addresses 2-D views: the leading indices go into the
    // pointer and the first bound.
    foldLeadingDims(load);
    OpBuilder b(load);
    Value buffer = LocalAllocOp::create(b, loc, type, Value(), IntegerAttr());
    AsyncCopyOp::create(b, loc, load.getPtr(), load.getOffsets(),
                        load.getStrides(), load.getBounds(), buffer);
    auto commit = AsyncCommitGroupOp::create(b, loc);
    // One wait serves the copies of both operands; how many newer groups
    // it lets stay in flight is counted once every copy exists
    // (settleWaits).
    b.setInsertionPoint(matmul);
    auto wait = dyn_cast_or_null<AsyncWaitOp>(matmul->getPrevNode());
    if (!wait)
      wait = AsyncWaitOp::create(b, loc, 0);
    waits.push_back({wait, commit});
    replacedLoads.push_back(load);
    return buffer;
  }

  /// Lets each wait leave in flight the groups committed after the ones it
  /// must complete (copies issued early, for later matmuls).
  void settleWaits() {
    DenseMap<Operation *, int32_t> pending;
    for (auto [wait, commit] : waits) {
      int32_t newer = 0;
      for (Operation *op = commit->getNextNode(); op && op != wait;
           op = op->getNextNode())
        newer += isa<AsyncCommitGroupOp>(op);
      auto [it, inserted] = pending.try_emplace(wait, newer);
      if (!inserted)
        it->second = std::min(it->second, newer);
    }
    for (auto [wait, count] : pending)
      cast<AsyncWaitOp>(wait).setPending(count);
  }

  /// Lets each wgmma wait leave in flight the dots issued after the one it
  /// completes (groups complete in order): a matmul issued before the
  /// first use of an earlier one's result keeps running under the code
  /// that uses it, as the next QKᵀ under the softmax in attention. Counted
  /// in the dot's block; a region in between that issues wgmma (an unknown
  /// number of groups) keeps the wait complete.
  void settleDotWaits() {
    for (auto [wait, dot] : dotWaits) {
      if (wait->getBlock() != dot->getBlock())
        continue;
      int32_t newer = 0;
      for (Operation *op = dot->getNextNode(); op != wait;
           op = op->getNextNode()) {
        if (auto later = dyn_cast<DotOp>(op)) {
          newer += isWgmma(later.getMmaKind());
          continue;
        }
        bool nested = false;
        for (Region &region : op->getRegions())
          region.walk(
              [&](DotOp inner) { nested |= isWgmma(inner.getMmaKind()); });
        if (nested) {
          newer = 0;
          break;
        }
      }
      wait.setPendings(newer);
    }
  }
};

/// `value` in `type`'s encoding (a conversion when it differs).
Value withEncoding(OpBuilder &b, Location loc, Value value,
                   RankedTensorType type) {
  if (value.getType() == type)
    return value;
  return ConvertLayoutOp::create(b, loc, type, value);
}

bool isSingle(Value scale) {
  return cast<RankedTensorType>(scale.getType()).getNumElements() == 1;
}

/// Reads a scale tile already in shared memory straight into `sliced`
/// (Promoter::copiedScale), or returns null.
using ScaleReader = llvm::function_ref<Value(Value scale, RankedTensorType)>;

/// A scale tile as the `dim` slice of the result's encoding (an Mx1 column
/// for dim 1, a 1xN row for dim 0; transposed when it comes the other way
/// round). A single scale is broadcast to the slice; one that `read` finds
/// in shared memory is loaded into it.
Value sliceScale(OpBuilder &b, Location loc, Value scale,
                 RankedTensorType result, unsigned dim, ScaleReader read) {
  auto type = cast<RankedTensorType>(scale.getType());
  auto parent = cast<DistributedEncodingAttrInterface>(result.getEncoding());
  SmallVector<int64_t> shape(result.getShape());
  shape[dim] = 1;
  auto sliced = RankedTensorType::get(
      shape, b.getF32Type(),
      SliceEncodingAttr::get(b.getContext(), dim, parent, 0, 0));
  if (isSingle(scale))
    return BroadcastOp::create(b, loc, sliced, scale);
  if (Value shared = read(scale, sliced))
    return shared;
  if (type.getDimSize(dim) != 1) // a row where a column is needed, or back
    scale = TransOp::create(b, loc, sliced, scale);
  return withEncoding(b, loc, scale, sliced);
}

/// The factors that scale a product of type `result` by the lhs scales (one
/// per row) and the rhs scales (one per column), broadcast to the product's
/// tile: their product when either is a single value (formed on the other's
/// slice, so each element takes one multiply), else the rows' and then the
/// columns' factor.
SmallVector<Value, 2> scaleFactors(OpBuilder &b, Location loc,
                                   RankedTensorType result, Value lhsScale,
                                   Value rhsScale, arith::FastMathFlags flags,
                                   ScaleReader read) {
  auto broadcast = [&](Value v) {
    return BroadcastOp::create(b, loc, result, v).getResult();
  };
  auto mul = [&](Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, flags).getResult();
  };
  if (isSingle(lhsScale) && isSingle(rhsScale)) {
    Value sb = withEncoding(b, loc, rhsScale,
                            cast<RankedTensorType>(lhsScale.getType()));
    return {broadcast(mul(lhsScale, sb))};
  }
  if (isSingle(rhsScale) || isSingle(lhsScale)) {
    unsigned dim = isSingle(rhsScale) ? 1 : 0; // the varying scale's slice
    Value varying =
        sliceScale(b, loc, dim == 1 ? lhsScale : rhsScale, result, dim, read);
    Value single =
        sliceScale(b, loc, dim == 1 ? rhsScale : lhsScale, result, dim, read);
    return {broadcast(mul(varying, single))};
  }
  // One statement per op: the IR order must not depend on the order in
  // which C++ evaluates arguments.
  Value rows = broadcast(sliceScale(b, loc, lhsScale, result, 1, read));
  Value columns = broadcast(sliceScale(b, loc, rhsScale, result, 0, read));
  return {rows, columns};
}

/// `value` times each of `factors` (scaleFactors), in order.
Value applyFactors(OpBuilder &b, Location loc, Value value,
                   ArrayRef<Value> factors, arith::FastMathFlags flags) {
  for (Value factor : factors)
    value = arith::MulFOp::create(b, loc, value, factor, flags);
  return value;
}

/// The op of `block` before which `value` must be available: the first
/// that uses it, itself or in its regions, or the terminator when no op of
/// the block does.
Operation *firstUseIn(Block *block, Value value) {
  Operation *first = nullptr;
  for (Operation *user : value.getUsers()) {
    Operation *at = block->findAncestorOpInBlock(*user);
    if (at && (!first || at->isBeforeInBlock(first)))
      first = at;
  }
  return first ? first : block->getTerminator();
}

/// `value` before the layout conversions that produced it.
Value throughConversions(Value value) {
  while (auto cvt = value.getDefiningOp<ConvertLayoutOp>())
    value = cvt.getSource();
  return value;
}

/// For a matmul whose register A operand a loop carries, the op of the
/// matmul's block that computes the next trip's A (the yielded value, or
/// the first op of its conversions), when it follows the matmul; else null.
/// The carried value keeps its registers across the back edge, so that op
/// writes the registers the in-flight wgmma still reads: the wait must
/// come first (ptxas otherwise serializes the wgmma, warning C7513).
Operation *nextRegisterA(Operation *matmul, Value lhs) {
  auto arg = dyn_cast<BlockArgument>(throughConversions(lhs));
  Block *body = matmul->getBlock();
  auto loop = dyn_cast_or_null<scf::ForOp>(body->getParentOp());
  if (!arg || !loop || arg.getOwner() != body || arg == loop.getInductionVar())
    return nullptr;
  Value next = body->getTerminator()->getOperand(arg.getArgNumber() - 1);
  Operation *first = nullptr;
  for (Value v = next; Operation *def = v.getDefiningOp();) {
    first = def;
    auto cvt = dyn_cast<ConvertLayoutOp>(def);
    if (!cvt)
      break;
    v = cvt.getSource();
  }
  Operation *at = first ? body->findAncestorOpInBlock(*first) : nullptr;
  return at && matmul->isBeforeInBlock(at) ? at : nullptr;
}

template <typename OpTy> void promote(OpTy op, Promoter &promoter) {
  MmaKind kind = *op.getMma();
  Location loc = op.getLoc();
  RankedTensorType result = op.getResult().getType();
  auto mma = cast<MmaEncodingAttr>(result.getEncoding());
  unsigned lc = op.getLhsContractDim(), rc = op.getRhsContractDim();
  Type elem = op.getLhs().getType().getElementType();
  MLIRContext *ctx = op.getContext();

  // A rhs in sigma16 order takes A from registers in the sigma16 fragment
  // layout (on mma.sync too): each physical k slot then holds the logical
  // column the rhs slot pairs with.
  bool sigma16 = false, lhsUnsigned = false;
  if constexpr (std::is_same_v<OpTy, QMatmulOp>) {
    sigma16 = op.getRhsSigma16();
    lhsUnsigned = op.getLhsUnsigned();
  }
  Value lhs;
  if (kind == MmaKind::WgmmaRegA || sigma16) {
    OpBuilder b(op);
    auto tile = op.getLhs().getType();
    auto encoding = DotOperandEncodingAttr::get(
        ctx, 0, mma, tile.getElementTypeBitWidth(), sigma16);
    auto fragments =
        RankedTensorType::get(tile.getShape(), tile.getElementType(), encoding);
    // A renaming of registers stays a conversion; anything else goes
    // through a K-major shared tile, read back a 32-bit word per fragment
    // register (cheaper than a shuffle per byte).
    std::optional<layout::LinearLayout> from = getLinearLayout(tile);
    std::optional<layout::LinearLayout> to = getLinearLayout(fragments);
    if (from && to &&
        layout::classifyConversion(*from, *to) ==
            layout::ConversionKind::InThread)
      lhs = withEncoding(b, loc, op.getLhs(), fragments);
    else
      lhs = LocalLoadOp::create(b, loc, fragments,
                                promoter.toShared(op, op.getLhs(), lc));
  } else {
    lhs = promoter.toShared(op, op.getLhs(), lc);
  }
  Value rhs = promoter.toShared(op, op.getRhs(), rc);

  OpBuilder b(op);
  bool isInt = elem.isInteger(8);
  Type accElem = isInt ? Type(b.getI32Type()) : Type(b.getF32Type());
  auto accType = RankedTensorType::get(result.getShape(), accElem, mma);
  // sage.matmul has no epilogue: its accumulator is the instruction's C
  // operand, so the tensor cores accumulate and no second tile is live.
  // sage.qmatmul scales its integer product first: it starts from 0.
  bool chained = std::is_same_v<OpTy, MatmulOp> && op.getAcc();
  Value init = op.getAcc();
  if (!chained)
    init = arith::ConstantOp::create(
        b, loc, accType,
        DenseElementsAttr::get(accType, b.getZeroAttr(accElem)));
  auto dot =
      DotOp::create(b, loc, accType, lhs, rhs, init, lc, rc, lhsUnsigned);
  Value product = dot;
  // The epilogue's last multiply and the accumulation may fuse into one
  // FMA (the matmul's f32 epilogue rounding is not pinned, unlike the
  // quantizer's).
  auto contract = arith::FastMathFlags::contract;
  // The wait for a wgmma product, before which the scales' copies are
  // waited for: that wait's latency then overlaps the product's.
  Operation *productWait = nullptr;
  auto read = [&](Value scale, RankedTensorType sliced) -> Value {
    std::optional<ScaleCopy> copy =
        promoter.copiedScale(scale, sliced.getShape());
    return copy ? promoter.readScales(b, loc, *copy, sliced, productWait)
                : Value();
  };
  // The accumulator encoding decides the instruction (a matmul that
  // accumulates onto a wgmma result shares its encoding).
  if (isWgmma(dot.getMmaKind())) {
    // wgmma runs asynchronously: wait for it, and apply the epilogue, only
    // where the result is first needed, so the work in between overlaps it.
    // Not for a qmatmul onto an accumulator operand: until its epilogue the
    // partial product and the accumulator would both be live.
    Operation *next =
        kind == MmaKind::WgmmaRegA ? nextRegisterA(op, op.getLhs()) : nullptr;
    if (chained || !op.getAcc()) {
      Operation *at = firstUseIn(op->getBlock(), op->getResult(0));
      if (next && next->isBeforeInBlock(at))
        at = next;
      b.setInsertionPoint(at);
    }
    auto wait = DotWaitOp::create(b, loc, ValueRange{product}, 0);
    productWait = wait;
    // The work before the wait is what runs under this dot (FlashAttention's
    // exponentials): ptxas would hoist the wait above it whatever the PTX
    // order; the fence keeps it there.
    if (next)
      wait.setFenced(true);
    promoter.dotWaits.push_back({wait, dot});
    product = wait.getResult(0);
  }
  Value value = product;
  if constexpr (std::is_same_v<OpTy, QMatmulOp>) {
    // The scales are read (into registers) after the wait: before it, they
    // would be live beside the product in flight.
    value = arith::SIToFPOp::create(b, loc, result, product);
    SmallVector<Value, 2> factors = scaleFactors(
        b, loc, result, op.getLhsScale(), op.getRhsScale(), contract, read);
    value = applyFactors(b, loc, value, factors, contract);
  }
  if (op.getAcc() && !chained)
    value = arith::AddFOp::create(b, loc, op.getAcc(), value, contract);
  op.getResult().replaceAllUsesWith(value);
  op.erase();
  // A load feeding matmuls still to promote stays until the last is done.
  llvm::erase_if(promoter.replacedLoads, [](Operation *load) {
    if (!load->use_empty())
      return false;
    load->erase();
    return true;
  });
}

struct PromoteOperandsPass
    : public sagegpu::impl::SageGPUPromoteOperandsBase<PromoteOperandsPass> {
  using SageGPUPromoteOperandsBase::SageGPUPromoteOperandsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<TargetInfo> info = SageDialect::getTarget(module);
    bool cpAsync = info && info->hasCpAsync();
    bool tma = cpAsync && info->hasTma() &&
               ptxVersion >= static_cast<int>(TargetInfo::kTmaMinPtxVersion);
    WalkResult walk = module.walk([&](FunctionOpInterface func) {
      Promoter promoter;
      promoter.func = func;
      promoter.cpAsync = cpAsync;
      promoter.tma = tma;
      promoter.kernel = func->hasAttr(SageDialect::kKernelAttrName);
      SmallVector<Operation *> matmuls;
      func.walk([&](Operation *op) {
        if (isa<QMatmulOp, MatmulOp>(op))
          matmuls.push_back(op);
      });
      for (Operation *op : matmuls) {
        if (!mmaOf(op) || !isa_and_nonnull<MmaEncodingAttr>(
                              cast<RankedTensorType>(op->getResult(0).getType())
                                  .getEncoding())) {
          op->emitOpError("needs its instruction (sage-select-mma) and its "
                          "accumulator encoding (sagegpu-assign-layouts)");
          return WalkResult::interrupt();
        }
        auto q = dyn_cast<QMatmulOp>(op);
        // u8 x s8 wgmma needs PTX ISA 8.4 (mma.sync has it from 7.x).
        if (q && q.getLhsUnsigned() && isWgmma(*q.getMma()) &&
            ptxVersion <
                static_cast<int>(TargetInfo::kMixedIntegerWgmmaMinPtxVersion)) {
          op->emitOpError() << "with lhs_unsigned on wgmma needs PTX ISA "
                               "version 8.4 or later (ptx-version="
                            << static_cast<int>(ptxVersion) << ")";
          return WalkResult::interrupt();
        }
        if (q)
          promote(q, promoter);
        else
          promote(cast<MatmulOp>(op), promoter);
      }
      promoter.settleWaits();
      promoter.settleDotWaits();
      SmallVector<StoreOp> stores;
      func.walk([&](StoreOp store) {
        if (store.getTma())
          stores.push_back(store);
      });
      for (StoreOp store : stores)
        promoter.storeWithTma(store);
      // Only tensor maps keep leading dimensions.
      foldLeadingDims(func);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
