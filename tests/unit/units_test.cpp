#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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
