//===- TileDistribution.cpp - positions from linear layouts ---------------===//

#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Layout/Encodings.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

std::optional<TileDistribution> TileDistribution::get(Type type) {
  std::optional<layout::LinearLayout> linear = sagegpu::getLinearLayout(type);
  if (!linear)
    return std::nullopt;
  return TileDistribution(cast<RankedTensorType>(type), std::move(*linear));
}

ThreadCoords::ThreadCoords(OpBuilder &b, Location loc) : b(b), loc(loc) {
  tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  lane = arith::AndIOp::create(b, loc, tid, constant(layout::kWarpSize - 1));
  warp = arith::ShRUIOp::create(b, loc, tid,
                                constant(llvm::Log2_32(layout::kWarpSize)));
}

Value ThreadCoords::constant(int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

std::pair<Value, Value>
ThreadCoords::threadOffset(const layout::LinearLayout &l) {
  std::array<Value, 2> coord = {constant(0), constant(0)};
  for (auto [dim, id] :
       {std::pair{layout::InDim::Lane, lane}, {layout::InDim::Warp, warp}}) {
    ArrayRef<layout::Coord> bases = l.getBases(dim);
    for (unsigned bit = 0; bit < bases.size();) {
      layout::Coord basis = bases[bit];
      if (basis.isZero()) {
        ++bit;
        continue;
      }
      // A run of bits whose bases double along one coordinate is one field
      // of the id: (id >> bit) & (2^run - 1), scaled by the first basis.
      unsigned d = basis.row != 0 ? 0 : 1;
      unsigned run = 1;
      if (basis[1 - d] == 0 && llvm::isPowerOf2_32(basis[d]))
        while (bit + run < bases.size() && bases[bit + run][1 - d] == 0 &&
               bases[bit + run][d] == basis[d] << run)
          ++run;
      Value field = arith::AndIOp::create(
          b, loc, arith::ShRUIOp::create(b, loc, id, constant(bit)),
          constant((1 << run) - 1));
      if (run > 1 || basis[1 - d] == 0) {
        coord[d] = arith::XOrIOp::create(
            b, loc, coord[d],
            arith::MulIOp::create(b, loc, field, constant(basis[d])));
      } else {
        // A single bit moving along both coordinates.
        for (unsigned e = 0; e < 2; ++e)
          coord[e] = arith::XOrIOp::create(
              b, loc, coord[e],
              arith::MulIOp::create(b, loc, field, constant(basis[e])));
      }
      bit += run;
    }
  }
  return {coord[0], coord[1]};
}

SmallVector<std::pair<Value, Value>>
ThreadCoords::positions(const TileDistribution &t) {
  auto [row, col] = threadOffset(t.getLayout());
  // Slots share their row or column offsets; build each once.
  DenseMap<int32_t, Value> rows, cols;
  auto at = [&](DenseMap<int32_t, Value> &cache, Value base, int32_t offset) {
    Value &v = cache[offset];
    if (!v)
      v = offset == 0
              ? base
              : Value(arith::XOrIOp::create(b, loc, base, constant(offset)));
    return v;
  };
  SmallVector<std::pair<Value, Value>> out;
  for (int64_t r = 0; r < t.getNumElements(); ++r) {
    layout::Coord offset = t.slotOffset(r);
    out.push_back({at(rows, row, offset.row), at(cols, col, offset.col)});
  }
  return out;
}

Value ThreadCoords::isOwner(const TileDistribution &t) {
  const layout::LinearLayout &l = t.getLayout();
  Value owner = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  for (auto [dim, id] :
       {std::pair{layout::InDim::Lane, lane}, {layout::InDim::Warp, warp}}) {
    int32_t free = l.getFreeMask(dim);
    if (free == 0)
      continue;
    Value clear = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::AndIOp::create(b, loc, id, constant(free)), constant(0));
    owner = arith::AndIOp::create(b, loc, owner, clear);
  }
  return owner;
}
