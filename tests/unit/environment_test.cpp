// The library reads the process's current environment: on Windows the Win32 environment (as
// nvcuda does), not the C runtime's copy taken at start, which misses later changes made through
// SetEnvironmentVariableW (by a host such as Python, whose os.environ writes there).
#include <gtest/gtest.h>
#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <stdlib.h>
#endif

#include <optional>
#include <string>

#include "gpusel/resolution.hpp"

namespace {

void set_variable(const char* name, const char* value) {
#ifdef _WIN32
  // Through Win32 alone: the C runtime's copy of the environment does not see this.
  const std::wstring wname(name, name + std::char_traits<char>::length(name));
  if (value == nullptr) {
    ASSERT_TRUE(SetEnvironmentVariableW(wname.c_str(), nullptr));
  } else {
    const std::wstring wvalue(value, value + std::char_traits<char>::length(value));
    ASSERT_TRUE(SetEnvironmentVariableW(wname.c_str(), wvalue.c_str()));
  }
#else
  if (value == nullptr) {
    ASSERT_EQ(::unsetenv(name), 0);
  } else {
    ASSERT_EQ(::setenv(name, value, 1), 0);
  }
#endif
}

TEST(Environment, CudaEnvSeesTheCurrentEnvironment) {
  set_variable("CUDA_VISIBLE_DEVICES", "1,0");
  set_variable("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  gpusel::CudaEnv env = gpusel::cuda_env_from_environment();
  EXPECT_EQ(env.visible_devices, std::optional<std::string>("1,0"));
  EXPECT_EQ(env.device_order, std::optional<std::string>("PCI_BUS_ID"));
  set_variable("CUDA_VISIBLE_DEVICES", "");
  set_variable("CUDA_DEVICE_ORDER", nullptr);
  env = gpusel::cuda_env_from_environment();
  EXPECT_EQ(env.visible_devices, std::optional<std::string>(""));
  EXPECT_EQ(env.device_order, std::nullopt);
  set_variable("CUDA_VISIBLE_DEVICES", nullptr);
  EXPECT_EQ(gpusel::cuda_env_from_environment().visible_devices, std::nullopt);
}

}  // namespace
