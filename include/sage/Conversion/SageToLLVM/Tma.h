//===- Tma.h - tensor maps -------------------------------------*- C++ -*-===//
//
// sage.make_tensor_map assembles its map in op-scoped shared scratch
// (TensorMapToNVVM.cpp, with the sagegpu.tma_load and mbarrier lowerings).
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_TMA_H
#define SAGE_CONVERSION_SAGETOLLVM_TMA_H

#include "mlir/IR/Builders.h"

namespace mlir::sage {

/// Scratch bytes sage.make_tensor_map borrows to assemble a map.
inline constexpr int64_t kTensorMapStagingBytes = 128;

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_TMA_H
