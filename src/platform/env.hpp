// Internal: reading this process's environment variables. On Windows the library's C runtime
// (msvcrt, in the mingw build) keeps a private copy of the environment taken at its start, which
// does not see later changes made through SetEnvironmentVariableW (by a host such as Python,
// whose os.environ writes the Win32 environment): there env_value reads the Win32 environment
// with GetEnvironmentVariableW, as nvcuda does. On Linux it is std::getenv.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpusel::detail {

// The value of environment variable `name` (UTF-8); nullopt when it is not set.
std::optional<std::string> env_value(const char* name);

// The values of several variables, as env_value reads each: values[i] is names[i]'s (the same
// size). On Linux one pass over the environment, however many names (getenv walks the whole
// environment once per name: 17 of them cost a worker's bind 6,500 instructions with 37
// variables set, and a Slurm job's environment holds a hundred); names past the 64th are looked
// up one by one.
std::vector<std::optional<std::string>> env_values(std::span<const char* const> names);

}  // namespace gpusel::detail
