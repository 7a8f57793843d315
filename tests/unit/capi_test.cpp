// The C ABI's contract: statuses, the thread-local last error, caller buffers and size queries.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <thread>

#include "gpusel/gpusel.h"
#include "gpusel/version.h"

TEST(CApi, ParseIntoCallerBuffer) {
  char buf[64];
  size_t needed = 0;
  ASSERT_EQ(gpusel_parse_gpu_spec(" 3, gpu-ab ,", buf, sizeof buf, &needed), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("mixes"), std::string::npos);
  ASSERT_EQ(gpusel_parse_gpu_spec(" 1, ,01", buf, sizeof buf, &needed), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("same GPU twice"), std::string::npos);
  ASSERT_EQ(gpusel_parse_gpu_spec(" 3, ,1", buf, sizeof buf, &needed), GPUSEL_OK);
  EXPECT_STREQ(buf, "3,1");
  EXPECT_EQ(needed, 4u);
  EXPECT_STREQ(gpusel_last_error(), "");  // a successful call clears it
}

TEST(CApi, TooSmallThenRetry) {
  char small[4] = {'x', 'x', 'x', 'x'};
  size_t needed = 0;
  ASSERT_EQ(gpusel_parse_gpu_spec("GPU-abcdef", small, sizeof small, &needed), GPUSEL_TOO_SMALL);
  EXPECT_EQ(needed, 11u);
  EXPECT_EQ(small[0], 'x');  // nothing written
  std::string big(needed, '\0');
  ASSERT_EQ(gpusel_parse_gpu_spec("GPU-abcdef", big.data(), big.size(), nullptr), GPUSEL_OK);
  EXPECT_STREQ(big.c_str(), "GPU-abcdef");
  ASSERT_EQ(gpusel_parse_gpu_spec("1", nullptr, 0, &needed), GPUSEL_TOO_SMALL);
  EXPECT_EQ(needed, 2u);
}

TEST(CApi, SingleAndPredicates) {
  char buf[16];
  EXPECT_EQ(gpusel_parse_single_gpu("0,1", buf, sizeof buf, nullptr), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("exactly one"), std::string::npos);
  EXPECT_EQ(gpusel_parse_single_gpu(" 7 ", buf, sizeof buf, nullptr), GPUSEL_OK);
  EXPECT_STREQ(buf, "7");
  EXPECT_EQ(gpusel_is_gpu_uuid("gpu-1"), 1);
  EXPECT_EQ(gpusel_is_gpu_uuid(nullptr), 0);
  EXPECT_EQ(gpusel_is_gpu_index("12"), 1);
  EXPECT_EQ(gpusel_is_gpu_index("1a"), 0);
}

TEST(CApi, NullArgumentsAreBadInputNotCrashes) {
  char buf[16];
  EXPECT_EQ(gpusel_parse_gpu_spec(nullptr, buf, sizeof buf, nullptr), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(gpusel_set_assigned_gpu(nullptr), GPUSEL_BAD_INPUT);
  EXPECT_EQ(gpusel_list_gpus(nullptr), GPUSEL_BAD_INPUT);
  EXPECT_EQ(gpusel_gpu_list_get(nullptr, 0, nullptr), GPUSEL_BAD_INPUT);
  EXPECT_EQ(gpusel_gpu_list_count(nullptr), 0u);
  gpusel_gpu_list_free(nullptr);
  EXPECT_EQ(gpusel_gpu_identity(0, nullptr), GPUSEL_BAD_INPUT);
}

TEST(CApi, StructSizeBelowTheFirstVersionIsBadInput) {
  // Refused before CUDA is touched: the caller did not set `size`.
  gpusel_identity id{};
  EXPECT_EQ(gpusel_gpu_identity(0, &id), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("gpusel_identity->size is 0"), std::string::npos);
  id.size = offsetof(gpusel_identity, pci_bus_id);  // an impossible older version: too short
  EXPECT_EQ(gpusel_gpu_identity(0, &id), GPUSEL_BAD_INPUT);
  EXPECT_NE(std::string(gpusel_last_error()).find("sizeof(gpusel_identity)"), std::string::npos);
  // `size` leads each struct, so any version of a caller can set it.
  EXPECT_EQ(offsetof(gpusel_identity, size), 0u);
  EXPECT_EQ(offsetof(gpusel_gpu_info, size), 0u);
}

TEST(CApi, LastErrorIsPerThread) {
  char buf[16];
  ASSERT_EQ(gpusel_parse_gpu_spec("bogus", buf, sizeof buf, nullptr), GPUSEL_BAD_INPUT);
  std::string other;
  std::thread([&] {
    other = gpusel_last_error();
    gpusel_parse_gpu_spec("also,bad,x", buf, sizeof buf, nullptr);
  }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(gpusel_last_error()).find("\"bogus\""), std::string::npos);
}

TEST(CApi, Version) {
  EXPECT_STREQ(gpusel_version(), GPUSEL_VERSION_STRING);
  EXPECT_EQ(std::string(GPUSEL_VERSION_STRING), std::to_string(GPUSEL_VERSION_MAJOR) + "." +
                                                    std::to_string(GPUSEL_VERSION_MINOR) + "." +
                                                    std::to_string(GPUSEL_VERSION_PATCH));
}
