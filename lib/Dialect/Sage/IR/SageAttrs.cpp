//===- SageAttrs.cpp - enums, the scheme interface and attributes ---------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sage;

#include "sage/Dialect/Sage/IR/SageEnums.cpp.inc"

#include "sage/Dialect/Sage/IR/SageInterfaces.cpp.inc"

#include "sage/Dialect/Sage/IR/SageOpInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "sage/Dialect/Sage/IR/SageAttrs.cpp.inc"

void SageDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "sage/Dialect/Sage/IR/SageAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Int8SchemeAttr
//===----------------------------------------------------------------------===//

Type Int8SchemeAttr::getStorageType(MLIRContext *ctx) const {
  return IntegerType::get(ctx, 8);
}

double Int8SchemeAttr::getQuantMax() const { return 127.0; }

RoundingMode Int8SchemeAttr::getRoundingMode() const { return getRounding(); }

SmallVector<int64_t>
Int8SchemeAttr::getGranuleShape(ArrayRef<int64_t> tileShape) const {
  SmallVector<int64_t> granule(tileShape);
  switch (getGranularity()) {
  case Granularity::PerBlock:
    break;
  case Granularity::PerToken: // one scale per row
    granule[0] = 1;
    break;
  case Granularity::PerChannel: // one scale per column
    granule[granule.size() - 1] = 1;
    break;
  }
  return granule;
}

LogicalResult Int8SchemeAttr::verifyInputType(
    Type elementType, function_ref<InFlightDiagnostic()> emitError) const {
  if (!isa<Float16Type, BFloat16Type, Float32Type>(elementType))
    return emitError() << "int8 scheme quantizes f16, bf16 or f32, not "
                       << elementType;
  return success();
}
