// The bytes of a copy that the simulated libcuda.so.1 really moves in its sampled mode
// (GPUSEL_SIM_SAMPLED_COPIES=1, set by `gpusel bench bw` workers on a simulated machine), and that
// the bandwidth bench then writes and checks. Simulated copies take simulated time from the
// machine file, so moving every byte of a 512 MiB buffer would only cost real time; the sample
// still catches a copy that did not happen, went to the wrong place, was cut short or corrupted
// (the corrupt-copies fault flips a byte inside it). Header-only: the simulator is not linked
// against libgpusel.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpusel {

// Copies of at most 2 * kSampleEdge bytes are moved whole. Larger ones move their first and last
// kSampleEdge bytes, and one kSampleLine-byte line in each kSampleBlock-byte block in between, at
// an offset within the block that changes from block to block.
inline constexpr std::uint64_t kSampleEdge = 64 << 10;
inline constexpr std::uint64_t kSampleBlock = 64 << 10;
inline constexpr std::uint64_t kSampleLine = 64;

inline bool copy_is_sampled(std::uint64_t bytes) {
  return bytes > 2 * kSampleEdge;
}

// Calls f(offset, length) for each sampled range of a copy of `bytes` bytes, in ascending order,
// without overlaps.
template <typename F>
void for_each_sampled_range(std::uint64_t bytes, F&& f) {
  if (!copy_is_sampled(bytes)) {
    if (bytes > 0) f(std::uint64_t{0}, bytes);
    return;
  }
  f(std::uint64_t{0}, kSampleEdge);
  const std::uint64_t tail = bytes - kSampleEdge;
  for (std::uint64_t block = kSampleEdge / kSampleBlock; block * kSampleBlock < tail; ++block) {
    const std::uint64_t line = (block * 37) % (kSampleBlock / kSampleLine);
    const std::uint64_t at = block * kSampleBlock + line * kSampleLine;
    if (at >= tail) break;
    f(at, std::min(kSampleLine, tail - at));
  }
  f(tail, kSampleEdge);
}

// A sampled offset at or near `bytes / 2`: where the corrupt-copies fault flips a byte.
inline std::uint64_t sampled_middle(std::uint64_t bytes) {
  if (!copy_is_sampled(bytes)) return bytes / 2;
  const std::uint64_t block = (bytes / 2) / kSampleBlock;
  const std::uint64_t at =
      block * kSampleBlock + ((block * 37) % (kSampleBlock / kSampleLine)) * kSampleLine;
  return at < bytes - kSampleEdge ? at : bytes - kSampleEdge;
}

}  // namespace gpusel
