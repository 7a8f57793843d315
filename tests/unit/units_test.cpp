#include <gtest/gtest.h>

#include "gpusel/units.hpp"

using namespace gpusel;

TEST(Units, ByteSizes) {
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("80GiB"), 80ull << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("64 KiB"), 65536u);
  EXPECT_EQ(parse_byte_size("2GB"), 2000000000u);
  EXPECT_EQ(parse_byte_size("10B"), 10u);
  for (const char* bad :
       {"", "MiB", "-1MiB", "1.5", "12XB", "0", "0.5KiB.", "1e3", ".", "99999999999TiB"}) {
    EXPECT_EQ(parse_byte_size(bad), std::nullopt) << bad;
  }
}

TEST(Units, CpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(parse_cpu_list("5"), std::vector<int>{5});
  for (const char* bad : {"3-1", "1,", "a", "1--2", "-1"})
    EXPECT_EQ(parse_cpu_list(bad), std::nullopt) << bad;
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(Units, FormatBytes) {
  EXPECT_EQ(format_bytes(80ull << 30), "80 GiB");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(23034ull << 20), "22.5 GiB");
}
