// Internal: reading this process's environment variables. On Windows the library's C runtime
// (msvcrt, in the mingw build) keeps a private copy of the environment taken at its start, which
// does not see later changes made through SetEnvironmentVariableW (by a host such as Python,
// whose os.environ writes the Win32 environment): there env_value reads the Win32 environment
// with GetEnvironmentVariableW, as nvcuda does. On Linux it is std::getenv.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace gpusel::detail {

// The value of environment variable `name` (UTF-8); nullopt when it is not set.
std::optional<std::string> env_value(const char* name);

// Reading several variables in one pass over the environment (getenv walks the whole environment
// once per name: the 17 rank variables alone cost a worker's bind 6,500 instructions with 37
// variables set, and a Slurm job's environment holds a hundred). The names are indexed by a hash
// of their first three bytes, so that most entries of the environment are passed over after one
// look-up; names shorter than two bytes, and names past the 64th, are looked up alone.
inline constexpr std::size_t kEnvSlots = 256;

// The slot of a name, or of an environment entry ("NAME=value"), of at least two bytes. A name's
// third byte is read as the entry's is: a two-byte name's NUL stands for the entry's '='.
constexpr std::size_t env_slot(const char* text) {
  const char third = text[2] == '\0' ? '=' : text[2];
  return (static_cast<unsigned char>(text[0]) * 31u + static_cast<unsigned char>(text[1]) * 7u +
          static_cast<unsigned char>(third)) &
         (kEnvSlots - 1);
}

// A fixed list of names and its index, built at compile time where the names are constants:
//   static constexpr EnvNames<3> kNames({"A_VAR", "B_VAR", "C_VAR"});
template <std::size_t N>
struct EnvNames {
  std::array<const char*, N> names{};
  std::array<std::uint64_t, kEnvSlots> by_slot{};  // bit i: names[i] hashes here
  std::uint64_t indexed = 0;                       // bit i: names[i] is in by_slot
  constexpr explicit EnvNames(const std::array<const char*, N>& list) : names(list) {
    for (std::size_t i = 0; i < N && i < 64; ++i) {
      if (names[i][0] != '\0' && names[i][1] != '\0') {
        by_slot[env_slot(names[i])] |= std::uint64_t{1} << i;
        indexed |= std::uint64_t{1} << i;
      }
    }
  }
};

// values[i] = env_value(names[i]) for i < count: the names of `indexed` (bits of by_slot) in one
// pass over the environment, the others alone. The core of env_values.
void read_env_values(const char* const* names, std::size_t count, const std::uint64_t* by_slot,
                     std::uint64_t indexed, std::optional<std::string>* values);

// The values of a fixed list of names: values[i] is names[i]'s, as env_value reads it.
template <std::size_t N>
std::array<std::optional<std::string>, N> env_values(const EnvNames<N>& list) {
  std::array<std::optional<std::string>, N> values;
  read_env_values(list.names.data(), N, list.by_slot.data(), list.indexed, values.data());
  return values;
}

}  // namespace gpusel::detail
