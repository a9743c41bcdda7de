//===- tensor_maps.h - host-encoded TMA tensor maps -------------*- C++ -*-===//
//
// A kernel's host tensor maps (the PTX header's `// sage.tensor_map` lines,
// written by the compiler's sagegpu-host-tensor-maps pass) give each field
// of a map as an expression of the kernel's arguments. The launcher parses
// them once per loaded kernel and evaluates them on every launch; the
// driver then encodes the map (cuTensorMapEncodeTiled, in driver.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_PYTHON_TENSOR_MAPS_H
#define SAGE_PYTHON_TENSOR_MAPS_H

#include <cstdint>
#include <string>
#include <vector>

namespace sage::python {

/// One host expression: `aN` (argument N), a decimal integer, `OPW(x,y)`
/// (OP in add, sub, mul, div, rem, min, max; W in 32, 64: signed, wrapped
/// to W bits, division truncating), `zextW(x)`, `truncW(x)`. Evaluated in
/// 64-bit two's complement.
class HostExpression {
public:
  /// Parses `text`; throws std::invalid_argument naming what is wrong.
  explicit HostExpression(const std::string &text);

  /// The value for the kernel arguments `args`, each a 64-bit integer (a
  /// pointer's address, an integer's sign-extended value); `integer[i]`
  /// says whether argument i is one. Throws std::invalid_argument for an
  /// argument that does not exist or is not an integer, or a division by
  /// zero.
  std::int64_t evaluate(const std::vector<std::int64_t> &args,
                        const std::vector<bool> &integer) const;

  const std::string &text() const { return source; }

private:
  enum class Op { Arg, Const, Add, Sub, Mul, Div, Rem, Min, Max, Zext, Trunc };
  struct Node {
    Op op;
    int width; // 32 or 64 for the operators
    std::int64_t value;
  };
  void parse(const std::string &text, std::size_t &at);

  std::string source;
  std::vector<Node> program; // postfix
};

/// The fields of a map for one launch (what cuTensorMapEncodeTiled takes).
struct TensorMapFields {
  std::uint64_t address;
  std::vector<std::uint64_t> dims;    // innermost first
  std::vector<std::uint64_t> strides; // bytes, of dimensions 1 and up
  bool operator==(const TensorMapFields &other) const {
    return address == other.address && dims == other.dims &&
           strides == other.strides;
  }
};

/// One host tensor map of a kernel: its parameter and how to compute it.
struct HostTensorMap {
  unsigned param;
  HostExpression address;
  std::vector<HostExpression> dims, strides;
  std::vector<std::uint32_t> box;
  int elementType, swizzle;

  /// The fields for `args` (see HostExpression::evaluate); throws
  /// std::invalid_argument for a negative extent or stride.
  TensorMapFields fields(const std::vector<std::int64_t> &args,
                         const std::vector<bool> &integer) const;
};

} // namespace sage::python

#endif // SAGE_PYTHON_TENSOR_MAPS_H
