//===- TileTypeConverter.cpp - tiles become per-thread scalars ------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

static constexpr unsigned kGlobalAddressSpace = 1;

TileTypeConverter::TileTypeConverter(MLIRContext *ctx) {
  addConversion([](Type type) { return type; });
  addConversion([](PtrType type) -> Type {
    return LLVM::LLVMPointerType::get(type.getContext(), kGlobalAddressSpace);
  });
  // A tensor map is the global address of its 128 bytes.
  addConversion([](TensorMapType type) -> Type {
    return LLVM::LLVMPointerType::get(type.getContext(), kGlobalAddressSpace);
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
