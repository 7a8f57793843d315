#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gpusel_detail.hpp"

using namespace gpusel;

TEST(Units, ByteSizes) {
  EXPECT_EQ(detail::parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(detail::parse_byte_size("80GiB"), 80ull << 30);
  EXPECT_EQ(detail::parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(detail::parse_byte_size("4096"), 4096u);
  EXPECT_EQ(detail::parse_byte_size("64 KiB"), 65536u);
  EXPECT_EQ(detail::parse_byte_size("2GB"), 2000000000u);
  EXPECT_EQ(detail::parse_byte_size("10B"), 10u);
  EXPECT_EQ(detail::parse_byte_size("8gib"), 8ull << 30);  // any case, as --size always took
  EXPECT_EQ(detail::parse_byte_size("4096k"), 4ull << 20);
  EXPECT_EQ(detail::parse_byte_size("0.5g"), 1ull << 29);
  EXPECT_EQ(detail::parse_byte_size("4mi"), 4ull << 20);
  EXPECT_EQ(detail::parse_byte_size("4mb"), 4000000u);
  for (const char* bad :
       {"", "MiB", "-1MiB", "1.5", "12XB", "0", "0.5KiB.", "1e3", ".", "99999999999TiB"}) {
    EXPECT_EQ(detail::parse_byte_size(bad), std::nullopt) << bad;
  }
}

TEST(Units, ByteSizeProblems) {
  using P = detail::ByteSize::Problem;
  EXPECT_EQ(detail::read_byte_size("MiB").problem, P::NoNumber);
  EXPECT_EQ(detail::read_byte_size("-4M").problem, P::Negative);
  const detail::ByteSize q = detail::read_byte_size("512 Q ");
  EXPECT_EQ(q.problem, P::UnknownUnit);
  EXPECT_EQ(q.unit, "Q");
  EXPECT_EQ(detail::read_byte_size("0KiB").problem, P::Zero);
  EXPECT_EQ(detail::read_byte_size("99999999999TiB").problem, P::TooLarge);
  EXPECT_EQ(detail::read_byte_size("1.3").problem, P::NotWhole);
  const detail::ByteSize ok = detail::read_byte_size("1.5GiB");
  EXPECT_EQ(ok.problem, P::None);
  EXPECT_EQ(ok.bytes, 3ull << 29);
}

TEST(Units, CpuLists) {
  EXPECT_EQ(detail::parse_cpu_list("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(detail::parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(detail::parse_cpu_list("5"), std::vector<int>{5});
  for (const char* bad : {"3-1", "1,", "a", "1--2", "-1"})
    EXPECT_EQ(detail::parse_cpu_list(bad), std::nullopt) << bad;
  EXPECT_EQ(detail::format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(detail::format_cpu_list({}), "");
}

TEST(Units, FormatBytes) {
  EXPECT_EQ(detail::format_bytes(80ull << 30), "80 GiB");
  EXPECT_EQ(detail::format_bytes(512), "512 B");
  EXPECT_EQ(detail::format_bytes(23034ull << 20), "22.5 GiB");
}

// The whole and one decimal are worked out in integers; printf, on the exact double, is the
// reference: every unit, the ties that round to even (0.25 -> 0.2, 0.75 -> 0.8), 9.95 and
// 1023.95 rounding up to a new whole, and values past 2^53.
TEST(Units, FormatBytesRoundsAsPrintfDoes) {
  const auto reference = [](std::uint64_t bytes) {
    static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
      v /= 1024.0;
      ++u;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f %s" : "%.1f %s", v, kNames[u]);
    return std::string(buf);
  };
  std::vector<std::uint64_t> cases = {0,
                                      1,
                                      1023,
                                      1024,
                                      1025,
                                      1024 + 256,
                                      1024 + 768,
                                      (10ull << 10) - 51,
                                      (1024ull << 10) - 1,
                                      (1ull << 40) * 1023 + (1ull << 40) * 95 / 100,
                                      (1ull << 53) - 1,
                                      1ull << 53,
                                      (1ull << 53) + 1,
                                      ~0ull};
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    cases.push_back(x >> (x % 64));  // every size class
  }
  for (int unit = 0; unit <= 4; ++unit) {
    for (std::uint64_t whole : {1ull, 9ull, 512ull, 1023ull}) {
      for (std::uint64_t twentieth = 0; twentieth < 20; ++twentieth) {
        const std::uint64_t one = 1ull << (10 * unit);
        cases.push_back(whole * one + one * twentieth / 20);
      }
    }
  }
  for (std::uint64_t bytes : cases)
    EXPECT_EQ(detail::format_bytes(bytes), reference(bytes)) << bytes;
}

TEST(Units, Durations) {
  EXPECT_EQ(gpusel::detail::parse_duration("30"), 30.0);
  EXPECT_EQ(gpusel::detail::parse_duration(" 1.5 "), 1.5);
  EXPECT_EQ(gpusel::detail::parse_duration("1e10"), 1e10);
  EXPECT_EQ(gpusel::detail::parse_duration("90s"), 90.0);
  EXPECT_EQ(gpusel::detail::parse_duration("15m"), 900.0);
  EXPECT_EQ(gpusel::detail::parse_duration("2H"), 7200.0);
  EXPECT_EQ(gpusel::detail::parse_duration("1d"), 86400.0);
  EXPECT_EQ(gpusel::detail::parse_duration(".5"), 0.5);
  EXPECT_EQ(gpusel::detail::parse_duration("0"), 0.0);
  EXPECT_TRUE(std::isinf(*gpusel::detail::parse_duration("inf")));
  EXPECT_TRUE(std::isinf(*gpusel::detail::parse_duration("Forever")));
  EXPECT_TRUE(std::isinf(*gpusel::detail::parse_duration("1e400")));  // beyond a double: for ever
  // Below a double: no time at all (it read as "for ever" when std::from_chars's range error was
  // taken for a number too large).
  EXPECT_EQ(gpusel::detail::parse_duration("1e-400"), 0.0);
  EXPECT_EQ(gpusel::detail::parse_duration("2.5E-1m"), 15.0);
  for (const char* bad : {"", "-1", "nan", "soon", "1x", "s", "1 2", "+5", "--1", "0x10", "1e",
                          "1e+", "e5", ".e5", "1e5.5"}) {
    EXPECT_FALSE(gpusel::detail::parse_duration(bad)) << bad;
  }
}

TEST(Units, FormatSeconds) {
  EXPECT_EQ(gpusel::detail::format_seconds(1), "1 s");
  EXPECT_EQ(gpusel::detail::format_seconds(0.2), "0.2 s");
  EXPECT_EQ(gpusel::detail::format_seconds(1.25), "1.25 s");
  EXPECT_EQ(gpusel::detail::format_seconds(7200), "7200 s");
  EXPECT_EQ(gpusel::detail::format_seconds(1e20), "1e+20 s");
  EXPECT_EQ(gpusel::detail::format_seconds(std::numeric_limits<double>::infinity()), "for ever");
}
