// free:N: which GPUs are free, and which N of them sit best together.
#include "gpusel/pick.hpp"

#include <algorithm>
#include <tuple>

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel/units.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

constexpr std::string_view kFree = "free:";

constexpr auto trim = detail::trim_blanks;

// How well a set sits together: lower is better.
enum Tier { kNvlink = 0, kSwitch = 1, kNuma = 2, kSpread = 3 };

const char* tier_text(int tier) {
  switch (tier) {
    case kNvlink:
      return "all connected by NVLink";
    case kSwitch:
      return "under one PCIe switch";
    case kNuma:
      return "on one NUMA node";
  }
  return "spread as little as the free GPUs allow";
}

struct Score {
  int tier = kSpread;
  int spread = 0;            // the widest common ancestor in the set (50 when unknown)
  std::uint64_t used = 0;    // memory in use, summed
  unsigned utilization = 0;  // summed
  std::vector<std::size_t> set;
  auto key() const { return std::tie(tier, spread, used, utilization, set); }
};

Score score(const std::vector<GpuInfo>& gpus, const std::vector<std::vector<GpuLink>>& links,
            const std::vector<std::size_t>& set) {
  Score s;
  s.set = set;
  bool all_nvlink = set.size() > 1, one_switch = true, one_node = true;
  for (std::size_t a = 0; a < set.size(); ++a) {
    const GpuInfo& g = gpus[set[a]];
    s.used += g.memory_used.value_or(0);
    s.utilization += g.utilization.value_or(0);
    for (std::size_t b = a + 1; b < set.size(); ++b) {
      const GpuLink* l =
          links.size() > set[a] && links[set[a]].size() > set[b] ? &links[set[a]][set[b]] : nullptr;
      const bool nvlink = l != nullptr && l->nvlink;
      const int ancestor = l != nullptr && l->ancestor >= 0 ? l->ancestor : 50;
      all_nvlink = all_nvlink && nvlink;
      one_switch = one_switch && ancestor <= 20;
      const GpuInfo& h = gpus[set[b]];
      const bool same_node = (g.numa_node && h.numa_node && *g.numa_node == *h.numa_node) ||
                             (l != nullptr && l->ancestor >= 0 && l->ancestor <= 40);
      one_node = one_node && same_node;
      s.spread = std::max(s.spread, ancestor);
    }
  }
  if (set.size() == 1) {
    s.tier = kNvlink;  // a single GPU sits as well as it can
  } else if (all_nvlink) {
    s.tier = kNvlink;
  } else if (one_switch) {
    s.tier = kSwitch;
  } else if (one_node) {
    s.tier = kNuma;
  }
  return s;
}

// Every set of `n` among `free`, in order, calling `visit` for each, up to `limit` sets.
template <typename Visit>
void combinations(const std::vector<std::size_t>& free, std::size_t n, std::size_t limit,
                  Visit visit) {
  std::vector<std::size_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = i;
  std::size_t seen = 0;
  while (seen++ < limit) {
    std::vector<std::size_t> set;
    for (std::size_t i : idx) set.push_back(free[i]);
    visit(set);
    std::size_t i = n;
    while (i > 0 && idx[i - 1] == free.size() - n + i - 1) --i;
    if (i == 0) return;
    ++idx[i - 1];
    for (std::size_t j = i; j < n; ++j) idx[j] = idx[j - 1] + 1;
  }
}

}  // namespace

std::optional<int> parse_free_request(std::string_view value) {
  const std::string_view v = trim(value);
  if (!starts_with_ci(v, kFree)) return std::nullopt;
  const std::string_view count = trim(v.substr(kFree.size()));
  const std::string shown = quote_value(value);
  if (count.find(',') != std::string_view::npos) {
    throw bad_input("--gpu " + shown +
                    ": free:N stands alone; it cannot be mixed with other GPUs (give either "
                    "free:N or a list of GPUs)");
  }
  if (!is_gpu_index(count)) {
    throw bad_input("--gpu " + shown +
                    ": after free: comes a number of GPUs (free:2 picks two free " + "GPUs); " +
                    quote_value(count) + " is not one");
  }
  const std::optional<std::uint64_t> requested = detail::read_decimal(count, kMaxFreeRequest);
  if (!requested) {
    throw bad_input("--gpu " + shown + " asks for more GPUs than any machine holds");
  }
  const int n = static_cast<int>(*requested);
  if (n == 0) throw bad_input("--gpu " + shown + " asks for no GPU; ask for at least one (free:1)");
  return n;
}

bool is_free_entry(std::string_view entry) noexcept {
  return starts_with_ci(entry, kFree);
}

std::string busy_reason(const GpuInfo& gpu, const FreeLimits& limits) {
  if (gpu.processes && !gpu.processes->empty()) {
    std::string pids;
    for (const GpuProcess& p : *gpu.processes) {
      pids += (pids.empty() ? "" : ", ") + std::to_string(p.pid);
    }
    return std::to_string(gpu.processes->size()) + " compute process" +
           (gpu.processes->size() == 1 ? "" : "es") + " on it (pid " + pids + ")";
  }
  if (gpu.memory_used && gpu.memory_total > 0) {
    const std::uint64_t free_bytes =
        gpu.memory_total > *gpu.memory_used ? gpu.memory_total - *gpu.memory_used : 0;
    const std::uint64_t need =
        limits.min_free_memory.value_or(gpu.memory_total - gpu.memory_total / 10);
    if (free_bytes < need) {
      return format_bytes(*gpu.memory_used) + " of memory in use, " + format_bytes(free_bytes) +
             " free (needs " + format_bytes(need) + ")";
    }
  }
  if (gpu.utilization && *gpu.utilization > limits.max_utilization) {
    return std::to_string(*gpu.utilization) + "% utilisation (over " +
           std::to_string(limits.max_utilization) + "%)";
  }
  return "";
}

std::optional<PickResult> pick_free(const std::vector<GpuInfo>& gpus,
                                    const std::vector<FreeCandidate>& candidates,
                                    const std::vector<std::vector<GpuLink>>& links, int n) {
  std::vector<std::size_t> free;
  for (std::size_t i = 0; i < gpus.size() && i < candidates.size(); ++i) {
    if (candidates[i].eligible && candidates[i].not_free.empty()) free.push_back(i);
  }
  if (n <= 0 || free.size() < static_cast<std::size_t>(n)) return std::nullopt;
  std::optional<Score> best;
  // Exhaustive over the sets of n (C(8,4) = 70 on an 8-GPU machine); on huge machines, the
  // first 200,000 sets in index order.
  combinations(free, static_cast<std::size_t>(n), 200000, [&](const std::vector<std::size_t>& set) {
    Score s = score(gpus, links, set);
    if (!best || s.key() < best->key()) best = std::move(s);
  });
  PickResult r;
  r.picked = best->set;
  std::string indices;
  for (std::size_t i : r.picked)
    indices += (indices.empty() ? "" : ",") + std::to_string(gpus[i].index);
  r.why = "picked nvidia-smi " + indices + " of " + std::to_string(free.size()) + " free GPU" +
          (free.size() == 1 ? "" : "s") + ": " +
          (n == 1 ? std::string("the least used") : std::string(tier_text(best->tier)));
  return r;
}

GPUSEL_END_NAMESPACE
