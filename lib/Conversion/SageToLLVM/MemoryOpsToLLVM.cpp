//===- MemoryOpsToLLVM.cpp - masked tile loads and stores -----------------===//
//
// Each thread moves the elements it holds. Out-of-bounds elements are masked
// with predicated PTX (`@p ld.global`), as a branch per element would be far
// slower; loads yield 0 there. Where a run of a thread's register bits steps
// through consecutive elements of a row that the view keeps contiguous and
// aligned (proven from the kernel-argument hints,
// sage/Dialect/Sage/IR/Divisibility.h) and whose bound cuts no vector in two,
// those slots move as one access of up to 16 bytes; in a transposed view
// (unit stride along rows) the same holds for consecutive elements of a
// column. The run need not start at the first register bit: a tile that
// holds a few rows and columns per thread is loaded along its rows and
// stored along its columns with vectors both ways. Along a dimension whose
// offset and bound are multiples of the tile's extent, the tile is wholly in or
// out of bounds: one check serves all its elements.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/Divisibility.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Matchers.h"

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

/// sigma16Token(slot) (include/sage/Layout/Encodings.h) of an i64 index:
/// slot bits s3 s2 s1 s0 hold token bits t2 t1 t3 t0.
static Value sigma16TokenOf(OpBuilder &b, Location loc, Value slot) {
  auto c = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value kept = arith::AndIOp::create(b, loc, slot, c(~int64_t(14)));
  Value low = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, slot, c(1)), c(6));
  Value high = arith::AndIOp::create(
      b, loc, arith::ShLIOp::create(b, loc, slot, c(2)), c(8));
  return arith::OrIOp::create(b, loc, kept,
                              arith::OrIOp::create(b, loc, low, high));
}

/// `wholeTileDims` (bit d: dimension d) are checked once for the whole tile:
/// with offset a*E and bound b*E (E the tile's extent, 0 <= i < E), a*E + i
/// lies in [0, b*E) exactly when a*E does.
static ElementAccess
computeAccess(OpBuilder &b, Location loc, const TileDistribution &dist,
              Type elem, Value base, ArrayRef<ValueRange> offsetRanges,
              ArrayRef<ValueRange> strideRanges,
              ArrayRef<ValueRange> boundRanges, unsigned wholeTileDims,
              bool sigma16Rows = false) {
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
  auto inBounds = [&](Value at, Value bound) {
    Value lo =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, at, zero);
    Value hi =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, at, bound);
    return arith::AndIOp::create(b, loc, lo, hi);
  };
  std::array<Value, 2> wholeTile;
  for (unsigned d = 0; d < 2; ++d)
    if (wholeTileDims & (1u << d))
      wholeTile[d] = inBounds(offsets[d], bounds[d]);
  std::array<DenseMap<Value, Along>, 2> along;
  auto get = [&](unsigned d, Value coord) -> Along {
    auto [it, inserted] = along[d].try_emplace(coord);
    if (inserted) {
      Value index = arith::ExtUIOp::create(b, loc, i64, coord);
      if (d == 0 && sigma16Rows)
        index = sigma16TokenOf(b, loc, index);
      Value at = arith::AddIOp::create(b, loc, index, offsets[d]);
      it->second = {wholeTile[d] ? wholeTile[d] : inBounds(at, bounds[d]),
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

/// Most bytes one access moves.
constexpr int64_t kMaxAccessBytes = 16;

} // namespace

/// A vector access: `width` elements in the slots that differ only in the
/// register bits [bit, bit + log2(width)).
struct VectorShape {
  int64_t width = 1;
  unsigned bit = 0;
};

/// The vector shape for a tile of `dist` in the view (ptr, offsets, strides,
/// bounds) of the unconverted op, along the view's unit-stride dimension `u`
/// (the columns, or the rows of a transposed view): a run of register bits
/// whose bases step through consecutive elements along `u` (1, 2, 4, ...),
/// every other basis keeping whole vectors together, and the pointer, the
/// other stride, the offset and the bound along `u` keeping vectors aligned
/// and wholly in or out of bounds. Rows read in sigma16 order are not
/// consecutive.
static VectorShape vectorShape(const TileDistribution &dist, int64_t elemBytes,
                               Value ptr, OperandRange offsets,
                               OperandRange strides, OperandRange bounds,
                               bool sigma16Rows = false) {
  if (offsets.size() != 2)
    return {};
  auto isUnit = [](Value stride) {
    APInt unit;
    return matchPattern(stride, m_ConstantInt(&unit)) && unit == 1;
  };
  unsigned u = isUnit(strides[1]) ? 1 : 0;
  if (!isUnit(strides[u]) || (u == 0 && sigma16Rows))
    return {};
  const layout::LinearLayout &l = dist.getLayout();
  ArrayRef<layout::Coord> regs = l.getBases(layout::InDim::Register);
  auto step = [&](int64_t n) {
    layout::Coord c;
    c[u] = int32_t(n);
    return c;
  };
  VectorShape shape;
  const auto *first = llvm::find(regs, step(1));
  if (first == regs.end())
    return {};
  shape.bit = unsigned(first - regs.begin());
  unsigned bits = 0;
  while (shape.width * elemBytes < kMaxAccessBytes &&
         shape.bit + bits < regs.size() &&
         regs[shape.bit + bits] == step(shape.width)) {
    shape.width *= 2;
    ++bits;
  }
  auto keepsVectors = [&](int64_t w) {
    unsigned runBits = llvm::Log2_64(w);
    for (layout::InDim dim :
         {layout::InDim::Register, layout::InDim::Lane, layout::InDim::Warp}) {
      ArrayRef<layout::Coord> bases = l.getBases(dim);
      for (unsigned i = 0; i < bases.size(); ++i) {
        bool inRun = dim == layout::InDim::Register && i >= shape.bit &&
                     i < shape.bit + runBits;
        if (!inRun && bases[i][u] % w != 0)
          return false;
      }
    }
    int64_t bytes = w * elemBytes;
    return knownAlignment(ptr) >= bytes &&
           knownDivisor(strides[1 - u]) * elemBytes >= bytes &&
           knownDivisor(offsets[u]) >= w && knownDivisor(bounds[u]) >= w;
  };
  while (shape.width > 1 && !keepsVectors(shape.width))
    shape.width /= 2;
  if (shape.width == 1)
    shape.bit = 0;
  return shape;
}

/// The slots of each vector of `shape` among `count` slots: groups in
/// order of their first slot, each in element order.
static SmallVector<SmallVector<int64_t>> vectorSlots(int64_t count,
                                                     VectorShape shape) {
  SmallVector<SmallVector<int64_t>> groups;
  int64_t runMask = (shape.width - 1) << shape.bit;
  for (int64_t r = 0; r < count; ++r) {
    if (r & runMask)
      continue;
    SmallVector<int64_t> &group = groups.emplace_back();
    for (int64_t j = 0; j < shape.width; ++j)
      group.push_back(r | (j << shape.bit));
  }
  return groups;
}

/// The view dimensions (bit mask) along which a tile of `shape` at
/// `offsets` lies wholly in or out of `bounds`: its extent divides both.
static unsigned wholeTileDims(ArrayRef<int64_t> shape, OperandRange offsets,
                              OperandRange bounds) {
  unsigned dims = 0;
  if (offsets.size() != 2)
    return dims;
  for (unsigned d = 0; d < 2; ++d)
    if (knownDivisor(offsets[d]) % shape[d] == 0 &&
        knownDivisor(bounds[d]) % shape[d] == 0)
      dims |= 1u << d;
  return dims;
}

void mlir::sage::recordAccessFacts(ModuleOp module, bool vectorAtomics) {
  Builder b(module.getContext());
  auto record = [&](Operation *op, Type tile, Value ptr, OperandRange offsets,
                    OperandRange strides, OperandRange bounds,
                    bool vectorize = true, bool sigma16Rows = false) {
    std::optional<TileDistribution> dist = TileDistribution::get(tile);
    if (!dist)
      return;
    auto type = cast<RankedTensorType>(tile);
    VectorShape shape =
        vectorize ? vectorShape(*dist, type.getElementTypeBitWidth() / 8, ptr,
                                offsets, strides, bounds, sigma16Rows)
                  : VectorShape();
    if (shape.width > 1)
      op->setAttr(kVectorWidthAttrName, b.getI64IntegerAttr(shape.width));
    if (shape.bit > 0)
      op->setAttr(kVectorRegisterBitAttrName, b.getI64IntegerAttr(shape.bit));
    if (unsigned dims = wholeTileDims(type.getShape(), offsets, bounds))
      op->setAttr(kWholeTileDimsAttrName, b.getI64IntegerAttr(dims));
  };
  module.walk([&](Operation *op) {
    if (auto load = dyn_cast<LoadOp>(op)) {
      record(op, load.getResult().getType(), load.getPtr(), load.getOffsets(),
             load.getStrides(), load.getBounds(), /*vectorize=*/true,
             load.getSigma16Rows());
    } else if (auto store = dyn_cast<StoreOp>(op)) {
      auto type = cast<RankedTensorType>(store.getValue().getType());
      record(op, type, store.getPtr(), store.getOffsets(), store.getStrides(),
             store.getBounds(),
             !store.getAtomicAdd() ||
                 (vectorAtomics && type.getElementType().isF32()));
    }
  });
}

/// The vector shape recordAccessFacts wrote on `op` (width 1: none).
static VectorShape recordedShape(Operation *op) {
  VectorShape shape;
  if (auto width = op->getAttrOfType<IntegerAttr>(kVectorWidthAttrName))
    shape.width = width.getInt();
  if (auto bit = op->getAttrOfType<IntegerAttr>(kVectorRegisterBitAttrName))
    shape.bit = unsigned(bit.getInt());
  return shape;
}

/// The whole-tile dimensions recordAccessFacts wrote on `op` (0: none).
static unsigned recordedWholeTileDims(Operation *op) {
  auto attr = op->getAttrOfType<IntegerAttr>(kWholeTileDimsAttrName);
  return attr ? unsigned(attr.getInt()) : 0;
}

namespace {

/// How an access of `bytes` (2 to 16) travels through inline PTX: its
/// registers (one, or two b64 for 16 bytes) and their LLVM type.
struct VectorRegisters {
  int64_t count;
  Type type;
  StringRef constraint, ptxType;
};

static VectorRegisters vectorRegisters(OpBuilder &b, int64_t bytes) {
  switch (bytes) {
  case 2:
    return {1, b.getI16Type(), "h", "b16"};
  case 4:
    return {1, b.getI32Type(), "r", "b32"};
  case 8:
    return {1, b.getI64Type(), "l", "b64"};
  default:
    return {2, b.getI64Type(), "l", "b64"};
  }
}

/// `w` consecutive elements loaded at `addr` when `ok` (else zeros).
static SmallVector<Value> loadVector(OpBuilder &b, Location loc, Type elem,
                                     int64_t w, Value addr, Value ok) {
  int64_t bytes = w * elem.getIntOrFloatBitWidth() / 8;
  VectorRegisters vr = vectorRegisters(b, bytes);
  SmallVector<Value, 2> regs;
  if (vr.count == 1) {
    regs.push_back(
        inlinePtx(b, loc, vr.type, {addr, ok},
                  ("mov." + vr.ptxType + " $0, 0;\n\t@$2 ld.global." +
                   vr.ptxType + " $0, [$1];")
                      .str(),
                  ("=" + vr.constraint + ",l,b").str()));
  } else {
    auto pair =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {vr.type, vr.type});
    Value v = inlinePtx(
        b, loc, pair, {addr, ok},
        "mov.b64 $0, 0;\n\tmov.b64 $1, 0;\n\t@$3 ld.global.v2.b64 {$0, $1}, "
        "[$2];",
        "=l,=l,l,b");
    for (int64_t i = 0; i < 2; ++i)
      regs.push_back(LLVM::ExtractValueOp::create(b, loc, v, i));
  }
  // The registers, as the vector they pack, as the w elements.
  Type packed = VectorType::get({vr.count}, vr.type);
  Value raw = LLVM::PoisonOp::create(b, loc, packed);
  for (auto [i, reg] : llvm::enumerate(regs))
    raw = LLVM::InsertElementOp::create(
        b, loc, raw, reg,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(i))));
  Value vec = LLVM::BitcastOp::create(b, loc, VectorType::get({w}, elem), raw);
  SmallVector<Value> out;
  for (int64_t j = 0; j < w; ++j)
    out.push_back(LLVM::ExtractElementOp::create(
        b, loc, vec,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j))));
  return out;
}

/// Stores `values` (consecutive elements) at `addr` when `ok`.
static void storeVector(OpBuilder &b, Location loc, ValueRange values,
                        Value addr, Value ok, bool atomicAdd) {
  Type elem = values.front().getType();
  int64_t w = values.size();
  if (atomicAdd) {
    // One vector reduction of w f32 (sm_90, PTX ISA 8.1): the operands are
    // the values themselves, in order.
    std::string text = "@$" + std::to_string(w + 1) + " red.global.add.v" +
                       std::to_string(w) + ".f32 [$0], {";
    std::string constraints = "l";
    SmallVector<Value> operands{addr};
    for (int64_t j = 0; j < w; ++j) {
      text += (j ? ", $" : "$") + std::to_string(j + 1);
      constraints += ",f";
      operands.push_back(values[j]);
    }
    text += "};";
    operands.push_back(ok);
    inlinePtx(b, loc, Type(), operands, text, constraints + ",b");
    return;
  }
  int64_t bytes = w * elem.getIntOrFloatBitWidth() / 8;
  VectorRegisters vr = vectorRegisters(b, bytes);
  Value vec = LLVM::PoisonOp::create(b, loc, VectorType::get({w}, elem));
  for (auto [j, v] : llvm::enumerate(values))
    vec = LLVM::InsertElementOp::create(
        b, loc, vec, v,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(j))));
  Value packed = LLVM::BitcastOp::create(
      b, loc, VectorType::get({vr.count}, vr.type), vec);
  SmallVector<Value> regs;
  for (int64_t i = 0; i < vr.count; ++i)
    regs.push_back(LLVM::ExtractElementOp::create(
        b, loc, packed,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(i)))));
  if (vr.count == 1)
    inlinePtx(b, loc, Type(), {addr, regs[0], ok},
              ("@$2 st.global." + vr.ptxType + " [$0], $1;").str(),
              ("l," + vr.constraint + ",b").str());
  else
    inlinePtx(b, loc, Type(), {addr, regs[0], regs[1], ok},
              "@$3 st.global.v2.b64 [$0], {$1, $2};", "l,l,l,b");
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
        adaptor.getStrides(), adaptor.getBounds(), recordedWholeTileDims(op),
        op.getSigma16Rows());
    VectorShape shape = recordedShape(op);
    SmallVector<Value> values;
    if (shape.width > 1) {
      values.resize(dist->getNumElements());
      for (ArrayRef<int64_t> slots :
           vectorSlots(dist->getNumElements(), shape)) {
        SmallVector<Value> loaded =
            loadVector(rw, loc, elem, shape.width, access.addresses[slots[0]],
                       access.inBounds[slots[0]]);
        for (auto [slot, value] : llvm::zip(slots, loaded))
          values[slot] = value;
      }
      rw.replaceOpWithMultiple(op, {values});
      return success();
    }
    RegisterClass rc = registerClassFor(rw, elem);
    std::string text = ("mov.b" + Twine(rc.type.getIntOrFloatBitWidth()) +
                        " $0, 0;\n\t@$2 ld.global." + rc.ptxType + " $0, [$1];")
                           .str();
    std::string constraints = ("=" + rc.constraint + ",l,b").str();
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
        adaptor.getStrides(), adaptor.getBounds(), recordedWholeTileDims(op));
    // Only the owning copy of a replicated element writes: required for
    // atomic adds, and it saves redundant stores otherwise.
    ThreadCoords coords(rw, loc);
    Value owner = coords.isOwner(*dist);
    VectorShape shape = recordedShape(op);
    if (shape.width > 1) {
      ValueRange values = adaptor.getValue();
      for (ArrayRef<int64_t> slots :
           vectorSlots(dist->getNumElements(), shape)) {
        if (dist->isSlotCopy(slots[0]))
          continue;
        SmallVector<Value> vector;
        for (int64_t slot : slots)
          vector.push_back(values[slot]);
        storeVector(
            rw, loc, vector, access.addresses[slots[0]],
            arith::AndIOp::create(rw, loc, access.inBounds[slots[0]], owner),
            op.getAtomicAdd());
      }
      rw.eraseOp(op);
      return success();
    }
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
