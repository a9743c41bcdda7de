//===- SageGPUDialect.cpp - dialect registration --------------------------===//

#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

using namespace mlir;
using namespace mlir::sagegpu;

#include "sage/Dialect/SageGPU/IR/SageGPUDialect.cpp.inc"

namespace {
/// Prints encodings as `#blocked`, `#slice`, `#mma`, ... aliases: they recur on
/// every tile type.
struct SageGPUOpAsmInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (isa<BlockedEncodingAttr>(attr))
      os << "blocked";
    else if (isa<SliceEncodingAttr>(attr))
      os << "slice";
    else if (isa<MmaEncodingAttr>(attr))
      os << "mma";
    else if (isa<DotOperandEncodingAttr>(attr))
      os << "dot_op";
    else if (isa<SharedEncodingAttr>(attr))
      os << "shared";
    else
      return AliasResult::NoAlias;
    return AliasResult::FinalAlias;
  }
};
} // namespace

void SageGPUDialect::initialize() {
  addInterfaces<SageGPUOpAsmInterface>();
  addOperations<
#define GET_OP_LIST
#include "sage/Dialect/SageGPU/IR/SageGPUOps.cpp.inc"
      >();
  registerAttributes();
  registerTypes();
}
