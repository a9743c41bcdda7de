//===- ConstantDivisionTest.cpp - the quantizer's division by qmax
//---------===//
//
// fmaDivide must equal IEEE division bit for bit wherever the lowering uses
// it: exhaustively for 127 (the INT8 scale), and on every subnormal plus a
// stride through the normals for the other divisors the rule accepts. The
// divisors it rejects do fail, so the check can tell.
//
//===----------------------------------------------------------------------===//

#include "sage/Quant/ConstantDivision.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mlir::sage;

namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Bit patterns in [0, +inf) that differ, scanning every `stride`-th one
/// (and every subnormal, where the misses are).
uint64_t countMismatches(int64_t divisor, uint32_t stride) {
  float d = static_cast<float>(divisor);
  uint64_t bad = 0;
  auto check = [&](uint32_t bits) {
    float a = fromBits(bits), want = a / d, got = fmaDivide(a, d);
    bad += std::memcmp(&want, &got, sizeof want) != 0;
  };
  for (uint32_t bits = 0; bits < 0x00800000u; ++bits)
    check(bits);
  for (uint64_t bits = 0x00800000u; bits < 0x7f800000u; bits += stride)
    check(static_cast<uint32_t>(bits));
  check(0x7f7fffffu); // the largest finite
  return bad;
}

TEST(ConstantDivision, ExhaustiveForInt8Scale) {
  ASSERT_TRUE(isFmaDivisionExact(127));
  EXPECT_EQ(countMismatches(127, 1), 0u);
}

TEST(ConstantDivision, AcceptedDivisorsMatch) {
  for (int64_t d = 1; d <= 127; ++d) {
    if (isFmaDivisionExact(d)) {
      EXPECT_EQ(countMismatches(d, 4099), 0u) << "divisor " << d;
    }
  }
}

TEST(ConstantDivision, RejectedDivisorsDoMiss) {
  for (int64_t d : {6, 10, 12, 126}) {
    EXPECT_FALSE(isFmaDivisionExact(d));
    EXPECT_GT(countMismatches(d, 1u << 20), 0u) << "divisor " << d;
  }
}

TEST(ConstantDivision, Rule) {
  EXPECT_TRUE(isFmaDivisionExact(1));
  EXPECT_TRUE(isFmaDivisionExact(64));
  EXPECT_TRUE(isFmaDivisionExact(7));
  EXPECT_FALSE(isFmaDivisionExact(0));
  EXPECT_FALSE(isFmaDivisionExact(128));
}

} // namespace
