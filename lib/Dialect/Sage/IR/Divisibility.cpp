//===- Divisibility.cpp - known divisors of integers and pointers ---------===//

#include "sage/Dialect/Sage/IR/Divisibility.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::sage;

/// Divisors beyond this add nothing and could overflow when multiplied.
static constexpr int64_t kDivisorCap = int64_t(1) << 20;

/// The kernel-argument hint `name` on `v`, or 1.
static int64_t argumentHint(Value v, StringRef name) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return 1;
  auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!func || arg.getOwner() != &func.getFunctionBody().front())
    return 1;
  auto attr = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), name);
  return attr ? std::min(kDivisorCap, attr.getInt()) : 1;
}

static int64_t divisor(Value v, unsigned depth) {
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
        return std::min(divisor(loop.getLowerBound(), depth + 1),
                        divisor(loop.getStep(), depth + 1));
    return argumentHint(v, SageDialect::kDivisibilityAttrName);
  }
  Operation *op = v.getDefiningOp();
  if (auto mul = dyn_cast_or_null<arith::MulIOp>(op))
    return std::min(kDivisorCap, divisor(mul.getLhs(), depth + 1) *
                                     divisor(mul.getRhs(), depth + 1));
  if (auto add = dyn_cast_or_null<arith::AddIOp>(op))
    return std::min(divisor(add.getLhs(), depth + 1),
                    divisor(add.getRhs(), depth + 1));
  if (isa_and_nonnull<arith::ExtSIOp, arith::ExtUIOp>(op))
    return divisor(op->getOperand(0), depth + 1);
  // Divisors are powers of two: the smaller one divides both operands, so
  // it divides their difference, either of them, and their min and max.
  if (isa_and_nonnull<arith::SubIOp, arith::MinSIOp, arith::MaxSIOp,
                      arith::MinUIOp, arith::MaxUIOp>(op))
    return std::min(divisor(op->getOperand(0), depth + 1),
                    divisor(op->getOperand(1), depth + 1));
  if (auto select = dyn_cast_or_null<arith::SelectOp>(op))
    return std::min(divisor(select.getTrueValue(), depth + 1),
                    divisor(select.getFalseValue(), depth + 1));
  return 1;
}

int64_t mlir::sage::knownDivisor(Value v) { return divisor(v, 0); }

int64_t mlir::sage::knownAlignment(Value ptr) {
  if (auto add = ptr.getDefiningOp<AddPtrOp>()) {
    int64_t elemBytes =
        add.getPtr().getType().getPointeeType().getIntOrFloatBitWidth() / 8;
    return std::min(
        knownAlignment(add.getPtr()),
        std::min(kDivisorCap, knownDivisor(add.getOffset()) * elemBytes));
  }
  return argumentHint(ptr, SageDialect::kAlignmentAttrName);
}
