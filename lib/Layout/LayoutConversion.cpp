//===- LayoutConversion.cpp - moving a tile between layouts ---------------===//
//
// With src bases S_r, S_l, S_w and dst bases D_r, D_l, D_w, dst index
// (r, l, w) holds D_r r ^ D_l l ^ D_w w, and src (r', l', w') holds
// S_r r' ^ S_l l' ^ S_w w'. Each conversion kind fixes part of the src index
// and solves for the rest:
//   InThread:    (l', w') = (l, w): S_r r' = (D_r r) ^ (D_l ^ S_l) l ^ ...;
//                r' may depend on r only iff S_l = D_l and S_w = D_w, and
//                then r' solves S_r r' = D_r r.
//   WarpShuffle: w' = w: S_r r' ^ S_l l' = D_r r ^ D_l l, given S_w = D_w.
// Each solution is linear, so solving for the bases of dst suffices.
//
//===----------------------------------------------------------------------===//

#include "sage/Layout/LayoutConversion.h"

#include "GF2.h"

#include "llvm/Support/ErrorHandling.h"

using namespace mlir::sage::layout;
using detail::Echelon;
using detail::pack;

const char *mlir::sage::layout::getConversionKindName(ConversionKind kind) {
  switch (kind) {
  case ConversionKind::InThread:
    return "in_thread";
  case ConversionKind::WarpShuffle:
    return "warp_shuffle";
  case ConversionKind::SharedMemory:
    return "shared_memory";
  }
  llvm_unreachable("unknown conversion kind");
}

static void checkComparable(const LinearLayout &src, const LinearLayout &dst) {
  if (!src.isDistributed() || !dst.isDistributed())
    llvm::report_fatal_error("layout conversion between non-distributed "
                             "layouts");
  if (src.getShape() != dst.getShape())
    llvm::report_fatal_error("layout conversion between different shapes");
  if (src.getNumBits(InDim::Lane) != dst.getNumBits(InDim::Lane) ||
      src.getNumBits(InDim::Warp) != dst.getNumBits(InDim::Warp))
    llvm::report_fatal_error("layout conversion between layouts with "
                             "different lane or warp counts");
}

/// An echelon of the bases of `dims` of `layout`, in that order.
static Echelon echelonOf(const LinearLayout &layout,
                         std::initializer_list<InDim> dims) {
  Echelon e;
  for (InDim dim : dims)
    for (Coord c : layout.getBases(dim))
      e.insert(pack(c));
  return e;
}

static bool spanContains(const Echelon &e, llvm::ArrayRef<Coord> vecs) {
  for (Coord c : vecs)
    if (!e.contains(pack(c)))
      return false;
  return true;
}

static bool isInThread(const LinearLayout &src, const LinearLayout &dst) {
  if (src.getBases(InDim::Lane) != dst.getBases(InDim::Lane) ||
      src.getBases(InDim::Warp) != dst.getBases(InDim::Warp))
    return false;
  return spanContains(echelonOf(src, {InDim::Register}),
                      dst.getBases(InDim::Register));
}

static bool isWarpShuffle(const LinearLayout &src, const LinearLayout &dst) {
  if (src.getBases(InDim::Warp) != dst.getBases(InDim::Warp))
    return false;
  Echelon e = echelonOf(src, {InDim::Register, InDim::Lane});
  return spanContains(e, dst.getBases(InDim::Register)) &&
         spanContains(e, dst.getBases(InDim::Lane));
}

ConversionKind mlir::sage::layout::classifyConversion(const LinearLayout &src,
                                                      const LinearLayout &dst) {
  checkComparable(src, dst);
  if (isInThread(src, dst))
    return ConversionKind::InThread;
  if (isWarpShuffle(src, dst))
    return ConversionKind::WarpShuffle;
  return ConversionKind::SharedMemory;
}

/// XOR of `basisImages[i]` over the set bits i of `value`.
static int32_t applyBits(llvm::ArrayRef<int32_t> basisImages, int64_t value) {
  int32_t out = 0;
  for (unsigned i = 0; i < basisImages.size(); ++i)
    if ((value >> i) & 1)
      out ^= basisImages[i];
  return out;
}

/// The value of every index 0 .. 2^bases.size() - 1 under the linear map
/// with these basis images.
static llvm::SmallVector<int32_t> tabulate(llvm::ArrayRef<int32_t> images) {
  llvm::SmallVector<int32_t> table(size_t(1) << images.size());
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = applyBits(images, i);
  return table;
}

std::optional<llvm::SmallVector<int32_t>>
mlir::sage::layout::getInThreadRegisterMap(const LinearLayout &src,
                                           const LinearLayout &dst) {
  checkComparable(src, dst);
  if (!isInThread(src, dst))
    return std::nullopt;
  Echelon e = echelonOf(src, {InDim::Register});
  llvm::SmallVector<int32_t> images;
  for (Coord c : dst.getBases(InDim::Register))
    images.push_back(int32_t(*e.solve(pack(c))));
  return tabulate(images);
}

int32_t WarpShufflePlan::getSrcLane(int32_t dstReg, int32_t dstLane) const {
  return srcLaneOfRegister[dstReg] ^ applyBits(laneBitToSrcLane, dstLane);
}

int32_t WarpShufflePlan::getSrcRegister(int32_t dstReg, int32_t dstLane) const {
  return srcRegisterOfRegister[dstReg] ^
         applyBits(laneBitToSrcRegister, dstLane);
}

int32_t WarpShufflePlan::getRegisterSelectMask() const {
  int32_t mask = 0;
  for (unsigned i = 0; i < laneBitToSrcRegister.size(); ++i)
    if (laneBitToSrcRegister[i] != 0)
      mask |= int32_t(1) << i;
  return mask;
}

std::optional<WarpShufflePlan>
mlir::sage::layout::getWarpShufflePlan(const LinearLayout &src,
                                       const LinearLayout &dst) {
  checkComparable(src, dst);
  if (isInThread(src, dst) || !isWarpShuffle(src, dst))
    return std::nullopt;
  Echelon e = echelonOf(src, {InDim::Register, InDim::Lane});
  unsigned regBits = src.getNumBits(InDim::Register);
  int32_t regMask = (int32_t(1) << regBits) - 1;
  // A solution mask holds the src register bits low, the src lane bits above.
  auto solve = [&](Coord c, int32_t &srcReg, int32_t &srcLane) {
    uint64_t mask = *e.solve(pack(c));
    srcReg = int32_t(mask) & regMask;
    srcLane = int32_t(mask >> regBits);
  };
  WarpShufflePlan plan;
  llvm::SmallVector<int32_t> regImages, laneImages;
  for (Coord c : dst.getBases(InDim::Register)) {
    int32_t r, l;
    solve(c, r, l);
    regImages.push_back(r);
    laneImages.push_back(l);
  }
  plan.srcRegisterOfRegister = tabulate(regImages);
  plan.srcLaneOfRegister = tabulate(laneImages);
  for (Coord c : dst.getBases(InDim::Lane)) {
    int32_t r, l;
    solve(c, r, l);
    plan.laneBitToSrcRegister.push_back(r);
    plan.laneBitToSrcLane.push_back(l);
  }
  return plan;
}

HardwareIndex HardwareIndexMap::apply(HardwareIndex index) const {
  HardwareIndex out;
  auto add = [&](llvm::ArrayRef<HardwareIndex> images, int64_t value) {
    for (unsigned i = 0; i < images.size(); ++i)
      if ((value >> i) & 1)
        out = out ^ images[i];
  };
  add(regBases, index.reg);
  add(laneBases, index.lane);
  add(warpBases, index.warp);
  return out;
}

std::optional<HardwareIndexMap>
mlir::sage::layout::composeInverse(const LinearLayout &src,
                                   const LinearLayout &dst) {
  checkComparable(src, dst);
  HardwareIndexMap map;
  llvm::SmallVector<HardwareIndex> *images[] = {&map.regBases, &map.laneBases,
                                                &map.warpBases};
  InDim dims[] = {InDim::Register, InDim::Lane, InDim::Warp};
  for (unsigned d = 0; d < 3; ++d) {
    for (Coord c : dst.getBases(dims[d])) {
      std::optional<HardwareIndex> owner = src.getCanonicalOwner(c);
      if (!owner)
        return std::nullopt;
      images[d]->push_back(*owner);
    }
  }
  return map;
}
