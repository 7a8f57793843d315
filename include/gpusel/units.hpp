// gpusel: byte sizes, durations and CPU lists as users write them (pure, no I/O).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// "512MiB", "80GiB", "1.5GB", "4096", "64 KiB": binary (KiB, MiB, GiB, TiB) or decimal
// (kB, KB, MB, GB, TB) units, or plain bytes. nullopt for anything else, zero, or overflow.
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
