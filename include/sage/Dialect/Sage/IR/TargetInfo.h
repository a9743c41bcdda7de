//===- TargetInfo.h - what each GPU target offers ---------------*- C++ -*-===//
//
// The one place that knows the supported architectures and their
// differences. The dialect verifier, sage-select-mma and the PTX backend ask
// it instead of comparing architecture strings.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGE_IR_TARGETINFO_H
#define SAGE_DIALECT_SAGE_IR_TARGETINFO_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::sage {

class TargetInfo {
public:
  /// The target for `arch` ("sm_80", ..., "sm_90a"), or nullopt if unknown.
  static std::optional<TargetInfo> get(llvm::StringRef arch);
  /// Every supported architecture name, for diagnostics.
  static llvm::ArrayRef<llvm::StringRef> supportedArchs();

  llvm::StringRef getArch() const { return arch; }
  /// Compute capability times ten (90 for sm_90 and sm_90a).
  unsigned getCapability() const { return capability; }
  /// mma.sync with int8 and f16/bf16 operands (sm_80 and later).
  bool hasMmaSync() const { return capability >= 80; }
  /// cp.async global-to-shared copies (sm_80 and later).
  bool hasCpAsync() const { return capability >= 80; }
  /// wgmma exists only with the architecture-specific sm_90a features.
  bool hasWgmma() const { return archSpecific && capability == 90; }
  /// TMA copies with tensor maps built on the device (`tensormap.replace`
  /// is an sm_90a feature), from PTX ISA kTmaMinPtxVersion on.
  bool hasTma() const { return archSpecific && capability == 90; }
  static constexpr unsigned kTmaMinPtxVersion = 83;
  /// wgmma with mixed integer types (u8 x s8: `sage.qmatmul`'s
  /// `lhs_unsigned`), from PTX ISA 8.4.
  static constexpr unsigned kMixedIntegerWgmmaMinPtxVersion = 84;
  /// The PTX ISA version (times ten) compiled for unless told: every
  /// feature above.
  static constexpr unsigned kDefaultPtxVersion = 84;
  /// Vector f32 reductions to global memory (`red.global.add.v2/v4.f32`,
  /// sm_90 and later), from PTX ISA kVectorReductionMinPtxVersion on.
  bool hasVectorReductions() const { return capability >= 90; }
  static constexpr unsigned kVectorReductionMinPtxVersion = 81;
  /// The oldest PTX ISA (times ten) that can target this architecture.
  unsigned getMinPtxVersion() const;

private:
  llvm::StringRef arch;
  unsigned capability = 0;
  bool archSpecific = false;
};

} // namespace mlir::sage

#endif // SAGE_DIALECT_SAGE_IR_TARGETINFO_H
