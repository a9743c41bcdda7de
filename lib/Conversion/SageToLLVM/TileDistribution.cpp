//===- TileDistribution.cpp - blocked layout arithmetic -------------------===//

#include "sage/Conversion/SageToLLVM/TileDistribution.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

static constexpr unsigned kWarpSize = 32;

int64_t DimDistribution::count() const {
  switch (kind) {
  case Kind::Spread:
    return extent / layoutTile() * size;
  case Kind::Replicated:
    return size;
  case Kind::Whole:
    return extent;
  }
  llvm_unreachable("unknown distribution kind");
}

int64_t DimDistribution::offset(int64_t k) const {
  if (kind == Kind::Spread)
    return k / size * layoutTile() + k % size;
  return k;
}

unsigned DimDistribution::distinctLanes() const {
  switch (kind) {
  case Kind::Spread:
    return threads;
  case Kind::Replicated:
    return std::min<int64_t>(threads, extent / size);
  case Kind::Whole:
    return 1;
  }
  llvm_unreachable("unknown distribution kind");
}

unsigned DimDistribution::distinctWarps() const {
  switch (kind) {
  case Kind::Spread:
    return warps;
  case Kind::Replicated:
    return std::max<int64_t>(1, extent / (int64_t(size) * threads));
  case Kind::Whole:
    return 1;
  }
  llvm_unreachable("unknown distribution kind");
}

std::optional<TileDistribution> TileDistribution::get(Type type) {
  auto tile = dyn_cast<RankedTensorType>(type);
  if (!tile || tile.getRank() != 2)
    return std::nullopt;
  auto layout = dyn_cast_or_null<BlockedLayoutAttr>(tile.getEncoding());
  if (!layout)
    return std::nullopt;
  TileDistribution dist;
  dist.type = tile;
  for (unsigned d = 0; d < 2; ++d) {
    int64_t extent = tile.getDimSize(d);
    if (extent <= 0 || !llvm::isPowerOf2_64(extent))
      return std::nullopt;
    DimDistribution &dim = dist.dims[d];
    dim.extent = extent;
    dim.size = layout.getSize()[d];
    dim.threads = layout.getThreads()[d];
    dim.warps = layout.getWarps()[d];
    // Dimension 1 varies fastest in lane and warp ids.
    dim.laneStride = d == 1 ? 1 : layout.getThreads()[1];
    dim.warpStride = d == 1 ? 1 : layout.getWarps()[1];
    if (extent >= dim.layoutTile())
      dim.kind = DimDistribution::Kind::Spread;
    else if (extent >= dim.size)
      dim.kind = DimDistribution::Kind::Replicated;
    else
      dim.kind = DimDistribution::Kind::Whole;
  }
  return dist;
}

ThreadCoords::ThreadCoords(OpBuilder &b, Location loc) : b(b), loc(loc) {
  tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  lane = arith::AndIOp::create(b, loc, tid, constant(kWarpSize - 1));
  warp = arith::ShRUIOp::create(b, loc, tid, constant(5));
}

Value ThreadCoords::constant(int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

/// (id / stride) mod n, for powers of two.
static Value digit(ThreadCoords &c, Value id, unsigned stride, unsigned n) {
  Value shifted =
      arith::ShRUIOp::create(c.b, c.loc, id, c.constant(llvm::Log2_32(stride)));
  return arith::AndIOp::create(c.b, c.loc, shifted, c.constant(n - 1));
}

Value ThreadCoords::laneCoord(const DimDistribution &d) {
  return digit(*this, lane, d.laneStride, d.threads);
}

Value ThreadCoords::warpCoord(const DimDistribution &d) {
  return digit(*this, warp, d.warpStride, d.warps);
}

/// warp * threads + lane along `d`: the thread's position in the dimension.
static Value position(ThreadCoords &c, const DimDistribution &d) {
  Value w =
      arith::MulIOp::create(c.b, c.loc, c.warpCoord(d), c.constant(d.threads));
  return arith::AddIOp::create(c.b, c.loc, w, c.laneCoord(d));
}

Value ThreadCoords::base(const DimDistribution &d) {
  using Kind = DimDistribution::Kind;
  if (d.kind == Kind::Whole)
    return constant(0);
  Value first =
      arith::MulIOp::create(b, loc, position(*this, d), constant(d.size));
  if (d.kind == Kind::Spread)
    return first;
  return arith::AndIOp::create(b, loc, first, constant(d.extent - 1));
}

Value ThreadCoords::isOwner(const DimDistribution &d) {
  using Kind = DimDistribution::Kind;
  if (d.kind == Kind::Spread)
    return arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  Value pos = position(*this, d);
  if (d.kind == Kind::Whole)
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, pos,
                                 constant(0));
  Value first = arith::MulIOp::create(b, loc, pos, constant(d.size));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, first,
                               constant(d.extent));
}

SmallVector<std::pair<Value, Value>>
ThreadCoords::positions(const TileDistribution &t) {
  Value base0 = base(t.dim(0)), base1 = base(t.dim(1));
  SmallVector<std::pair<Value, Value>> out;
  for (int64_t k0 = 0; k0 < t.dim(0).count(); ++k0)
    for (int64_t k1 = 0; k1 < t.dim(1).count(); ++k1)
      out.push_back(
          {arith::AddIOp::create(b, loc, base0, constant(t.dim(0).offset(k0))),
           arith::AddIOp::create(b, loc, base1,
                                 constant(t.dim(1).offset(k1)))});
  return out;
}
