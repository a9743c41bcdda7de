//===- HostTensorMaps.cpp - tensor maps the launcher encodes --------------===//
//
// A TMA tensor map built on the device costs every program a few dozen
// tensormap.replace writes, a release to global memory and an acquire
// fence before its first copy; a map whose view the kernel's arguments
// determine can instead be encoded once per launch on the host and read
// from the kernel's parameters. This pass moves every such map to a new
// kernel argument that records, as host expressions, how to compute its
// fields (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/IR/TensorMapGeometry.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

namespace mlir::sagegpu {
#define GEN_PASS_DEF_SAGEGPUHOSTTENSORMAPS
#include "sage/Dialect/SageGPU/Transforms/Passes.h.inc"
} // namespace mlir::sagegpu

using namespace mlir;
using namespace mlir::sage;

namespace {

/// Host expressions of the integer (i32, i64) and pointer values of one
/// kernel, memoised.
class HostExpressions {
public:
  explicit HostExpressions(func::FuncOp func) : func(func) {}

  /// The expression of `v`, or nullopt when it depends on anything but the
  /// kernel's arguments and constants.
  std::optional<std::string> of(Value v) {
    if (auto it = memo.find(v); it != memo.end())
      return it->second;
    std::optional<std::string> expr = compute(v);
    memo[v] = expr;
    return expr;
  }

  /// `of(v)` times `scale` (64-bit; a constant is multiplied out).
  std::optional<std::string> scaled(Value v, int64_t scale) {
    std::optional<std::string> expr = of(v);
    if (!expr || scale == 1)
      return expr;
    APInt constant;
    if (matchPattern(v, m_ConstantInt(&constant)))
      return std::to_string(constant.getSExtValue() * scale);
    return "mul64(" + *expr + "," + std::to_string(scale) + ")";
  }

private:
  static std::optional<unsigned> widthOf(Type type) {
    if (isa<PtrType>(type))
      return 64;
    if (type.isInteger(32) || type.isInteger(64))
      return type.getIntOrFloatBitWidth();
    return std::nullopt;
  }

  std::optional<std::string> binary(StringRef name, Operation *op) {
    std::optional<unsigned> width = widthOf(op->getResult(0).getType());
    std::optional<std::string> lhs = of(op->getOperand(0));
    std::optional<std::string> rhs = of(op->getOperand(1));
    if (!width || !lhs || !rhs)
      return std::nullopt;
    return (name + Twine(*width) + "(" + *lhs + "," + *rhs + ")").str();
  }

  std::optional<std::string> compute(Value v) {
    if (!widthOf(v.getType()))
      return std::nullopt;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &func.getBody().front())
        return std::nullopt;
      return "a" + std::to_string(arg.getArgNumber());
    }
    Operation *op = v.getDefiningOp();
    APInt constant;
    if (matchPattern(v, m_ConstantInt(&constant)))
      return std::to_string(constant.getSExtValue());
    if (isa<arith::AddIOp>(op))
      return binary("add", op);
    if (isa<arith::SubIOp>(op))
      return binary("sub", op);
    if (isa<arith::MulIOp>(op))
      return binary("mul", op);
    if (isa<arith::DivSIOp>(op))
      return binary("div", op);
    if (isa<arith::RemSIOp>(op))
      return binary("rem", op);
    if (isa<arith::MinSIOp>(op))
      return binary("min", op);
    if (isa<arith::MaxSIOp>(op))
      return binary("max", op);
    if (auto ext = dyn_cast<arith::ExtSIOp>(op))
      return of(ext.getIn()); // values are held sign-extended
    if (auto ext = dyn_cast<arith::ExtUIOp>(op)) {
      std::optional<unsigned> width = widthOf(ext.getIn().getType());
      std::optional<std::string> in = of(ext.getIn());
      if (!width || !in)
        return std::nullopt;
      return "zext" + std::to_string(*width) + "(" + *in + ")";
    }
    if (auto trunc = dyn_cast<arith::TruncIOp>(op)) {
      std::optional<std::string> in = of(trunc.getIn());
      if (!in)
        return std::nullopt;
      return "trunc" + std::to_string(*widthOf(trunc.getType())) + "(" + *in +
             ")";
    }
    if (auto add = dyn_cast<AddPtrOp>(op)) {
      int64_t bytes =
          add.getPtr().getType().getPointeeType().getIntOrFloatBitWidth() / 8;
      std::optional<std::string> base = of(add.getPtr());
      std::optional<std::string> offset = scaled(add.getOffset(), bytes);
      if (!base || !offset)
        return std::nullopt;
      return "add64(" + *base + "," + *offset + ")";
    }
    return std::nullopt;
  }

  func::FuncOp func;
  DenseMap<Value, std::optional<std::string>> memo;
};

/// The `sage.host_tensor_map` dictionary of `op`, or null when a field
/// depends on the program.
DictionaryAttr hostRecipe(MakeTensorMapOp op, HostExpressions &exprs) {
  Builder b(op.getContext());
  TensorMapGeometry geometry = getTensorMapGeometry(op);
  std::optional<std::string> address = exprs.of(op.getPtr());
  if (!address)
    return {};
  SmallVector<Attribute> dims, strides;
  SmallVector<int64_t> box;
  for (const TensorMapDim &dim : geometry.dims) {
    std::optional<std::string> extent =
        exprs.scaled(op.getBounds()[dim.bound], dim.boundScale);
    if (!extent)
      return {};
    dims.push_back(b.getStringAttr(*extent));
    box.push_back(dim.box);
    if (!dim.stride)
      continue;
    std::optional<std::string> stride =
        exprs.scaled(op.getStrides()[*dim.stride], dim.strideScale);
    if (!stride)
      return {};
    strides.push_back(b.getStringAttr(*stride));
  }
  return b.getDictionaryAttr({
      b.getNamedAttr("address", b.getStringAttr(*address)),
      b.getNamedAttr("dims", b.getArrayAttr(dims)),
      b.getNamedAttr("strides", b.getArrayAttr(strides)),
      b.getNamedAttr("box", b.getDenseI64ArrayAttr(box)),
      b.getNamedAttr("element_type", b.getI64IntegerAttr(geometry.elementType)),
      b.getNamedAttr("swizzle", b.getI64IntegerAttr(geometry.swizzleMode)),
  });
}

void hostTensorMaps(func::FuncOp func) {
  SmallVector<MakeTensorMapOp> maps;
  func.walk([&](MakeTensorMapOp op) { maps.push_back(op); });
  if (maps.empty())
    return;
  Value scratch = maps.front().getScratch();
  HostExpressions exprs(func);
  MLIRContext *ctx = func.getContext();
  DenseMap<DictionaryAttr, Value> arguments;
  SmallVector<MakeTensorMapOp> onDevice;
  for (MakeTensorMapOp op : maps) {
    DictionaryAttr recipe = hostRecipe(op, exprs);
    if (!recipe) {
      onDevice.push_back(op);
      continue;
    }
    Value &arg = arguments[recipe];
    if (!arg) {
      unsigned index = func.getNumArguments();
      (void)func.insertArgument(
          index, TensorMapType::get(ctx),
          DictionaryAttr::get(
              ctx,
              {NamedAttribute(
                  StringAttr::get(ctx, SageDialect::kHostTensorMapAttrName),
                  recipe)}),
          op.getLoc());
      arg = func.getArgument(index);
    }
    op.getResult().replaceAllUsesWith(arg);
    op.erase();
  }
  // The device maps keep the scratch, in slots 0 .. n-1 (in their old
  // order; promote-operands gives every map a slot of its own).
  llvm::sort(onDevice, [](MakeTensorMapOp a, MakeTensorMapOp b) {
    return a.getSlot() < b.getSlot();
  });
  for (auto [slot, op] : llvm::enumerate(onDevice))
    op.setSlot(slot);
  if (!onDevice.empty()) {
    func->setAttr(SageDialect::kGlobalScratchAttrName,
                  Builder(ctx).getI64IntegerAttr(int64_t(onDevice.size()) *
                                                 MakeTensorMapOp::kBytes));
    return;
  }
  func->removeAttr(SageDialect::kGlobalScratchAttrName);
  if (auto arg = dyn_cast<BlockArgument>(scratch);
      arg && arg.use_empty() && arg.getOwner() == &func.getBody().front())
    (void)func.eraseArgument(arg.getArgNumber());
}

struct HostTensorMapsPass
    : public sagegpu::impl::SageGPUHostTensorMapsBase<HostTensorMapsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto where =
        module->getAttrOfType<StringAttr>(SageDialect::kTensorMapsAttrName);
    if (where && where.getValue() == "device")
      return;
    module.walk([](func::FuncOp func) {
      if (func->hasAttr(SageDialect::kKernelAttrName))
        hostTensorMaps(func);
    });
  }
};

} // namespace
