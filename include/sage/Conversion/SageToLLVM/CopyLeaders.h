//===- CopyLeaders.h - the thread that issues one-thread copies -*- C++ -*-===//
//
// The copy engine's one-thread operations (an mbarrier's set-up, its byte
// count, the TMA and bulk copies, their groups) run on one thread of the
// role that owns them: a lane of the role's first warp. The warp is found
// once, at the function's entry (its index shuffled from lane 0, so that
// ptxas sees the test warp-uniform); the lane is elected at each operation,
// inside a uniform branch that only that warp takes (TensorMapToNVVM.cpp,
// LeaderRegion). ptxas then knows that exactly one lane issues each copy
// and keeps the copies' operands in uniform registers. Predicated on
// `tid == first`, every copy sat in a loop over the lanes that might hold
// the predicate; with one election at the entry, ptxas still moved each
// copy's operands from per-lane registers at every issue.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_COPYLEADERS_H
#define SAGE_CONVERSION_SAGETOLLVM_COPYLEADERS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::sage {

class CopyLeaders {
public:
  /// Finds the leader warp of every role whose ops issue one-thread copies,
  /// in each function of `module`, at the start of the function (before the
  /// conversion, which then reads them with get()).
  static CopyLeaders materialize(ModuleOp module);

  /// i1, uniform in each warp: the running thread is in the leader warp of
  /// `op`'s role; null where none was materialized (`op` is not a one-thread
  /// copy operation).
  Value get(Operation *op) const;

private:
  llvm::DenseMap<std::pair<Operation *, int64_t>, Value> leaders;
};

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_COPYLEADERS_H
