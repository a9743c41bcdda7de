//===- SageDialect.cpp - dialect registration and attribute checks --------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::sage;

#include "sage/Dialect/Sage/IR/SageDialect.cpp.inc"

void SageDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "sage/Dialect/Sage/IR/SageOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
}

unsigned SageDialect::getNumWarps(ModuleOp module) {
  if (auto warps = module->getAttrOfType<IntegerAttr>(kNumWarpsAttrName))
    return warps.getInt();
  return 4;
}

std::optional<unsigned> SageDialect::getMaxnreg(ModuleOp module) {
  if (auto regs = module->getAttrOfType<IntegerAttr>(kMaxnregAttrName))
    return regs.getInt();
  return std::nullopt;
}

unsigned SageDialect::getNumCtas(ModuleOp module) {
  if (auto ctas = module->getAttrOfType<IntegerAttr>(kNumCtasAttrName))
    return ctas.getInt();
  return 1;
}

std::optional<TargetInfo> SageDialect::getTarget(ModuleOp module) {
  auto arch = module->getAttrOfType<StringAttr>(kTargetAttrName);
  return arch ? TargetInfo::get(arch.getValue()) : std::nullopt;
}

/// A `sage.host_tensor_map` dictionary: host expressions for the address,
/// each extent and each stride (one fewer: dimension 0 has none), a box per
/// dimension, the element type and swizzle codes; on a !sage.tensor_map
/// argument (or its lowered pointer).
static LogicalResult verifyHostTensorMap(Operation *op, unsigned argIndex,
                                         NamedAttribute attr) {
  auto fail =
      [&]() {
        return op->emitError()
               << "'" << attr.getName().getValue() << "' of argument "
               << argIndex
               << " must be a dictionary of address (string), dims and strides "
                  "(arrays of strings, one stride fewer than dims, 2 to 5 "
                  "dims), box (i64 array, one per dim), element_type and "
                  "swizzle (integers)";
      };
  auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
  if (!dict || dict.size() != 6)
    return fail();
  auto strings = [](Attribute a) -> std::optional<size_t> {
    auto array = dyn_cast_or_null<ArrayAttr>(a);
    if (!array || !llvm::all_of(array, llvm::IsaPred<StringAttr>))
      return std::nullopt;
    return array.size();
  };
  std::optional<size_t> dims = strings(dict.get("dims"));
  std::optional<size_t> strides = strings(dict.get("strides"));
  auto box = dyn_cast_or_null<DenseI64ArrayAttr>(dict.get("box"));
  if (!isa_and_nonnull<StringAttr>(dict.get("address")) || !dims || *dims < 2 ||
      *dims > 2 + kMaxLeadingDims || !strides || *strides + 1 != *dims ||
      !box || size_t(box.size()) != *dims ||
      !isa_and_nonnull<IntegerAttr>(dict.get("element_type")) ||
      !isa_and_nonnull<IntegerAttr>(dict.get("swizzle")))
    return fail();
  if (auto func = dyn_cast<FunctionOpInterface>(op)) {
    Type type = func.getArgumentTypes()[argIndex];
    if (!isa<TensorMapType, LLVM::LLVMPointerType>(type))
      return op->emitError()
             << "'" << attr.getName().getValue() << "' of argument " << argIndex
             << " needs a !sage.tensor_map argument";
  }
  return success();
}

LogicalResult SageDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kHostTensorMapAttrName)
    return verifyHostTensorMap(op, argIndex, attr);
  bool isAlignment = name == kAlignmentAttrName;
  if (!isAlignment && name != kDivisibilityAttrName)
    return op->emitError() << "unknown sage argument attribute '" << name
                           << "'";
  auto value = dyn_cast<IntegerAttr>(attr.getValue());
  if (!value || value.getInt() <= 0 || !llvm::isPowerOf2_64(value.getInt()))
    return op->emitError() << "'" << name << "' of argument " << argIndex
                           << " must be a positive power of two";
  // Only the function's own arguments carry hints; they describe its type.
  Type type;
  if (auto func = dyn_cast<FunctionOpInterface>(op))
    type = func.getArgumentTypes()[argIndex];
  if (isAlignment && !isa_and_nonnull<PtrType>(type))
    return op->emitError() << "'" << name << "' of argument " << argIndex
                           << " needs a !sage.ptr argument";
  if (!isAlignment && !isa_and_nonnull<IntegerType>(type))
    return op->emitError() << "'" << name << "' of argument " << argIndex
                           << " needs an integer argument";
  return success();
}

/// A function's byte count: a non-negative integer, a multiple of `unit`.
static LogicalResult verifyFunctionBytes(Operation *op, NamedAttribute attr,
                                         int64_t unit) {
  StringRef name = attr.getName().getValue();
  auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
  if (!isa<FunctionOpInterface>(op))
    return op->emitError() << "'" << name << "' applies to functions only";
  if (!bytes || bytes.getInt() < 0 || bytes.getInt() % unit != 0) {
    InFlightDiagnostic diag = op->emitError() << "'" << name << "' must be a ";
    if (unit == 1)
      return diag << "non-negative integer";
    return diag << "non-negative multiple of " << unit;
  }
  return success();
}

/// A unit attribute on a function.
static LogicalResult verifyFunctionUnit(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (!isa<FunctionOpInterface>(op))
    return op->emitError() << "'" << name << "' applies to functions only";
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitError() << "'" << name << "' must be a unit attribute";
  return success();
}

LogicalResult SageDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kKernelAttrName) {
    // The attribute survives the lowering from func.func to llvm.func.
    if (failed(verifyFunctionUnit(op, attr)))
      return failure();
    if (!cast<FunctionOpInterface>(op).getResultTypes().empty())
      return op->emitError() << "a sage kernel must not return values";
    return success();
  }
  if (name == kSharedMemoryAttrName)
    return verifyFunctionBytes(op, attr, 1);
  if (name == kGlobalScratchAttrName) {
    if (failed(verifyFunctionBytes(op, attr, MakeTensorMapOp::kBytes)))
      return failure();
    auto func = cast<FunctionOpInterface>(op);
    auto bytes = cast<IntegerAttr>(attr.getValue());
    // The launcher passes the scratch address as the last argument but the
    // host tensor maps (checked while the signature still has sage types;
    // the lowering keeps the order).
    ArrayRef<Type> args = func.getArgumentTypes();
    while (!args.empty() && isa<TensorMapType>(args.back()))
      args = args.drop_back();
    bool sageTyped = llvm::any_of(args, llvm::IsaPred<PtrType>);
    auto last = args.empty() ? PtrType() : dyn_cast<PtrType>(args.back());
    if (bytes.getInt() > 0 && sageTyped &&
        (!last || !last.getPointeeType().isInteger(8)))
      return op->emitError() << "'" << name
                             << "' needs a last argument of type "
                                "!sage.ptr<i8> (the scratch address)";
    return success();
  }
  if (name == kTargetAttrName) {
    auto arch = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name << "' applies to modules only";
    if (!arch || !TargetInfo::get(arch.getValue())) {
      InFlightDiagnostic diag = op->emitError()
                                << "'" << name << "' must be one of ";
      llvm::interleaveComma(TargetInfo::supportedArchs(), diag,
                            [&](StringRef a) { diag << "\"" << a << "\""; });
      return diag;
    }
    return success();
  }
  if (name == kNumWarpsAttrName) {
    auto warps = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name << "' applies to modules only";
    if (!warps || !llvm::is_contained({1, 2, 4, 8, 16}, warps.getInt()))
      return op->emitError()
             << "'" << name << "' must be an integer in {1, 2, 4, 8, 16}";
    return success();
  }
  if (name == kNumStagesAttrName) {
    auto stages = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<scf::ForOp>(op))
      return op->emitError() << "'" << name << "' applies to scf.for only";
    if (!stages || stages.getInt() < 1)
      return op->emitError() << "'" << name << "' must be a positive integer";
    return success();
  }
  if (name == kPingPongAttrName) {
    if (!isa<scf::ForOp>(op))
      return op->emitError() << "'" << name << "' applies to scf.for only";
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a unit attribute";
    if (!op->hasAttr(kWarpSpecializeAttrName))
      return op->emitError()
             << "'" << name << "' needs '" << kWarpSpecializeAttrName
             << "': the consumer warpgroups of a "
                "warp-specialised loop take turns";
    return success();
  }
  if (name == kWarpSpecializeAttrName) {
    if (!isa<scf::ForOp>(op))
      return op->emitError() << "'" << name << "' applies to scf.for only";
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a unit attribute";
    return success();
  }
  if (name == kEarlyLaunchAttrName)
    return verifyFunctionUnit(op, attr);
  if (name == kProducerWarpsAttrName) {
    auto warps = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << name << "' applies to functions only";
    if (!warps || warps.getInt() <= 0 || warps.getInt() % 4 != 0)
      return op->emitError()
             << "'" << name
             << "' must be a positive multiple of 4 (warpgroups)";
    return success();
  }
  if (name == kMaxnregAttrName) {
    auto regs = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name << "' applies to modules only";
    if (!regs || regs.getInt() < kMinMaxnreg || regs.getInt() > kMaxMaxnreg)
      return op->emitError() << "'" << name << "' must be an integer from "
                             << kMinMaxnreg << " to " << kMaxMaxnreg;
    return success();
  }
  if (name == kNumCtasAttrName) {
    auto ctas = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name << "' applies to modules only";
    if (!ctas || ctas.getInt() < 1 || ctas.getInt() > kMaxNumCtas)
      return op->emitError()
             << "'" << name << "' must be an integer from 1 to " << kMaxNumCtas;
    return success();
  }
  if (name == kTensorMapsAttrName) {
    auto where = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name << "' applies to modules only";
    if (!where || !llvm::is_contained({"host", "device"}, where.getValue()))
      return op->emitError()
             << "'" << name << "' must be \"host\" or \"device\"";
    return success();
  }
  return op->emitError() << "unknown sage attribute '" << name << "'";
}
