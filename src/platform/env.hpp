// Internal: reading this process's environment variables. On Windows the library's C runtime
// (msvcrt, in the mingw build) keeps a private copy of the environment taken at its start, which
// does not see later changes made through SetEnvironmentVariableW (by a host such as Python,
// whose os.environ writes the Win32 environment): there env_value reads the Win32 environment
// with GetEnvironmentVariableW, as nvcuda does. On Linux it is std::getenv.
#pragma once

#include <optional>
#include <string>

namespace gpusel::detail {

// The value of environment variable `name` (UTF-8); nullopt when it is not set.
std::optional<std::string> env_value(const char* name);

}  // namespace gpusel::detail
