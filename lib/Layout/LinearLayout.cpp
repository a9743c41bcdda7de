//===- LinearLayout.cpp - GF(2)-linear maps from hardware to tiles --------===//

#include "sage/Layout/LinearLayout.h"

#include "GF2.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::sage::layout;
using detail::Echelon;
using detail::pack;

static constexpr InDim kDistributedDims[] = {InDim::Register, InDim::Lane,
                                             InDim::Warp};
static constexpr InDim kSharedDims[] = {InDim::Offset};

const char *mlir::sage::layout::getInDimName(InDim dim) {
  switch (dim) {
  case InDim::Register:
    return "register";
  case InDim::Lane:
    return "lane";
  case InDim::Warp:
    return "warp";
  case InDim::Offset:
    return "offset";
  }
  llvm_unreachable("unknown input dimension");
}

int32_t HardwareIndex::operator[](InDim dim) const {
  // One statement of which field a dimension names: the mutable accessor's.
  return const_cast<HardwareIndex &>(*this)[dim];
}

int32_t &HardwareIndex::operator[](InDim dim) {
  switch (dim) {
  case InDim::Register:
    return reg;
  case InDim::Lane:
    return lane;
  case InDim::Warp:
    return warp;
  case InDim::Offset:
    break;
  }
  llvm_unreachable("a hardware index has no offset");
}

//===----------------------------------------------------------------------===//
// Construction
//===----------------------------------------------------------------------===//

LinearLayout::LinearLayout() = default;

LinearLayout::LinearLayout(bool shared, TileShape shape)
    : isSharedLayout(shared), rows(shape[0]), cols(shape[1]) {}

LinearLayout LinearLayout::distributed(TileShape shape, Bases reg, Bases lane,
                                       Bases warp) {
  LinearLayout layout(/*shared=*/false, shape);
  layout.bases[unsigned(InDim::Register)] = std::move(reg);
  layout.bases[unsigned(InDim::Lane)] = std::move(lane);
  layout.bases[unsigned(InDim::Warp)] = std::move(warp);
  layout.verify();
  return layout;
}

LinearLayout LinearLayout::shared(TileShape shape, Bases offset) {
  LinearLayout layout(/*shared=*/true, shape);
  layout.bases[unsigned(InDim::Offset)] = std::move(offset);
  layout.verify();
  return layout;
}

void LinearLayout::verify() const {
  auto fail = [&](const llvm::Twine &why) {
    llvm::report_fatal_error(llvm::Twine("malformed linear layout: ") + why +
                             ": " + toString());
  };
  if (rows <= 0 || cols <= 0 || !llvm::isPowerOf2_64(rows) ||
      !llvm::isPowerOf2_64(cols) || rows > (int64_t(1) << 30) ||
      cols > (int64_t(1) << 30))
    fail("extents must be powers of two");
  unsigned totalBits = 0;
  for (const Bases &dimBases : bases) {
    totalBits += dimBases.size();
    for (Coord c : dimBases)
      if (c.row < 0 || c.col < 0 || c.row >= rows || c.col >= cols)
        fail("a basis lies outside the tile");
  }
  // Solutions are bit masks over the input bits.
  if (totalBits > 62)
    fail("too many input bits");
}

//===----------------------------------------------------------------------===//
// Getters and application
//===----------------------------------------------------------------------===//

bool LinearLayout::hasInDim(InDim dim) const {
  return isSharedLayout ? dim == InDim::Offset : dim != InDim::Offset;
}

llvm::ArrayRef<Coord> LinearLayout::getBases(InDim dim) const {
  return bases[unsigned(dim)];
}

int64_t LinearLayout::getDomainSize() const {
  unsigned bits = 0;
  for (const Bases &dimBases : bases)
    bits += dimBases.size();
  return int64_t(1) << bits;
}

Coord LinearLayout::applyDim(InDim dim, int64_t value) const {
  Coord out;
  llvm::ArrayRef<Coord> dimBases = getBases(dim);
  for (unsigned i = 0; i < dimBases.size(); ++i)
    if ((value >> i) & 1)
      out ^= dimBases[i];
  return out;
}

Coord LinearLayout::apply(HardwareIndex index) const {
  return applyDim(InDim::Register, index.reg) ^
         applyDim(InDim::Lane, index.lane) ^ applyDim(InDim::Warp, index.warp);
}

Coord LinearLayout::applyOffset(int64_t offset) const {
  return applyDim(InDim::Offset, offset);
}

//===----------------------------------------------------------------------===//
// Structure and inverses
//===----------------------------------------------------------------------===//

/// The input dimensions of `layout`, in pivot-preference order.
static llvm::ArrayRef<InDim> inDims(const LinearLayout &layout) {
  if (layout.isShared())
    return kSharedDims;
  return kDistributedDims;
}

/// An echelon of all bases of `layout`, inserted register, lane, warp (or
/// offset) bits, lowest first.
static Echelon echelonOf(const LinearLayout &layout) {
  Echelon e;
  for (InDim dim : inDims(layout))
    for (Coord c : layout.getBases(dim))
      e.insert(pack(c));
  return e;
}

unsigned LinearLayout::getRank() const { return echelonOf(*this).rank(); }

bool LinearLayout::isSurjective() const {
  return getRank() == llvm::Log2_64(rows) + llvm::Log2_64(cols);
}

bool LinearLayout::isInjective() const {
  Echelon e = echelonOf(*this);
  return e.rank() == e.size();
}

int32_t LinearLayout::getFreeMask(InDim dim) const {
  int32_t mask = 0;
  llvm::ArrayRef<Coord> dimBases = getBases(dim);
  for (unsigned i = 0; i < dimBases.size(); ++i)
    if (dimBases[i].isZero())
      mask |= int32_t(1) << i;
  return mask;
}

int64_t LinearLayout::getNumCopies() const {
  Echelon e = echelonOf(*this);
  return int64_t(1) << (e.size() - e.rank());
}

/// Splits a solution mask over the concatenated input bits of `layout` into
/// one value per input dimension.
static void splitSolution(const LinearLayout &layout, uint64_t mask,
                          llvm::function_ref<void(InDim, int64_t)> fn) {
  unsigned shift = 0;
  for (InDim dim : inDims(layout)) {
    unsigned bits = layout.getNumBits(dim);
    fn(dim, int64_t((mask >> shift) & ((uint64_t(1) << bits) - 1)));
    shift += bits;
  }
}

std::optional<HardwareIndex> LinearLayout::getCanonicalOwner(Coord c) const {
  if (isSharedLayout)
    llvm::report_fatal_error("getCanonicalOwner of a shared layout");
  std::optional<uint64_t> mask = echelonOf(*this).solve(pack(c));
  if (!mask)
    return std::nullopt;
  HardwareIndex index;
  splitSolution(*this, *mask,
                [&](InDim dim, int64_t value) { index[dim] = value; });
  return index;
}

std::optional<int64_t> LinearLayout::getOffset(Coord c) const {
  if (!isSharedLayout)
    llvm::report_fatal_error("getOffset of a distributed layout");
  std::optional<uint64_t> mask = echelonOf(*this).solve(pack(c));
  if (!mask)
    return std::nullopt;
  return int64_t(*mask);
}

//===----------------------------------------------------------------------===//
// Transformations
//===----------------------------------------------------------------------===//

LinearLayout LinearLayout::resize(TileShape shape,
                                  std::array<unsigned, 2> order) const {
  if (isSharedLayout)
    llvm::report_fatal_error("resize of a shared layout");
  if ((order[0] != 0 || order[1] != 1) && (order[0] != 1 || order[1] != 0))
    llvm::report_fatal_error("resize: order must be a permutation of {0, 1}");
  for (int64_t extent : shape)
    if (extent <= 0 || !llvm::isPowerOf2_64(extent))
      llvm::report_fatal_error("resize: extents must be powers of two");

  // Wrap every coordinate modulo the new extent: along a smaller dimension,
  // bases past it become (partly) zero.
  auto wrap = [&](Coord c) {
    c.row &= int32_t(std::min<int64_t>(shape[0], rows) - 1);
    c.col &= int32_t(std::min<int64_t>(shape[1], cols) - 1);
    return c;
  };
  Bases reg, lane, warp;
  for (Coord c : getBases(InDim::Register))
    if (!wrap(c).isZero())
      reg.push_back(wrap(c));
  for (Coord c : getBases(InDim::Lane))
    lane.push_back(wrap(c));
  for (Coord c : getBases(InDim::Warp))
    warp.push_back(wrap(c));

  // Repeat along a larger dimension: new register bits at the old extent.
  TileShape old = getShape();
  for (unsigned d : order) {
    for (int64_t v = old[d]; v < shape[d]; v <<= 1) {
      Coord c;
      c[d] = int32_t(v);
      reg.push_back(c);
    }
  }
  return distributed(shape, std::move(reg), std::move(lane), std::move(warp));
}

LinearLayout LinearLayout::transpose() const {
  LinearLayout out(isSharedLayout, {cols, rows});
  for (unsigned d = 0; d < bases.size(); ++d)
    for (Coord c : bases[d])
      out.bases[d].push_back({c.col, c.row});
  out.verify();
  return out;
}

LinearLayout LinearLayout::withBases(InDim dim, Bases newBases) const {
  if (!hasInDim(dim))
    llvm::report_fatal_error("withBases: the layout has no such dimension");
  LinearLayout out = *this;
  out.bases[unsigned(dim)] = std::move(newBases);
  out.verify();
  return out;
}

bool LinearLayout::operator==(const LinearLayout &o) const {
  return isSharedLayout == o.isSharedLayout && rows == o.rows &&
         cols == o.cols && bases == o.bases;
}

std::string LinearLayout::toString() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << (isSharedLayout ? "shared " : "distributed ") << rows << "x" << cols
     << " {";
  bool firstDim = true;
  for (InDim dim : inDims(*this)) {
    os << (firstDim ? "" : ", ") << getInDimName(dim) << ": [";
    firstDim = false;
    bool first = true;
    for (Coord c : getBases(dim)) {
      os << (first ? "" : ", ") << "(" << c.row << "," << c.col << ")";
      first = false;
    }
    os << "]";
  }
  os << "}";
  return s;
}
