//===- MemoryOpsToLLVM.cpp - masked tile loads and stores -----------------===//
//
// Each thread moves the elements it holds. Out-of-bounds elements are masked
// with predicated PTX (`@p ld.global`), as a branch per element would be far
// slower; loads yield 0 there.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

/// The PTX register class and constraint letter for a scalar of `bits`.
struct RegisterClass {
  Type type;            // LLVM type the asm operand has
  StringRef constraint; // "h", "r", "f"
  StringRef ptxType;    // ld/st type suffix
};

static RegisterClass registerClassFor(OpBuilder &b, Type elem) {
  unsigned bits = elem.getIntOrFloatBitWidth();
  if (bits == 8)
    return {b.getI16Type(), "h", "u8"};
  if (bits == 16)
    return {b.getI16Type(), "h", "b16"};
  if (elem.isF32())
    return {b.getF32Type(), "f", "f32"};
  return {b.getI32Type(), "r", "b32"};
}

/// Converts between the element type and its asm register type.
static Value toRegister(OpBuilder &b, Location loc, Value v,
                        const RegisterClass &rc) {
  Type t = v.getType();
  if (t == rc.type)
    return v;
  if (t.getIntOrFloatBitWidth() == 8)
    return LLVM::ZExtOp::create(b, loc, rc.type, v);
  return LLVM::BitcastOp::create(b, loc, rc.type, v);
}

static Value fromRegister(OpBuilder &b, Location loc, Value v, Type elem) {
  if (v.getType() == elem)
    return v;
  if (elem.getIntOrFloatBitWidth() == 8)
    return LLVM::TruncOp::create(b, loc, elem, v);
  return LLVM::BitcastOp::create(b, loc, elem, v);
}

/// Address and in-bounds predicate of every element a thread holds.
struct ElementAccess {
  SmallVector<Value> addresses;
  SmallVector<Value> inBounds;
};

static ElementAccess computeAccess(OpBuilder &b, Location loc,
                                   const TileDistribution &dist, Type elem,
                                   Value base,
                                   ArrayRef<ValueRange> offsetRanges,
                                   ArrayRef<ValueRange> strideRanges,
                                   ArrayRef<ValueRange> boundRanges) {
  // Each index operand is one scalar; the 1:N adaptor gives ranges.
  auto flatten = [](ArrayRef<ValueRange> ranges) {
    SmallVector<Value> out;
    for (ValueRange r : ranges)
      out.append(r.begin(), r.end());
    return out;
  };
  SmallVector<Value> offsets = flatten(offsetRanges),
                     strides = flatten(strideRanges),
                     bounds = flatten(boundRanges);
  ThreadCoords coords(b, loc);
  Type i64 = b.getI64Type();
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  // Slots share rows and columns: the index, its bounds check and its
  // address term are built once per distinct coordinate.
  struct Along {
    Value valid, term;
  };
  std::array<DenseMap<Value, Along>, 2> along;
  auto get = [&](unsigned d, Value coord) -> Along {
    auto [it, inserted] = along[d].try_emplace(coord);
    if (inserted) {
      Value at = arith::AddIOp::create(
          b, loc, arith::ExtUIOp::create(b, loc, i64, coord), offsets[d]);
      Value lo =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, at, zero);
      Value hi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, at,
                                       bounds[d]);
      it->second = {arith::AndIOp::create(b, loc, lo, hi),
                    arith::MulIOp::create(b, loc, at, strides[d])};
    }
    return it->second;
  };
  ElementAccess access;
  auto ptrType = base.getType();
  for (auto [row, col] : coords.positions(dist)) {
    Along r = get(0, row), c = get(1, col);
    Value linear = arith::AddIOp::create(b, loc, r.term, c.term);
    access.addresses.push_back(
        LLVM::GEPOp::create(b, loc, ptrType, elem, base, ValueRange{linear}));
    access.inBounds.push_back(arith::AndIOp::create(b, loc, r.valid, c.valid));
  }
  return access;
}

struct LoadLowering : public OpConversionPattern<LoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LoadOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> dist =
        TileDistribution::get(op.getResult().getType());
    if (!dist)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    Location loc = op.getLoc();
    Type elem = op.getResult().getType().getElementType();
    ElementAccess access = computeAccess(
        rw, loc, *dist, elem, adaptor.getPtr().front(), adaptor.getOffsets(),
        adaptor.getStrides(), adaptor.getBounds());
    RegisterClass rc = registerClassFor(rw, elem);
    std::string text = ("mov.b" + Twine(rc.type.getIntOrFloatBitWidth()) +
                        " $0, 0;\n\t@$2 ld.global." + rc.ptxType + " $0, [$1];")
                           .str();
    std::string constraints = ("=" + rc.constraint + ",l,b").str();
    SmallVector<Value> values;
    for (auto [addr, ok] : llvm::zip(access.addresses, access.inBounds)) {
      Value v = inlinePtx(rw, loc, rc.type, {addr, ok}, text, constraints);
      values.push_back(fromRegister(rw, loc, v, elem));
    }
    rw.replaceOpWithMultiple(op, {values});
    return success();
  }
};

struct StoreLowering : public OpConversionPattern<StoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(StoreOp op, OneToNOpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    std::optional<TileDistribution> dist =
        TileDistribution::get(op.getValue().getType());
    if (!dist)
      return rw.notifyMatchFailure(op, "tile has no distributed layout");
    Location loc = op.getLoc();
    Type elem =
        cast<RankedTensorType>(op.getValue().getType()).getElementType();
    ElementAccess access = computeAccess(
        rw, loc, *dist, elem, adaptor.getPtr().front(), adaptor.getOffsets(),
        adaptor.getStrides(), adaptor.getBounds());
    // Only the owning copy of a replicated element writes: required for
    // atomic adds, and it saves redundant stores otherwise.
    ThreadCoords coords(rw, loc);
    Value owner = coords.isOwner(*dist);
    RegisterClass rc = registerClassFor(rw, elem);
    std::string text =
        op.getAtomicAdd()
            ? std::string("@$2 red.global.add.f32 [$0], $1;")
            : ("@$2 st.global." + rc.ptxType + " [$0], $1;").str();
    std::string constraints = ("l," + rc.constraint + ",b").str();
    for (auto [slot, addr, ok, value] : llvm::enumerate(
             access.addresses, access.inBounds, adaptor.getValue())) {
      if (dist->isSlotCopy(slot))
        continue;
      Value pred = arith::AndIOp::create(rw, loc, ok, owner);
      inlinePtx(rw, loc, Type(), {addr, toRegister(rw, loc, value, rc), pred},
                text, constraints);
    }
    rw.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::sage::populateMemoryOpsToLLVMPatterns(const TypeConverter &converter,
                                                 RewritePatternSet &patterns) {
  patterns.add<LoadLowering, StoreLowering>(converter, patterns.getContext());
}
