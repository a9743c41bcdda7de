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

double Int8SchemeAttr::getQuantMin() const { return -127.0; }

RoundingMode Int8SchemeAttr::getRoundingMode() const { return getRounding(); }

/// Which elements of a tile share a scale under `granularity`.
static SmallVector<int64_t> granuleOf(Granularity granularity,
                                      ArrayRef<int64_t> tileShape) {
  SmallVector<int64_t> granule(tileShape);
  switch (granularity) {
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

SmallVector<int64_t>
Int8SchemeAttr::getGranuleShape(ArrayRef<int64_t> tileShape) const {
  return granuleOf(getGranularity(), tileShape);
}

/// The 8-bit schemes quantize 16- and 32-bit floats.
static LogicalResult
verifyEightBitInput(StringRef scheme, Type elementType,
                    function_ref<InFlightDiagnostic()> emitError) {
  if (!isa<Float16Type, BFloat16Type, Float32Type>(elementType))
    return emitError() << scheme << " scheme quantizes f16, bf16 or f32, not "
                       << elementType;
  return success();
}

LogicalResult Int8SchemeAttr::verifyInputType(
    Type elementType, function_ref<InFlightDiagnostic()> emitError) const {
  return verifyEightBitInput("int8", elementType, emitError);
}

//===----------------------------------------------------------------------===//
// UInt8SchemeAttr
//===----------------------------------------------------------------------===//

Type UInt8SchemeAttr::getStorageType(MLIRContext *ctx) const {
  return IntegerType::get(ctx, 8);
}

double UInt8SchemeAttr::getQuantMax() const { return 255.0; }

double UInt8SchemeAttr::getQuantMin() const { return 0.0; }

RoundingMode UInt8SchemeAttr::getRoundingMode() const { return getRounding(); }

SmallVector<int64_t>
UInt8SchemeAttr::getGranuleShape(ArrayRef<int64_t> tileShape) const {
  return granuleOf(getGranularity(), tileShape);
}

LogicalResult UInt8SchemeAttr::verifyInputType(
    Type elementType, function_ref<InFlightDiagnostic()> emitError) const {
  return verifyEightBitInput("uint8", elementType, emitError);
}
