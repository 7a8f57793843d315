// gpusel: `--gpu free:N`, picking the N free GPUs that sit best together (pure, no I/O).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// The largest N that free:N accepts.
inline constexpr int kMaxFreeRequest = 4096;

// "free:N" (any letter case, blanks around it ignored) -> N. nullopt when `value` is not a free
// request at all. Throws Error(BadInput) for free:0, a negative or malformed count, or free:N
// mixed with other entries.
std::optional<int> parse_free_request(std::string_view value);

// True for the canonical entry parse_gpu_spec returns for a free request ("free:N").
bool is_free_entry(std::string_view entry) noexcept;

// How two GPUs are connected, as NVML's topology reports it.
struct GpuLink {
  bool nvlink = false;  // NVLink between them (NVML's P2P status for NVLink is OK)
  int ancestor = -1;    // nvmlDeviceGetTopologyCommonAncestor: 0 same board, 10 one PCIe switch,
                        // 20 several switches, 30 one host bridge, 40 one NUMA node, 50 across
                        // NUMA nodes; -1 unknown
};

// What makes a GPU busy.
struct FreeLimits {
  std::optional<std::uint64_t> min_free_memory;  // bytes; unset: 90% of the GPU's memory free
  unsigned max_utilization = 10;                 // percent
};

// One GPU's standing for free:N.
struct FreeCandidate {
  bool eligible = true;  // false: not a choice at all (hidden by a preset, failed, MIG)
  std::string not_free;  // why it is not free (leased, processes, memory, utilisation); empty:
                         // free
};

struct PickResult {
  std::vector<std::size_t> picked;  // positions into the GPU list, in nvidia-smi order
  std::string why;                  // how they sit together, for stderr and --json
};

// Why `gpu` is not free under `limits` from NVML's usage alone (processes, memory, utilisation),
// or "" when it is. Unknown usage counts as free.
std::string busy_reason(const GpuInfo& gpu, const FreeLimits& limits);

// The best `n` free candidates: all NVLink-connected, else under one PCIe switch, else on one
// NUMA node, else the least spread; ties go to the least used, then the lowest indices. `links`
// is indexed [i][j] over the GPU list (may be empty: topology unknown). nullopt when fewer than
// `n` are free.
std::optional<PickResult> pick_free(const std::vector<GpuInfo>& gpus,
                                    const std::vector<FreeCandidate>& candidates,
                                    const std::vector<std::vector<GpuLink>>& links, int n);

GPUSEL_END_NAMESPACE
