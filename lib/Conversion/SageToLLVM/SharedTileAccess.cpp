//===- SharedTileAccess.cpp - addresses inside shared tiles ---------------===//

#include "sage/Conversion/SageToLLVM/SharedTileAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

SharedTileAccess::SharedTileAccess(sagegpu::SharedTileType type, Value base)
    : linear(type.getLinearLayout()),
      elemBytes(type.getElementType().getIntOrFloatBitWidth() / 8), base(base) {
}

int64_t SharedTileAccess::byteOffset(layout::Coord c) const {
  std::optional<int64_t> offset = linear.getOffset(c);
  assert(offset && "coordinate outside the shared tile");
  return *offset * elemBytes;
}

int64_t SharedTileAccess::threadMask(ArrayRef<layout::Coord> laneBases,
                                     ArrayRef<layout::Coord> warpBases) const {
  int64_t mask = 0;
  for (ArrayRef<layout::Coord> bases : {laneBases, warpBases})
    for (layout::Coord basis : bases)
      mask |= byteOffset(basis);
  return mask;
}

Value SharedTileAccess::threadByteOffset(
    ThreadCoords &c, ArrayRef<layout::Coord> laneBases,
    ArrayRef<layout::Coord> warpBases) const {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  Value acc = c.constant(0);
  for (auto [bases, id] : {std::pair{laneBases, c.lane}, {warpBases, c.warp}}) {
    for (unsigned bit = 0; bit < bases.size();) {
      int64_t image = byteOffset(bases[bit]);
      if (image == 0) {
        ++bit;
        continue;
      }
      // A run of bits whose images double is one field of the id.
      unsigned run = 1;
      if (llvm::isPowerOf2_64(image))
        while (bit + run < bases.size() &&
               byteOffset(bases[bit + run]) == image << run)
          ++run;
      Value field = arith::AndIOp::create(
          b, loc, arith::ShRUIOp::create(b, loc, id, c.constant(bit)),
          c.constant((1 << run) - 1));
      acc = arith::XOrIOp::create(
          b, loc, acc, arith::MulIOp::create(b, loc, field, c.constant(image)));
      bit += run;
    }
  }
  return acc;
}

Value SharedTileAccess::combine(ThreadCoords &c, Value thread, int64_t mask,
                                int64_t offset) {
  if (offset == 0)
    return thread;
  if ((mask & offset) == 0)
    return arith::AddIOp::create(c.b, c.loc, thread, c.constant(offset));
  return arith::XOrIOp::create(c.b, c.loc, thread, c.constant(offset));
}

Value SharedTileAccess::pointer(OpBuilder &b, Location loc,
                                Value offset) const {
  return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base,
                             ValueRange{offset});
}

Value SharedTileAccess::address(OpBuilder &b, Location loc,
                                Value offset) const {
  return LLVM::PtrToIntOp::create(b, loc, b.getI32Type(),
                                  pointer(b, loc, offset));
}

SmallVector<Value> mlir::sage::accessSharedTile(ThreadCoords &c,
                                                const SharedTileAccess &tile,
                                                const TileDistribution &dist,
                                                ValueRange values, bool store) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  const layout::LinearLayout &l = dist.getLayout();
  ArrayRef<layout::Coord> lane = l.getBases(layout::InDim::Lane);
  ArrayRef<layout::Coord> warp = l.getBases(layout::InDim::Warp);
  ArrayRef<layout::Coord> regs = l.getBases(layout::InDim::Register);
  int64_t mask = tile.threadMask(lane, warp);
  Value thread = tile.threadByteOffset(c, lane, warp);
  Type elem = dist.getType().getElementType();
  int64_t eb = tile.getElementBytes();

  // Vector width: the first register bits step through consecutive
  // elements, up to 16 bytes, and no other bit touches those offsets.
  int64_t width = 1;
  for (unsigned i = 0; i < regs.size() && width * eb < 16; ++i) {
    if (tile.byteOffset(regs[i]) != width * eb)
      break;
    width *= 2;
  }
  auto others = [&](int64_t w) {
    int64_t m = mask;
    for (unsigned i = llvm::Log2_64(w); i < regs.size(); ++i)
      m |= tile.byteOffset(regs[i]);
    return m;
  };
  while (width > 1 && (others(width) & (width * eb - 1)) != 0)
    width /= 2;

  Type vecType = width == 1 ? elem : Type(VectorType::get({width}, elem));
  SmallVector<Value> out;
  for (int64_t r = 0; r < dist.getNumElements(); r += width) {
    Value offset = SharedTileAccess::combine(
        c, thread, mask, tile.byteOffset(dist.slotOffset(r)));
    Value ptr = tile.pointer(b, loc, offset);
    if (store) {
      if (dist.isSlotCopy(r))
        continue;
      Value v = values[r];
      if (width > 1) {
        v = LLVM::PoisonOp::create(b, loc, vecType);
        for (int64_t j = 0; j < width; ++j)
          v = LLVM::InsertElementOp::create(
              b, loc, v, values[r + j],
              arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
      }
      LLVM::StoreOp::create(b, loc, v, ptr, /*alignment=*/width * eb);
      continue;
    }
    Value v = LLVM::LoadOp::create(b, loc, vecType, ptr, width * eb);
    if (width == 1) {
      out.push_back(v);
      continue;
    }
    for (int64_t j = 0; j < width; ++j)
      out.push_back(LLVM::ExtractElementOp::create(
          b, loc, v,
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j))));
  }
  return out;
}
