//===- SageGPUTypes.cpp - the shared-memory tile type ---------------------===//

#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sagegpu;

#define GET_TYPEDEF_CLASSES
#include "sage/Dialect/SageGPU/IR/SageGPUTypes.cpp.inc"

void SageGPUDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "sage/Dialect/SageGPU/IR/SageGPUTypes.cpp.inc"
      >();
}

// !sagegpu.smem<64x128xi8, #shared>: the tensor-like spelling.
Type SharedTileType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type element;
  Attribute encoding;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/false) ||
      parser.parseType(element))
    return {};
  if (succeeded(parser.parseOptionalComma()) && parser.parseAttribute(encoding))
    return {};
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), shape, element, encoding);
}

void SharedTileType::print(AsmPrinter &printer) const {
  printer << "<";
  for (int64_t d : getShape())
    printer << d << "x";
  printer << getElementType();
  if (getEncoding())
    printer << ", " << getEncoding();
  printer << ">";
}

LogicalResult
SharedTileType::verify(function_ref<InFlightDiagnostic()> emitError,
                       ArrayRef<int64_t> shape, Type elementType,
                       Attribute encoding) {
  if (llvm::any_of(shape, [](int64_t d) { return d <= 0; }))
    return emitError() << "shared tiles have static, non-empty dimensions";
  if (!encoding) {
    if (shape.size() != 1 || !elementType.isInteger(64))
      return emitError() << "a shared buffer without encoding holds "
                            "mbarriers: rank 1 and i64";
    return success();
  }
  auto shared = dyn_cast<SharedEncodingAttr>(encoding);
  if (!shared)
    return emitError() << "shared tiles take a #sagegpu.shared encoding, not "
                       << encoding;
  // A ring's encoding lays out each of its tiles.
  if (shape.size() != 2 && shape.size() != 3)
    return emitError() << "shared tiles have rank 2 (rank 3: a ring of them)";
  return shared.verifyEncoding(shape.take_back(2), elementType, emitError);
}

int64_t SharedTileType::getNumElements() const {
  int64_t n = 1;
  for (int64_t d : getShape())
    n *= d;
  return n;
}

int64_t SharedTileType::getSizeInBytes() const {
  return getNumElements() * getElementType().getIntOrFloatBitWidth() / 8;
}

sage::layout::LinearLayout SharedTileType::getLinearLayout() const {
  assert(getShape().size() == 2 && "a tile's layout (a ring has one per slot)");
  return cast<SharedEncodingAttr>(getEncoding()).toLinearLayout(getShape());
}
