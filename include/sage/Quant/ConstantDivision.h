//===- ConstantDivision.h - x / d without a divide ----------*- C++ -*-===//
//
// A quantizer's scale is absmax / qmax, an IEEE f32 division by a small
// integer constant. On the GPU a division is a reciprocal, four FMAs, a
// range check and a call to a slow path; per channel it runs once for every
// column a thread holds. For the divisors below, two FMAs after a multiply
// by the rounded reciprocal give the correctly rounded quotient of every
// finite non-negative f32 (subnormals included), checked exhaustively for
// every divisor from 1 to 127 (unittest/Quant): the odd ones and the powers
// of two. Even non-powers of two miss some subnormal quotients.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_QUANT_CONSTANTDIVISION_H
#define SAGE_QUANT_CONSTANTDIVISION_H

#include <cmath>
#include <cstdint>

namespace mlir::sage {

/// Whether fmaDivide(a, d) == a / d for every finite a >= 0 (d in [1, 127]).
constexpr bool isFmaDivisionExact(int64_t d) {
  return d >= 1 && d <= 127 && ((d & 1) || (d & (d - 1)) == 0);
}

/// The sequence the quantizer's lowering emits: q = a * RN(1/d), then one
/// Newton correction with the exact residual a - q * d (an FMA).
inline float fmaDivide(float a, float d) {
  float c = 1.0f / d;
  float q = a * c;
  float r = std::fma(-q, d, a);
  return std::fma(r, c, q);
}

} // namespace mlir::sage

#endif // SAGE_QUANT_CONSTANTDIVISION_H
