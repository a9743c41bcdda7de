//===- SelectCopies.cpp - choose asynchronous copies for matmul operands --===//

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
    return std::min(knownAlignment(add.getPtr()),
                    std::min(kDivisorCap,
                             knownDivisor(add.getOffset()) * elemBytes));
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

bool canCopyAsync(LoadOp load) {
  if (!load->hasOneUse())
    return false;
  OpOperand &use = *load->use_begin();
  std::optional<unsigned> contract = contractedDimOf(use);
  if (!contract || !copyCanMoveToUser(load, use.getOwner()))
    return false;
  unsigned other = 1 - *contract;
  RankedTensorType tile = load.getResult().getType();
  int64_t elemBytes = tile.getElementTypeBitWidth() / 8;
  APInt stride;
  return matchPattern(load.getStrides()[*contract], m_ConstantInt(&stride)) &&
         stride == 1 &&
         tile.getDimSize(*contract) * elemBytes % kCopyBytes == 0 &&
         knownAlignment(load.getPtr()) >= kCopyBytes &&
         knownDivisor(load.getStrides()[other]) * elemBytes >= kCopyBytes &&
         knownDivisor(load.getOffsets()[*contract]) * elemBytes >= kCopyBytes;
}

struct SelectCopiesPass
    : public sage::impl::SageSelectCopiesBase<SelectCopiesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<TargetInfo> info = SageDialect::getTarget(module);
    if (!info || !info->hasCpAsync())
      return;
    module.walk([&](LoadOp load) {
      if (!load.getCopy() && canCopyAsync(load))
        load.setCopy(CopyKind::CpAsync);
    });
  }
};

} // namespace
