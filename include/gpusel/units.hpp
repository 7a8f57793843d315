// gpusel: byte sizes, durations and CPU lists as users write them (pure, no I/O).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// A byte size as written, read once: the one parser behind every size gpusel takes (`bench bw
// --size`, `--min-free-memory`). Units, in any case: K, M, G, T, KiB, MiB, GiB, TiB, Ki, Mi, Gi,
// Ti (powers of 1024), kB, MB, GB, TB (powers of 1000), B, or none (bytes); a blank between the
// number and the unit is allowed. The number has digits and at most one dot.
struct ByteSize {
  enum class Problem {
    None,         // `bytes` holds the size
    NoNumber,     // it does not start with a number ("MiB", "", ".")
    Negative,     // it starts with a minus sign
    UnknownUnit,  // `unit` is not one of the units above
    Zero,         // zero bytes
    TooLarge,     // beyond 2^64 - 1 bytes
    NotWhole,     // a fraction of a byte ("1.5", "0.3KiB")
  };
  std::optional<std::uint64_t> bytes;
  Problem problem = Problem::None;
  std::string unit;  // the unit as written (trimmed), for messages
};
ByteSize read_byte_size(std::string_view text);

// read_byte_size's value alone: nullopt for anything it refuses.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// A duration in seconds: "30", "1.5", "1e10" (seconds), "90s", "15m", "2h", "1d" (letters in any
// case), or "inf" / "forever" (infinity). nullopt for anything else, a negative value or NaN.
std::optional<double> parse_duration(std::string_view text);

// 30 -> "30 s", 1.5 -> "1.5 s", 0.25 -> "0.25 s", 7200 -> "7200 s"; infinity -> "for ever".
std::string format_seconds(double seconds);

// "0-55,112-167" -> the CPUs in order. nullopt for a malformed list.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// The inverse: 0,1,2,3,8 -> "0-3,8".
std::string format_cpu_list(const std::vector<int>& cpus);

// 85899345920 -> "80 GiB"; exact binary units when they fit, else one decimal.
std::string format_bytes(std::uint64_t bytes);

GPUSEL_END_NAMESPACE
