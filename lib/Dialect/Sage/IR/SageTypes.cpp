//===- SageTypes.cpp - sage types -----------------------------------------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sage;

#define GET_TYPEDEF_CLASSES
#include "sage/Dialect/Sage/IR/SageTypes.cpp.inc"

void SageDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "sage/Dialect/Sage/IR/SageTypes.cpp.inc"
      >();
}

LogicalResult PtrType::verify(function_ref<InFlightDiagnostic()> emitError,
                              Type pointee) {
  if (!pointee.isIntOrFloat())
    return emitError() << "pointee must be an integer or float type, got "
                       << pointee;
  return success();
}
