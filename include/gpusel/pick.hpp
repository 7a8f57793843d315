// gpusel: `--gpu free:N`, picking the N free GPUs that sit best together (pure, no I/O).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// The largest N that free:N accepts.
inline constexpr int kMaxFreeRequest = 4096;

// How two GPUs are connected, as NVML's topology reports it.
struct GpuLink {
  bool nvlink = false;  // NVLink between them (NVML's P2P status for NVLink is OK)
  int ancestor = -1;    // nvmlDeviceGetTopologyCommonAncestor: 0 same board, 10 one PCIe switch,
                        // 20 several switches, 30 one host bridge, 40 one NUMA node, 50 across
                        // NUMA nodes; -1 unknown
};

// What one NVLink of a GPU reaches.
struct NvlinkEnd {
  enum class Kind {
    None,     // the GPU has no NVLink at all
    Past,     // there is no link of that number (the GPU's links end before it)
    Down,     // the link is inactive or cannot be read
    Gpu,      // another GPU of the list, `gpu`
    Device,   // something else, an NVSwitch: `device` names it (its PCI bus id)
    Unknown,  // the driver cannot say what the GPU's links reach: ask pair by pair
  };
  Kind kind = Kind::Unknown;
  std::size_t gpu = 0;
  std::string device;
};

// Where a pick learns how the GPUs are connected. Positions index the GPU list. A pick asks only
// what it needs (nothing when fewer GPUs are free than asked for, or for free:1), asks each pair
// at most once, and asks per GPU (nvlink_end) before it asks per pair. A source may query the
// driver; it is used from one thread at a time.
class TopologySource {
 public:
  virtual ~TopologySource();
  // What NVLink `link` (0, 1, ...) of GPU `gpu` reaches.
  virtual NvlinkEnd nvlink_end(std::size_t gpu, unsigned link) = 0;
  // Whether GPUs `a` and `b` talk over NVLink (NVML's P2P status); nullopt: cannot say.
  virtual std::optional<bool> nvlink(std::size_t a, std::size_t b) = 0;
  // NVML's common ancestor of `a` and `b` (GpuLink::ancestor's levels), -1 when unknown.
  virtual int ancestor(std::size_t a, std::size_t b) = 0;
};

// A machine's topology for picking: nothing known (no NVLink, every common ancestor unknown), a
// table of every pair, or a source asked as the pick goes (query_nvml's, which reads NVML only
// for what a pick needs). Copies share the source.
class Topology {
 public:
  Topology() = default;
  // From an answer for every pair: `links[i][j]` over the GPU list (may be empty or short: the
  // missing pairs are unknown). Implicit, so that a table can be passed where a Topology is taken.
  Topology(std::vector<std::vector<GpuLink>> links);  // NOLINT(google-explicit-constructor)
  explicit Topology(std::shared_ptr<TopologySource> source);
  // The source a pick asks; nullptr when nothing is known.
  TopologySource* source() const noexcept { return source_.get(); }

 private:
  std::shared_ptr<TopologySource> source_;
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

// The best `n` free candidates: all NVLink-connected, else under one PCIe switch, else on one
// NUMA node, else the least spread; ties go to the least used (memory in use, then utilisation,
// each summed over the set), then the lowest indices. nullopt when fewer than `n` are free.
// Exact and polynomial (docs/picking.md): the topology is taken as a real machine's, where the
// GPUs of one NVSwitch fabric are all NVLink peers and PCIe common ancestors form a tree; NVLink
// made of direct GPU-to-GPU links (bridges, a DGX-1's hybrid cube mesh) is taken link by link.
// `numbering` names whose indices GpuInfo::index holds, and `link` what GpuLink::nvlink stands
// for (AMD GPUs: "XGMI"), for `why`.
std::optional<PickResult> pick_free(const std::vector<GpuInfo>& gpus,
                                    const std::vector<FreeCandidate>& candidates,
                                    const Topology& links, int n,
                                    const char* numbering = "nvidia-smi",
                                    const char* link = "NVLink");

GPUSEL_END_NAMESPACE
