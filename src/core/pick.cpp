// free:N: which GPUs are free, and which N of them sit best together.
#include "gpusel/pick.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

constexpr std::string_view kFree = "free:";

constexpr auto trim = detail::trim_blanks;

// How well a set sits together: lower is better.
enum Tier { kNvlink = 0, kSwitch = 1, kNuma = 2, kSpread = 3 };

std::string tier_text(int tier, const char* link) {
  switch (tier) {
    case kNvlink:
      return std::string("all connected by ") + link;
    case kSwitch:
      return "under one PCIe switch";
    case kNuma:
      return "on one NUMA node";
  }
  return "spread as little as the free GPUs allow";
}

// NVML's common-ancestor levels, 0 (one board) to 40 (one NUMA node), by tens: a pair whose
// ancestor is at most kLevelStep * k shares its group at level k. 50 (or unknown): nothing shared.
constexpr int kLevels = 5;
constexpr int kLevelStep = 10;
constexpr int kSystem = 50;

// More links than any GPU has (NVML_NVLINK_MAX_LINKS is 18): a source that never says Past.
constexpr unsigned kMaxLinks = 64;
// The most sets of a domain whose GPUs are not all linked to one another (a hybrid cube mesh)
// that are tried one by one; a larger such domain (none is built) is left out of the NVLink tier.
constexpr std::uint64_t kMaxMeshSets = 100000;

// A table of every pair (GpuLink), as a source: link by link, each GPU's NVLink peers in index
// order, so that a table whose NVLink pairs are not all-to-all is still read exactly.
class TableSource final : public TopologySource {
 public:
  explicit TableSource(std::vector<std::vector<GpuLink>> links) : links_(std::move(links)) {}

  NvlinkEnd nvlink_end(std::size_t gpu, unsigned link) override {
    NvlinkEnd end;
    unsigned seen = 0;
    for (std::size_t other = 0; other < links_.size(); ++other) {
      const GpuLink* l = at(gpu, other);
      if (other == gpu || l == nullptr || !l->nvlink) continue;
      if (seen++ == link) {
        end.kind = NvlinkEnd::Kind::Gpu;
        end.gpu = other;
        return end;
      }
    }
    end.kind = seen == 0 ? NvlinkEnd::Kind::None : NvlinkEnd::Kind::Past;
    return end;
  }
  std::optional<bool> nvlink(std::size_t a, std::size_t b) override {
    const GpuLink* l = at(a, b);
    return l != nullptr && l->nvlink;
  }
  int ancestor(std::size_t a, std::size_t b) override {
    const GpuLink* l = at(a, b);
    return l != nullptr ? l->ancestor : -1;
  }

 private:
  // The entry of the pair as the old table was read: [lower][higher].
  const GpuLink* at(std::size_t a, std::size_t b) const {
    const std::size_t lo = std::min(a, b), hi = std::max(a, b);
    return lo != hi && lo < links_.size() && hi < links_[lo].size() ? &links_[lo][hi] : nullptr;
  }
  std::vector<std::vector<GpuLink>> links_;
};

// Union-find over small integers.
class Groups {
 public:
  explicit Groups(std::size_t n) : parent_(n) {
    for (std::size_t i = 0; i < n; ++i) parent_[i] = i;
  }
  std::size_t find(std::size_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void join(std::size_t a, std::size_t b) { parent_[find(a)] = find(b); }

 private:
  std::vector<std::size_t> parent_;
};

// One candidate set and its standing; lower key is better.
struct Candidate {
  int tier = kSpread;
  int spread = kSystem;           // the widest common ancestor in the set (50 when unknown)
  std::uint64_t used = 0;         // memory in use, summed
  std::uint64_t utilization = 0;  // summed
  std::vector<std::size_t> set;   // positions, ascending
  auto key() const { return std::tie(tier, spread, used, utilization, set); }
};

// An NVLink domain among the free GPUs: all linked to one another (`clique`), or, for GPUs wired
// GPU to GPU, the links themselves (`peers`, by position).
struct Domain {
  std::vector<std::size_t> members;  // ascending
  bool clique = true;
  std::map<std::size_t, std::set<std::size_t>> peers;
};

class Picker {
 public:
  Picker(const std::vector<GpuInfo>& gpus, std::vector<std::size_t> free, TopologySource* source,
         std::size_t n)
      : gpus_(gpus), free_(std::move(free)), source_(source), n_(n) {
    // The order ties are broken in: least memory in use, then least utilisation, then index.
    // The best n of any group are its first n in this order (exchange argument: any set that
    // leaves out a GPU ranked before one it holds does no better on the sums, and is later in
    // index order when it ties).
    ranked_ = free_;
    std::sort(ranked_.begin(), ranked_.end(), [&](std::size_t a, std::size_t b) {
      return std::make_tuple(used(a), util(a), a) < std::make_tuple(used(b), util(b), b);
    });
    rank_.assign(gpus_.size(), 0);
    for (std::size_t r = 0; r < ranked_.size(); ++r) rank_[ranked_[r]] = r;
  }

  Candidate pick() {
    if (n_ == 1) return best_of(kNvlink, 0, {ranked_.front()});
    if (std::optional<Candidate> c = over_nvlink()) return *c;
    return over_pcie();
  }

 private:
  std::uint64_t used(std::size_t g) const { return gpus_[g].memory_used.value_or(0); }
  std::uint64_t util(std::size_t g) const { return gpus_[g].utilization.value_or(0); }

  // `members` in rank order.
  std::vector<std::size_t> by_rank(std::vector<std::size_t> members) const {
    std::sort(members.begin(), members.end(),
              [&](std::size_t a, std::size_t b) { return rank_[a] < rank_[b]; });
    return members;
  }

  // The first n of `ranked` (in rank order, at least n of them) as a candidate.
  Candidate best_of(int tier, int spread, const std::vector<std::size_t>& ranked) const {
    Candidate c;
    c.tier = tier;
    c.spread = spread;
    c.set.assign(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(n_));
    for (std::size_t g : c.set) {
      c.used += used(g);
      c.utilization += util(g);
    }
    std::sort(c.set.begin(), c.set.end());
    return c;
  }

  static void keep_best(std::optional<Candidate>& best, Candidate c) {
    if (!best || c.key() < best->key()) best = std::move(c);
  }

  // The common ancestor of two GPUs, asked of the source once per pair; -1 unknown.
  int ancestor(std::size_t a, std::size_t b) {
    if (source_ == nullptr) return -1;
    const std::uint64_t key = static_cast<std::uint64_t>(std::min(a, b)) << 32 | std::max(a, b);
    auto [it, fresh] = ancestors_.try_emplace(key, -1);
    if (fresh) it->second = source_->ancestor(a, b);
    return it->second;
  }

  // PCIe groups of `members` (ascending): for each, its group id at each level (ids are shared
  // only within one call). The common ancestors are taken to form a tree, as PCIe's do: a GPU
  // is compared with one member (the first) of each group it might join, level by level, so a
  // GPU costs a query per group it is told apart from, not one per GPU.
  std::map<std::size_t, std::array<std::size_t, kLevels>> pcie_groups(
      const std::vector<std::size_t>& members) {
    struct Node {
      std::size_t first;  // the member it is compared through
      std::vector<std::size_t> children;
    };
    std::vector<Node> nodes(1);  // [0]: the root, everything
    std::map<std::size_t, std::array<std::size_t, kLevels>> out;
    for (std::size_t g : members) {
      std::array<std::size_t, kLevels> ids{};
      std::size_t at = 0;
      for (int k = kLevels - 1; k >= 0; --k) {
        std::optional<std::size_t> into;
        for (std::size_t child : nodes[at].children) {
          const int level = ancestor(g, nodes[child].first);
          if (level >= 0 && level <= kLevelStep * k) {
            into = child;
            break;
          }
        }
        if (!into) {
          into = nodes.size();
          nodes.push_back(Node{g, {}});
          nodes[at].children.push_back(*into);
        }
        at = *into;
        ids[static_cast<std::size_t>(k)] = at;
      }
      out.emplace(g, ids);
    }
    return out;
  }

  // The best set of the lowest level at which some group of `members` holds n; nullopt when none
  // does below 50.
  std::optional<Candidate> tightest(int tier, const std::vector<std::size_t>& members,
                                    int max_level) {
    if (source_ == nullptr) return std::nullopt;
    const auto groups = pcie_groups(members);
    const std::vector<std::size_t> ranked = by_rank(members);
    for (int k = 0; k <= max_level; ++k) {
      std::map<std::size_t, std::vector<std::size_t>> at_level;  // group id -> members, ranked
      for (std::size_t g : ranked) at_level[groups.at(g)[static_cast<std::size_t>(k)]].push_back(g);
      std::optional<Candidate> best;
      for (const auto& [id, group] : at_level) {
        if (group.size() >= n_) keep_best(best, best_of(tier, kLevelStep * k, group));
      }
      if (best) return best;
    }
    return std::nullopt;
  }

  // ---- NVLink domains among the free GPUs

  // Reads a GPU's links: the first that reaches something, then (all_links) every other.
  struct Ends {
    bool unknown = false;  // the source cannot say: pair by pair
    std::vector<NvlinkEnd> up;
  };
  Ends read_links(std::size_t g, bool all_links) {
    Ends ends;
    for (unsigned link = 0; link < kMaxLinks; ++link) {
      NvlinkEnd e = source_->nvlink_end(g, link);
      if (e.kind == NvlinkEnd::Kind::Unknown) {
        ends.unknown = ends.up.empty();
        break;
      }
      if (e.kind == NvlinkEnd::Kind::None || e.kind == NvlinkEnd::Kind::Past) break;
      if (e.kind == NvlinkEnd::Kind::Down) continue;
      ends.up.push_back(std::move(e));
      if (!all_links) break;
    }
    return ends;
  }

  // Sorts `unplaced` into NVLink domains pair by pair: each GPU is compared with one member of
  // each domain (the one it last joined first), and starts a domain of its own when none links.
  void place_pairwise(const std::vector<std::size_t>& unplaced, std::vector<Domain>& domains) {
    std::vector<std::size_t> order;  // positions into `domains` that can take more, recent first
    for (std::size_t d = 0; d < domains.size(); ++d) {
      if (domains[d].clique) order.push_back(d);
    }
    for (std::size_t g : unplaced) {
      bool placed = false;
      for (std::size_t i = order.size(); i-- > 0;) {
        Domain& d = domains[order[i]];
        if (source_->nvlink(d.members.front(), g).value_or(false)) {
          d.members.push_back(g);
          std::rotate(order.begin() + static_cast<std::ptrdiff_t>(i),
                      order.begin() + static_cast<std::ptrdiff_t>(i) + 1, order.end());
          placed = true;
          break;
        }
      }
      if (!placed) {
        order.push_back(domains.size());
        domains.push_back(Domain{{g}, true, {}});
      }
    }
  }

  std::vector<Domain> nvlink_domains() {
    std::vector<Domain> domains;
    std::vector<std::size_t> unknown;
    std::map<std::string, std::vector<std::size_t>> by_switch;  // first device reached -> GPUs
    std::map<std::size_t, std::set<std::size_t>> wired;         // GPU-to-GPU links
    // What each free GPU's first link reaches decides how it is placed: a GPU whose first link
    // reaches another GPU is wired GPU to GPU, and its links are read one by one.
    enum Reach : unsigned char { kNone, kSwitchReach, kWired, kUnknown, kNotFree };
    std::vector<Reach> reach(gpus_.size(), kNotFree);
    std::map<std::size_t, std::vector<std::size_t>> wired_ends;
    for (std::size_t g : free_) {
      const Ends first = read_links(g, false);
      if (first.unknown) {
        reach[g] = kUnknown;
        unknown.push_back(g);
      } else if (first.up.empty()) {
        reach[g] = kNone;
      } else if (first.up.front().kind == NvlinkEnd::Kind::Device) {
        reach[g] = kSwitchReach;
        by_switch[first.up.front().device].push_back(g);
      } else {
        reach[g] = kWired;
        auto& ends = wired_ends[g];
        for (const NvlinkEnd& e : read_links(g, true).up) {
          if (e.kind == NvlinkEnd::Kind::Gpu) ends.push_back(e.gpu);
        }
      }
    }
    // A link counts from either end, between free GPUs that are both wired.
    for (const auto& [g, ends] : wired_ends) {
      wired[g];
      for (std::size_t p : ends) {
        if (p != g && p < gpus_.size() && reach[p] == kWired) {
          wired[g].insert(p);
          wired[p].insert(g);
        }
      }
    }
    // NVSwitch fabrics: GPUs whose first link reaches one switch are one fabric. When the first
    // links reach several switches, one GPU of each reads all its links, and switches reached by
    // one GPU are one fabric.
    std::vector<std::vector<std::size_t>> fabrics;
    if (by_switch.size() > 1) {
      std::map<std::string, std::size_t> device_id;
      auto id_of = [&](const std::string& device) {
        return device_id.try_emplace(device, device_id.size()).first->second;
      };
      std::vector<std::vector<std::size_t>> reached;
      for (const auto& [device, members] : by_switch) {
        std::vector<std::size_t> ids{id_of(device)};
        for (const NvlinkEnd& e : read_links(members.front(), true).up) {
          if (e.kind == NvlinkEnd::Kind::Device) ids.push_back(id_of(e.device));
        }
        reached.push_back(std::move(ids));
      }
      Groups fabric(device_id.size());
      for (const auto& ids : reached) {
        for (std::size_t id : ids) fabric.join(id, ids.front());
      }
      std::map<std::size_t, std::vector<std::size_t>> merged;
      for (const auto& [device, members] : by_switch) {
        auto& m = merged[fabric.find(device_id.at(device))];
        m.insert(m.end(), members.begin(), members.end());
      }
      for (auto& [id, members] : merged) {
        std::sort(members.begin(), members.end());
        fabrics.push_back(std::move(members));
      }
    } else if (!by_switch.empty()) {
      fabrics.push_back(std::move(by_switch.begin()->second));
    }
    // Each fabric's GPUs are checked against its first: a GPU NVML says is not its NVLink peer
    // (a fabric split in two, or switches that do not tell their fabrics apart) is placed pair
    // by pair.
    std::vector<std::size_t> apart;
    for (const std::vector<std::size_t>& members : fabrics) {
      Domain d;
      d.members.push_back(members.front());
      for (std::size_t i = 1; i < members.size(); ++i) {
        if (source_->nvlink(members.front(), members[i]).value_or(true)) {
          d.members.push_back(members[i]);
        } else {
          apart.push_back(members[i]);
        }
      }
      domains.push_back(std::move(d));
    }
    // GPU-to-GPU links: each connected part is a domain, all-to-all or not.
    std::set<std::size_t> seen;
    for (const auto& [start, links] : wired) {
      if (seen.count(start) != 0) continue;
      Domain d;
      std::vector<std::size_t> todo{start};
      seen.insert(start);
      while (!todo.empty()) {
        const std::size_t g = todo.back();
        todo.pop_back();
        d.members.push_back(g);
        for (std::size_t p : wired[g]) {
          if (seen.insert(p).second) todo.push_back(p);
        }
      }
      std::sort(d.members.begin(), d.members.end());
      for (std::size_t g : d.members) {
        d.clique = d.clique && wired[g].size() + 1 == d.members.size();
        d.peers[g] = wired[g];
      }
      domains.push_back(std::move(d));
    }
    std::sort(apart.begin(), apart.end());
    place_pairwise(apart, domains);
    place_pairwise(unknown, domains);
    for (Domain& d : domains) std::sort(d.members.begin(), d.members.end());
    return domains;
  }

  // The best set of a domain whose GPUs are not all linked: every set of n of its GPUs that are
  // all linked to one another, one by one (such a domain holds 8 GPUs on the machines built).
  std::optional<Candidate> over_mesh(const Domain& d) {
    std::uint64_t sets = 1;
    for (std::size_t i = 0; i < n_; ++i) {
      sets = sets * (d.members.size() - i) / (i + 1);
      if (sets > kMaxMeshSets) return std::nullopt;
    }
    const auto groups = pcie_groups(d.members);
    std::optional<Candidate> best;
    std::vector<std::size_t> idx(n_);
    for (std::size_t i = 0; i < n_; ++i) idx[i] = i;
    const std::size_t m = d.members.size();
    while (true) {
      bool linked = true;
      int spread = 0;
      for (std::size_t a = 0; a < n_ && linked; ++a) {
        const std::size_t ga = d.members[idx[a]];
        for (std::size_t b = a + 1; b < n_ && linked; ++b) {
          const std::size_t gb = d.members[idx[b]];
          linked = d.peers.at(ga).count(gb) != 0;
          int level = kSystem;
          for (int k = 0; k < kLevels && level == kSystem; ++k) {
            const auto ku = static_cast<std::size_t>(k);
            if (groups.at(ga)[ku] == groups.at(gb)[ku]) level = kLevelStep * k;
          }
          spread = std::max(spread, level);
        }
      }
      if (linked) {
        std::vector<std::size_t> set;
        for (std::size_t i : idx) set.push_back(d.members[i]);
        Candidate c = best_of(kNvlink, spread, set);
        keep_best(best, std::move(c));
      }
      std::size_t i = n_;
      while (i > 0 && idx[i - 1] == m - n_ + i - 1) --i;
      if (i == 0) break;
      ++idx[i - 1];
      for (std::size_t j = i; j < n_; ++j) idx[j] = idx[j - 1] + 1;
    }
    return best;
  }

  std::optional<Candidate> over_nvlink() {
    if (source_ == nullptr) return std::nullopt;
    std::optional<Candidate> best;
    for (const Domain& d : nvlink_domains()) {
      if (d.members.size() < n_) continue;
      if (!d.clique) {
        if (auto c = over_mesh(d)) keep_best(best, std::move(*c));
        continue;
      }
      std::optional<Candidate> c = tightest(kNvlink, d.members, kLevels - 1);
      keep_best(best, c ? std::move(*c) : best_of(kNvlink, kSystem, by_rank(d.members)));
    }
    return best;
  }

  // No NVLink domain holds n free GPUs: one PCIe switch (levels 0 to 20), else one NUMA node
  // (30, 40, else NVML's NUMA node for all), else the n best of all.
  Candidate over_pcie() {
    if (source_ != nullptr) {
      const auto groups = pcie_groups(free_);
      for (int k = 0; k < kLevels; ++k) {
        std::map<std::size_t, std::vector<std::size_t>> at_level;
        for (std::size_t g : ranked_)
          at_level[groups.at(g)[static_cast<std::size_t>(k)]].push_back(g);
        std::optional<Candidate> best;
        const int tier = kLevelStep * k <= 20 ? kSwitch : kNuma;
        for (const auto& [id, group] : at_level) {
          if (group.size() >= n_) keep_best(best, best_of(tier, kLevelStep * k, group));
        }
        if (best) return *best;
      }
    }
    // Sets that span groups of 40 are 50 apart somewhere; NVML's NUMA node still puts them on one.
    std::map<int, std::vector<std::size_t>> by_node;
    for (std::size_t g : ranked_) {
      if (gpus_[g].numa_node) by_node[*gpus_[g].numa_node].push_back(g);
    }
    std::optional<Candidate> best;
    for (const auto& [node, group] : by_node) {
      if (group.size() >= n_) keep_best(best, best_of(kNuma, kSystem, group));
    }
    return best ? *best : best_of(kSpread, kSystem, ranked_);
  }

  const std::vector<GpuInfo>& gpus_;
  std::vector<std::size_t> free_;  // ascending
  TopologySource* source_;
  std::size_t n_;
  std::vector<std::size_t> ranked_;
  std::vector<std::size_t> rank_;  // by position
  std::unordered_map<std::uint64_t, int> ancestors_;
};

}  // namespace

TopologySource::~TopologySource() = default;

Topology::Topology(std::vector<std::vector<GpuLink>> links)
    : source_(links.empty() ? nullptr : std::make_shared<TableSource>(std::move(links))) {}

Topology::Topology(std::shared_ptr<TopologySource> source) : source_(std::move(source)) {}

std::optional<PickResult> pick_free(const std::vector<GpuInfo>& gpus,
                                    const std::vector<FreeCandidate>& candidates,
                                    const Topology& links, int n, const char* numbering,
                                    const char* link) {
  std::vector<std::size_t> free;
  for (std::size_t i = 0; i < gpus.size() && i < candidates.size(); ++i) {
    if (candidates[i].eligible && candidates[i].not_free.empty()) free.push_back(i);
  }
  if (n <= 0 || free.size() < static_cast<std::size_t>(n)) return std::nullopt;
  const std::size_t free_count = free.size();
  Picker picker(gpus, std::move(free), links.source(), static_cast<std::size_t>(n));
  const Candidate best = picker.pick();
  PickResult r;
  r.picked = best.set;
  std::string indices;
  for (std::size_t i : r.picked)
    indices += (indices.empty() ? "" : ",") + std::to_string(gpus[i].index);
  r.why = std::string("picked ") + numbering + " " + indices + " of " + std::to_string(free_count) +
          " free GPU" + (free_count == 1 ? "" : "s") + ": " +
          (n == 1 ? std::string("the least used") : tier_text(best.tier, link));
  return r;
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

std::string busy_reason(const GpuInfo& gpu, const FreeLimits& limits) {
  if (gpu.processes && !gpu.processes->empty()) {
    std::string pids;
    for (const GpuProcess& p : *gpu.processes) {
      pids += (pids.empty() ? "" : ", ") + std::to_string(p.pid);
    }
    return std::to_string(gpu.processes->size()) + " compute process" +
           (gpu.processes->size() == 1 ? "" : "es") + " on it (pid " + pids + ")";
  }
  if (gpu.memory_used && gpu.memory_total_bytes > 0) {
    const std::uint64_t free_bytes =
        gpu.memory_total_bytes > *gpu.memory_used ? gpu.memory_total_bytes - *gpu.memory_used : 0;
    const std::uint64_t need =
        limits.min_free_memory.value_or(gpu.memory_total_bytes - gpu.memory_total_bytes / 10);
    if (free_bytes < need) {
      return detail::format_bytes(*gpu.memory_used) + " of memory in use, " +
             detail::format_bytes(free_bytes) + " free (needs " + detail::format_bytes(need) + ")";
    }
  }
  if (gpu.utilization && *gpu.utilization > limits.max_utilization) {
    return std::to_string(*gpu.utilization) + "% utilisation (over " +
           std::to_string(limits.max_utilization) + "%)";
  }
  return "";
}

std::optional<int> parse_free_request(std::string_view value) {
  const std::string_view v = trim(value);
  if (!detail::starts_with_ci(v, kFree)) return std::nullopt;
  const std::string_view count = trim(v.substr(kFree.size()));
  const std::string shown = detail::gpu_request_words() + " " + detail::quote_value(value);
  const auto refused = [&](const char* reason) {
    return about(Subject::GpuRequest, {{"request", std::string(value)}, {"reason", reason}});
  };
  if (count.find(',') != std::string_view::npos) {
    throw bad_input(shown +
                        ": free:N stands alone; it cannot be mixed with other GPUs (give either "
                        "free:N or a list of GPUs)",
                    refused("free-mixed"));
  }
  if (!is_gpu_index(count)) {
    throw bad_input(shown + ": after free: comes a number of GPUs (free:2 picks two free " +
                        "GPUs); " + detail::quote_value(count) + " is not one",
                    refused("free-count-unreadable"));
  }
  const std::optional<std::uint64_t> requested = detail::read_decimal(count, kMaxFreeRequest);
  if (!requested) {
    throw bad_input(shown + " asks for more GPUs than any machine holds",
                    refused("free-count-too-large"));
  }
  const int n = static_cast<int>(*requested);
  if (n == 0) {
    throw bad_input(shown + " asks for no GPU; ask for at least one (free:1)",
                    refused("free-count-zero"));
  }
  return n;
}

}  // namespace gpusel::detail
