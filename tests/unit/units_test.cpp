// Units parser: every kind, prefixes, binary vs decimal, bits, errors.
#include <gtest/gtest.h>

#include "base/text.h"
#include "base/params/units.h"

using namespace podsim;

static double q(Quantity k, const char* t) {
  auto r = parse_quantity(k, t);
  EXPECT_TRUE(r.value.has_value()) << t << ": " << r.problem;
  return r.value.value_or(-1);
}

TEST(UnitsTest, Frequency) {
  EXPECT_DOUBLE_EQ(q(Quantity::Frequency, "940MHz"), 940e6);
  EXPECT_DOUBLE_EQ(q(Quantity::Frequency, "1.5GHz"), 1.5e9);
  EXPECT_DOUBLE_EQ(q(Quantity::Frequency, "100 kHz"), 1e5);
  EXPECT_DOUBLE_EQ(q(Quantity::Frequency, "7Hz"), 7);
}

TEST(UnitsTest, BandwidthDecimalBinaryAndBits) {
  EXPECT_DOUBLE_EQ(q(Quantity::Bandwidth, "900GB/s"), 900e9);
  EXPECT_DOUBLE_EQ(q(Quantity::Bandwidth, "1.2TB/s"), 1.2e12);
  EXPECT_DOUBLE_EQ(q(Quantity::Bandwidth, "1GiB/s"), 1073741824.0);
  EXPECT_DOUBLE_EQ(q(Quantity::Bandwidth, "496Gbit/s"), 62e9);
  EXPECT_DOUBLE_EQ(q(Quantity::Bandwidth, "400Gbps"), 50e9);
}

TEST(UnitsTest, Sizes) {
  EXPECT_DOUBLE_EQ(q(Quantity::Size, "32GiB"), 34359738368.0);
  EXPECT_DOUBLE_EQ(q(Quantity::Size, "16GB"), 16e9);
  EXPECT_DOUBLE_EQ(q(Quantity::Size, "64B"), 64);
  EXPECT_DOUBLE_EQ(q(Quantity::Size, "1.5KiB"), 1536);
}

TEST(UnitsTest, Times) {
  EXPECT_DOUBLE_EQ(q(Quantity::Time, "1us"), 1e-6);
  EXPECT_DOUBLE_EQ(q(Quantity::Time, "1µs"), 1e-6);
  EXPECT_DOUBLE_EQ(q(Quantity::Time, "500ns"), 500e-9);
  EXPECT_DOUBLE_EQ(q(Quantity::Time, "2ms"), 2e-3);
  EXPECT_DOUBLE_EQ(q(Quantity::Time, "1h"), 3600);
  EXPECT_DOUBLE_EQ(q(Quantity::Time, "3ps"), 3e-12);
}

TEST(UnitsTest, MissingUnitIsRefused) {
  auto r = parse_quantity(Quantity::Frequency, "940");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.problem.find("no unit"), std::string::npos) << r.problem;
  EXPECT_NE(r.problem.find("MHz"), std::string::npos) << r.problem;
}

// Zero is zero in every unit: `run.combine_threshold: 0` needs none.
TEST(UnitsTest, ZeroNeedsNoUnit) {
  EXPECT_EQ(q(Quantity::Size, "0"), 0.0);
  EXPECT_EQ(q(Quantity::Time, "0"), 0.0);
  EXPECT_FALSE(parse_quantity(Quantity::Size, "5").value);
}

TEST(UnitsTest, WrongKindOfUnitSuggestsNearest) {
  auto r = parse_quantity(Quantity::Frequency, "940MHZ");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.problem.find("did you mean 'MHz'"), std::string::npos) << r.problem;
  auto s = parse_quantity(Quantity::Size, "32GB/s");
  EXPECT_FALSE(s.value);
  EXPECT_NE(s.problem.find("not a unit of size"), std::string::npos) << s.problem;
}

TEST(UnitsTest, NotANumber) {
  EXPECT_FALSE(parse_quantity(Quantity::Time, "fast").value);
  EXPECT_FALSE(parse_quantity(Quantity::Time, "nanus").value);
  auto r = parse_quantity(Quantity::Time, "infus");
  EXPECT_FALSE(r.value);
  EXPECT_NE(r.problem.find("finite"), std::string::npos) << r.problem;
}

TEST(UnitsTest, FormatRoundTrips) {
  for (double v : {940e6, 1.5e9, 700e6, 3.5e9}) {
    std::string t = format_quantity(Quantity::Frequency, v);
    EXPECT_DOUBLE_EQ(q(Quantity::Frequency, t.c_str()), v) << t;
  }
  EXPECT_EQ(format_quantity(Quantity::Bandwidth, 900e9), "900GB/s");
  EXPECT_EQ(format_quantity(Quantity::Size, 34359738368.0), "32GiB");
  EXPECT_EQ(format_quantity(Quantity::Time, 1e-6), "1us");
  EXPECT_EQ(format_quantity(Quantity::Size, 16e9), "16GB");
  for (double v : {16e9, 62e9, 1e-9, 5e-9, 4096.0, 1.0}) {
    for (Quantity k : {Quantity::Bandwidth, Quantity::Size, Quantity::Time}) {
      std::string t = format_quantity(k, v);
      EXPECT_NEAR(q(k, t.c_str()), v, 1e-9 * v) << t;
    }
  }
}

// Printed clock rates keep their decimals (a "%.0f" once printed 1.5 GHz as "2 GHz" and 1050 MHz as "1 GHz").
TEST(TextTest, ClockRatesPrintWithTheirDecimals) {
  EXPECT_EQ(format_frequency(1.5e9), "1.5 GHz");
  EXPECT_EQ(format_frequency(1.05e9), "1.05 GHz");
  EXPECT_EQ(format_frequency(1.75e9), "1.75 GHz");
  EXPECT_EQ(format_frequency(940e6), "940 MHz");
  EXPECT_EQ(format_frequency(700e6), "700 MHz");
  EXPECT_EQ(format_frequency(2e9), "2 GHz");
}
