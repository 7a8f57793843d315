// Errors as data: codes and their names, the exception's defaults, and the CUDA probe carrying a
// failure from its child process without losing the code, the call or the driver's return value.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gpusel/error.hpp"
#include "probe_child.hpp"

using gpusel::ErrorCode;
using gpusel::Problem;

TEST(ErrorCodes, EachHasANameOfItsOwn) {
  std::set<std::string> names;
  for (int c = 0; c <= static_cast<int>(ErrorCode::BufferTooSmall); ++c) {
    const std::string name = gpusel::error_code_name(static_cast<ErrorCode>(c));
    EXPECT_NE(name, "unknown") << c;
    EXPECT_TRUE(names.insert(name).second) << name << " named twice";
  }
  EXPECT_STREQ(gpusel::error_code_name(static_cast<ErrorCode>(999)), "unknown");
  EXPECT_STREQ(gpusel::error_code_name(ErrorCode::CudaLinkStub), "cuda-link-stub");
}

TEST(ErrorCodes, AnErrorWithoutACodeTakesOneFromItsKind) {
  EXPECT_EQ(gpusel::bad_input("x").code(), ErrorCode::BadInput);
  EXPECT_EQ(gpusel::failure("x").code(), ErrorCode::Unspecified);
  const gpusel::Error e =
      gpusel::failure("cuInit failed", Problem{ErrorCode::DriverCallFailed, "cuInit", 999});
  EXPECT_EQ(e.code(), ErrorCode::DriverCallFailed);
  EXPECT_EQ(e.problem().call, "cuInit");
  EXPECT_EQ(e.problem().result, 999);
  EXPECT_EQ(e.exit_code(), 1);
}

TEST(ProbeWire, AFailureCrossesFromTheChildWhole) {
  struct Case {
    std::string message;
    Problem problem;
    std::string read_back;  // the message as the parent reads it (tabs and newlines are blanks)
  };
  const Case cases[] = {
      {"CUDA is unavailable: the libcuda.so.1 found is the CUDA toolkit's link stub",
       {ErrorCode::CudaLinkStub, "cuInit", 34},
       "CUDA is unavailable: the libcuda.so.1 found is the CUDA toolkit's link stub"},
      {"cuInit failed: CUDA_ERROR_UNKNOWN", {ErrorCode::DriverCallFailed, "cuInit", 999}, ""},
      {"a\ttab and\na newline", {ErrorCode::Unspecified, "", 0}, "a tab and a newline"},
      {"negative", {ErrorCode::DriverBroken, "cuDeviceGetCount", -3}, ""},
  };
  for (const Case& c : cases) {
    const std::string wire = gpusel::detail::serialise_failure(c.message, c.problem);
    std::string message;
    Problem problem;
    ASSERT_TRUE(gpusel::detail::parse_failure(wire, message, problem)) << wire;
    EXPECT_EQ(message, c.read_back.empty() ? c.message : c.read_back);
    EXPECT_EQ(problem.code, c.problem.code) << wire;
    EXPECT_EQ(problem.call, c.problem.call) << wire;
    EXPECT_EQ(problem.result, c.problem.result) << wire;
    // Windows line ends are read the same.
    std::string crlf = wire;
    crlf.insert(crlf.size() - 1, "\r");
    ASSERT_TRUE(gpusel::detail::parse_failure(crlf, message, problem)) << crlf;
    EXPECT_EQ(problem.code, c.problem.code);
  }
}

TEST(ProbeWire, WhatIsNotAFailureLineIsNotRead) {
  for (const std::string text :
       {"", "error\n", "error\tcuInit failed\n", "error\t7\tcuInit\t100\n",
        "error\tx\tcuInit\t1\tm\n", "error\t7\tcuInit\tmany\tm\n",
        "error\t0\t\t0\tnone is no failure\n", "error\t7\t\t0\ttwo\nlines\n",
        "0\tGPU-1\t\t00000000:01:00.0\t1\t9\t0\t1\tH100\n"}) {
    std::string message = "kept";
    Problem problem;
    EXPECT_FALSE(gpusel::detail::parse_failure(text, message, problem)) << text;
    EXPECT_EQ(message, "kept");
  }
}
