//===- TargetInfo.cpp - what each GPU target offers -----------------------===//

#include "sage/Dialect/Sage/IR/TargetInfo.h"

using namespace mlir::sage;

namespace {
struct KnownTarget {
  llvm::StringRef arch;
  unsigned capability;
  bool archSpecific;
  unsigned minPtx;
};
// Minimum PTX ISA per architecture, from the PTX ISA release notes.
constexpr KnownTarget kTargets[] = {
    {"sm_80", 80, false, 70}, {"sm_86", 86, false, 71},
    {"sm_89", 89, false, 78}, {"sm_90", 90, false, 78},
    {"sm_90a", 90, true, 80},
};
} // namespace

std::optional<TargetInfo> TargetInfo::get(llvm::StringRef arch) {
  for (const KnownTarget &t : kTargets)
    if (t.arch == arch) {
      TargetInfo info;
      info.arch = t.arch;
      info.capability = t.capability;
      info.archSpecific = t.archSpecific;
      return info;
    }
  return std::nullopt;
}

llvm::ArrayRef<llvm::StringRef> TargetInfo::supportedArchs() {
  static const llvm::StringRef names[] = {"sm_80", "sm_86", "sm_89", "sm_90",
                                          "sm_90a"};
  return names;
}

unsigned TargetInfo::getMinPtxVersion() const {
  for (const KnownTarget &t : kTargets)
    if (t.arch == arch)
      return t.minPtx;
  return 0;
}
