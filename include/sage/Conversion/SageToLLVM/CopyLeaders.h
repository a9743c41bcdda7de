//===- CopyLeaders.h - the thread that issues one-thread copies -*- C++ -*-===//
//
// The copy engine's one-thread operations (an mbarrier's set-up, its byte
// count, the TMA and bulk copies, their groups) run on one thread of the
// role that owns them: an elect.sync lane of the role's first warp, elected
// once at the function's entry, where every lane is present. ptxas knows that
// exactly one lane holds an elected predicate and issues each copy once;
// predicated on `tid == first`, every copy sat in a loop over the lanes that
// might hold the predicate (a copy takes warp-uniform operands). The warp's
// index is shuffled from lane 0, so that ptxas sees it warp-uniform and keeps
// the copies' addresses in uniform registers.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_COPYLEADERS_H
#define SAGE_CONVERSION_SAGETOLLVM_COPYLEADERS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::sage {

class CopyLeaders {
public:
  /// Elects the leader of every role whose ops issue one-thread copies, in
  /// each function of `module`, at the start of the function (before the
  /// conversion, which then reads them with get()).
  static CopyLeaders materialize(ModuleOp module);

  /// i1: the running thread is the leader of `op`'s role; null where none
  /// was materialized (`op` is not a one-thread copy operation).
  Value get(Operation *op) const;

private:
  llvm::DenseMap<std::pair<Operation *, int64_t>, Value> leaders;
};

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_COPYLEADERS_H
