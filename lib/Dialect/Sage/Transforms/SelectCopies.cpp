//===- SelectCopies.cpp - choose asynchronous copies for matmul operands --===//

#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::sage {
#define GEN_PASS_DEF_SAGESELECTCOPIES
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {

/// cp.async moves 16 bytes at a time, aligned on both sides.
constexpr int64_t kCopyBytes = 16;
/// Divisors beyond this add nothing and could overflow when multiplied.
constexpr int64_t kDivisorCap = int64_t(1) << 20;

/// The kernel-argument hint `name` on `v`, or 1.
int64_t argumentHint(Value v, StringRef name) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return 1;
  auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.getFunctionBody().front())
    return 1;
  auto attr = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), name);
  return attr ? std::min(kDivisorCap, attr.getInt()) : 1;
}

/// The largest power of two known to divide the integer `v`, from constants,
/// `sage.divisibility` argument attributes and the arithmetic between them.
int64_t knownDivisor(Value v, unsigned depth = 0) {
  if (depth > 16)
    return 1;
  APInt constant;
  if (matchPattern(v, m_ConstantInt(&constant))) {
    int64_t x = constant.getSExtValue();
    return x == 0 ? kDivisorCap : std::min(kDivisorCap, x & -x);
  }
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    // A loop counter takes the values lower bound + i * step.
    if (auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp()))
      if (arg == loop.getInductionVar())
        return std::min(knownDivisor(loop.getLowerBound(), depth + 1),
                        knownDivisor(loop.getStep(), depth + 1));
    return argumentHint(v, SageDialect::kDivisibilityAttrName);
  }
  Operation *op = v.getDefiningOp();
  if (auto mul = dyn_cast_or_null<arith::MulIOp>(op))
    return std::min(kDivisorCap, knownDivisor(mul.getLhs(), depth + 1) *
                                     knownDivisor(mul.getRhs(), depth + 1));
  if (auto add = dyn_cast_or_null<arith::AddIOp>(op))
    return std::min(knownDivisor(add.getLhs(), depth + 1),
                    knownDivisor(add.getRhs(), depth + 1));
  if (isa_and_nonnull<arith::ExtSIOp, arith::ExtUIOp>(op))
    return knownDivisor(op->getOperand(0), depth + 1);
  return 1;
}

/// The byte alignment known for a pointer.
int64_t knownAlignment(Value ptr) {
  if (auto add = ptr.getDefiningOp<AddPtrOp>()) {
    int64_t elemBytes =
        add.getPtr().getType().getPointeeType().getIntOrFloatBitWidth() / 8;
    return std::min(
        knownAlignment(add.getPtr()),
        std::min(kDivisorCap, knownDivisor(add.getOffset()) * elemBytes));
  }
  return argumentHint(ptr, SageDialect::kAlignmentAttrName);
}

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

/// The copy happens where the matmul is, so the load must sit in the same
/// block with no global store in between (the tile must not change, and a
/// load hoisted out of a loop must not be re-copied every iteration).
bool copyCanMoveToUser(LoadOp load, Operation *user) {
  if (user->getBlock() != load->getBlock())
    return false;
  for (Operation *op = load->getNextNode(); op && op != user;
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
struct CopyUse {
  Operation *matmul;
  unsigned operand; // 0 for A
  unsigned contract;
};

std::optional<CopyUse> asyncCopyUse(LoadOp load) {
  if (!load->hasOneUse())
    return std::nullopt;
  OpOperand &use = *load->use_begin();
  std::optional<unsigned> contract = contractedDimOf(use);
  if (!contract || !copyCanMoveToUser(load, use.getOwner()))
    return std::nullopt;
  unsigned other = 1 - *contract;
  RankedTensorType tile = load.getResult().getType();
  int64_t elemBytes = tile.getElementTypeBitWidth() / 8;
  APInt stride;
  bool ok =
      matchPattern(load.getStrides()[*contract], m_ConstantInt(&stride)) &&
      stride == 1 && tile.getDimSize(*contract) * elemBytes % kCopyBytes == 0 &&
      knownAlignment(load.getPtr()) >= kCopyBytes &&
      knownDivisor(load.getStrides()[other]) * elemBytes >= kCopyBytes &&
      knownDivisor(load.getOffsets()[*contract]) * elemBytes >= kCopyBytes;
  if (!ok)
    return std::nullopt;
  return CopyUse{use.getOwner(), use.getOperandNumber(), *contract};
}

std::optional<MmaKind> mmaOf(Operation *matmul) {
  if (auto q = dyn_cast<QMatmulOp>(matmul))
    return q.getMma();
  return cast<MatmulOp>(matmul).getMma();
}

/// Beyond an asynchronous copy, TMA fills whole 16-byte chunks (so the
/// contracted bound must not end inside one), its boxes have limits, and it
/// writes the core-matrix layout only descriptor-read operands have.
bool canCopyWithTma(LoadOp load, const CopyUse &use) {
  std::optional<MmaKind> kind = mmaOf(use.matmul);
  if (!kind || !readsFromDescriptor(*kind, /*lhs=*/use.operand == 0))
    return false;
  RankedTensorType tile = load.getResult().getType();
  int64_t elemBytes = tile.getElementTypeBitWidth() / 8;
  return knownDivisor(load.getBounds()[use.contract]) * elemBytes >=
             MakeTensorMapOp::kChunkBytes &&
         MakeTensorMapOp::isValidBox(tile.getShape(), use.contract,
                                     tile.getElementType());
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

/// Builds the load's tensor map in the next free slot of the function's
/// global scratch (appending the scratch argument on first use).
void useTma(LoadOp load, const CopyUse &use, FunctionOpInterface func,
            Value &scratch) {
  OpBuilder b(load);
  if (!scratch) {
    MLIRContext *ctx = load.getContext();
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(index,
                              PtrType::get(ctx, IntegerType::get(ctx, 8)),
                              DictionaryAttr::get(ctx), func.getLoc());
    scratch = func.getArgument(index);
  }
  auto bytes =
      func->getAttrOfType<IntegerAttr>(SageDialect::kGlobalScratchAttrName);
  int64_t slot = bytes ? bytes.getInt() / MakeTensorMapOp::kBytes : 0;
  func->setAttr(SageDialect::kGlobalScratchAttrName,
                b.getI64IntegerAttr((slot + 1) * MakeTensorMapOp::kBytes));

  SmallVector<Value> view{load.getPtr(), scratch};
  llvm::append_range(view, load.getStrides());
  llvm::append_range(view, load.getBounds());
  setInsertionAfterAll(b, view);
  auto map = MakeTensorMapOp::create(
      b, load.getLoc(), TensorMapType::get(load.getContext()), load.getPtr(),
      load.getStrides(), load.getBounds(), scratch,
      load.getResult().getType().getShape(), use.contract, slot);
  load.getMapMutable().assign(map);
  load.setCopy(CopyKind::Tma);
}

struct SelectCopiesPass
    : public sage::impl::SageSelectCopiesBase<SelectCopiesPass> {
  using SageSelectCopiesBase::SageSelectCopiesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<TargetInfo> info = SageDialect::getTarget(module);
    if (!info || !info->hasCpAsync())
      return;
    bool tma = info->hasTma() &&
               ptxVersion >= static_cast<int>(TargetInfo::kTmaMinPtxVersion);
    module.walk([&](FunctionOpInterface func) {
      // Only a kernel gets its global scratch from the launcher.
      bool kernel = func->hasAttr(SageDialect::kKernelAttrName);
      Value scratch;
      SmallVector<LoadOp> loads;
      func.walk([&](LoadOp load) { loads.push_back(load); });
      for (LoadOp load : loads) {
        if (load.getCopy())
          continue;
        std::optional<CopyUse> use = asyncCopyUse(load);
        if (!use)
          continue;
        if (tma && kernel && canCopyWithTma(load, *use))
          useTma(load, *use, func, scratch);
        else
          load.setCopy(CopyKind::CpAsync);
      }
    });
  }
};

} // namespace
