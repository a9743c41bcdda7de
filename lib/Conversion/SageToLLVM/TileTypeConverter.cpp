//===- TileTypeConverter.cpp - tiles become per-thread scalars ------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

static constexpr unsigned kGlobalAddressSpace = 1;
static constexpr unsigned kSharedAddressSpace = 3;

TileTypeConverter::TileTypeConverter(MLIRContext *ctx) {
  addConversion([](Type type) { return type; });
  addConversion([](PtrType type) -> Type {
    return LLVM::LLVMPointerType::get(type.getContext(), kGlobalAddressSpace);
  });
  // A tensor map is the generic address of its 128 bytes: in global memory
  // (built on the device) or in the kernel's parameters (host-encoded).
  addConversion([](TensorMapType type) -> Type {
    return LLVM::LLVMPointerType::get(type.getContext());
  });
  // A shared tile is the address of its first byte.
  addConversion([](sagegpu::SharedTileType type) -> Type {
    return LLVM::LLVMPointerType::get(type.getContext(), kSharedAddressSpace);
  });
  addConversion(
      [](RankedTensorType type,
         SmallVectorImpl<Type> &results) -> std::optional<LogicalResult> {
        std::optional<TileDistribution> dist = TileDistribution::get(type);
        if (!dist)
          return failure();
        results.append(dist->getNumElements(), type.getElementType());
        return success();
      });
}
