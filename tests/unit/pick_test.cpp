// free:N: parsing, what counts as busy, and which GPUs sit best together.
#include "gpusel/pick.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "fixtures.hpp"
#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

namespace gpusel {
namespace {

using test::four_same;

TEST(Pick, ParseFreeRequest) {
  EXPECT_EQ(detail::parse_free_request("free:2"), 2);
  EXPECT_EQ(detail::parse_free_request(" FREE:02 "), 2);
  EXPECT_FALSE(detail::parse_free_request("0,1").has_value());
  EXPECT_EQ(parse_gpu_spec("free:3"), (std::vector<std::string>{"free:3"}));
  EXPECT_EQ(parse_single_gpu("free:1"), "free:1");
  for (const char* bad :
       {"free:0", "free:-1", "free:", "free:x", "free:2,0", "free:99999", "free:1.5"}) {
    try {
      detail::parse_free_request(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_single_gpu("free:0"), Error);
}

TEST(Pick, BusyReasons) {
  GpuInfo g = four_same()[0];
  g.memory_total_bytes = 80ull << 30;
  FreeLimits limits;
  EXPECT_EQ(detail::busy_reason(g, limits), "");  // usage unknown: free
  g.processes = std::vector<GpuProcess>{{4242, 1ull << 30}};
  EXPECT_NE(detail::busy_reason(g, limits).find("pid 4242"), std::string::npos);
  g.processes = std::vector<GpuProcess>{};
  g.memory_used = 20ull << 30;
  EXPECT_NE(detail::busy_reason(g, limits).find("20 GiB of memory in use"), std::string::npos);
  limits.min_free_memory = 40ull << 30;
  EXPECT_EQ(detail::busy_reason(g, limits), "");
  g.utilization = 50;
  EXPECT_NE(detail::busy_reason(g, limits).find("50% utilisation"), std::string::npos);
  limits.max_utilization = 60;
  EXPECT_EQ(detail::busy_reason(g, limits), "");
}

// Eight GPUs: NVLink pairs (0,1) (2,3); PCIe switch per pair of pairs; NUMA 0 for 0-3, 1 for 4-7.
std::vector<std::vector<GpuLink>> topology() {
  std::vector<std::vector<GpuLink>> links(8, std::vector<GpuLink>(8));
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      GpuLink& l = links[a][b];
      l.nvlink = a / 2 == b / 2 && a != b;
      l.ancestor = a / 2 == b / 2 ? 10 : a / 4 == b / 4 ? 40 : 50;
    }
  }
  return links;
}

std::vector<GpuInfo> eight() {
  std::vector<GpuInfo> gpus;
  for (unsigned i = 0; i < 8; ++i) {
    gpus.push_back(
        test::make_gpu(i, "GPU-" + std::to_string(i) + "0000000-0000-0000-0000-000000000000"));
    gpus.back().numa_node = static_cast<int>(i / 4);
  }
  return gpus;
}

TEST(Pick, PrefersNvlinkThenSwitchThenNumaThenLeastUsed) {
  auto gpus = eight();
  std::vector<FreeCandidate> c(8);
  auto links = topology();
  auto r = pick_free(gpus, c, links, 2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 1}));
  EXPECT_NE(r->why.find("NVLink"), std::string::npos);
  // 1 busy: the next NVLink pair, not 0 with 2.
  c[1].not_free = "leased";
  r = pick_free(gpus, c, links, 2);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{2, 3}));
  // No NVLink pair left among 0-3: one NUMA node beats a lower index across nodes.
  c[3].not_free = "busy";
  for (int i = 4; i < 8; ++i) c[i].not_free = i == 5 ? "" : "busy";
  r = pick_free(gpus, c, links, 2);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 2}));
  EXPECT_NE(r->why.find("NUMA"), std::string::npos);
  // Ties go to the least used.
  c.assign(8, FreeCandidate{});
  gpus[0].memory_used = 5ull << 30;
  r = pick_free(gpus, c, links, 2);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{2, 3}));
  r = pick_free(gpus, c, links, 1);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{1}));
  // Not enough: nullopt. Ineligible GPUs (hidden by a preset) never count.
  for (int i = 0; i < 8; ++i) c[i].eligible = i < 3;
  EXPECT_FALSE(pick_free(gpus, c, links, 4));
  r = pick_free(gpus, c, links, 3);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 1, 2}));
  // Without topology, NVML's NUMA nodes still group them; then the least used.
  c.assign(8, FreeCandidate{});
  r = pick_free(gpus, c, {}, 2);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{1, 2}));
}

// ---- The documented order, set by set: every set of n free GPUs scored from the pair table
// (all pairs on NVLink; else every common ancestor at most 20; else every pair on one NUMA node,
// by NVML's node or an ancestor of at most 40; then the widest ancestor, unknown counting as 50;
// then memory in use, utilisation, and the lowest indices). The picker must agree with it.
struct Enumerated {
  std::vector<std::size_t> set;
  int tier = 0;
};
std::optional<Enumerated> pick_by_enumeration(const std::vector<GpuInfo>& gpus,
                                              const std::vector<FreeCandidate>& c,
                                              const std::vector<std::vector<GpuLink>>& links,
                                              std::size_t n) {
  std::vector<std::size_t> free;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (c[i].eligible && c[i].not_free.empty()) free.push_back(i);
  }
  if (free.size() < n) return std::nullopt;
  auto link = [&](std::size_t a, std::size_t b) {
    return links.empty() ? GpuLink{} : links[std::min(a, b)][std::max(a, b)];
  };
  using Key = std::tuple<int, int, std::uint64_t, std::uint64_t, std::vector<std::size_t>>;
  std::optional<Key> best;
  std::vector<bool> take(free.size(), false);
  std::fill(take.begin(), take.begin() + static_cast<std::ptrdiff_t>(n), true);
  do {
    std::vector<std::size_t> set;
    for (std::size_t i = 0; i < free.size(); ++i) {
      if (take[i]) set.push_back(free[i]);
    }
    bool nvlink = true, one_switch = true, one_node = true;
    int spread = 0;
    std::uint64_t used = 0, util = 0;
    for (std::size_t a = 0; a < set.size(); ++a) {
      used += gpus[set[a]].memory_used.value_or(0);
      util += gpus[set[a]].utilization.value_or(0);
      for (std::size_t b = a + 1; b < set.size(); ++b) {
        const GpuLink l = link(set[a], set[b]);
        const int anc = l.ancestor >= 0 ? l.ancestor : 50;
        nvlink = nvlink && l.nvlink;
        one_switch = one_switch && anc <= 20;
        const auto& na = gpus[set[a]].numa_node;
        const auto& nb = gpus[set[b]].numa_node;
        one_node = one_node && ((na && nb && *na == *nb) || anc <= 40);
        spread = std::max(spread, anc);
      }
    }
    const int tier = (set.size() == 1 || nvlink) ? 0 : one_switch ? 1 : one_node ? 2 : 3;
    Key key{tier, spread, used, util, set};
    if (!best || key < *best) best = key;
  } while (std::prev_permutation(take.begin(), take.end()));
  return Enumerated{std::get<4>(*best), std::get<0>(*best)};
}

const char* tier_words(int tier) {
  static const char* const words[] = {"all connected by NVLink", "under one PCIe switch",
                                      "on one NUMA node", "spread as little as"};
  return words[tier];
}

// A machine as a real one is built: NVLink domains all-to-all, PCIe as a tree (board, switch,
// switches, host bridge, NUMA node), optionally a hybrid cube mesh of direct links.
struct Layout {
  std::vector<int> domain;               // -1: no NVLink
  std::vector<std::array<int, 5>> tree;  // group at 0, 10, 20, 30, 40
  bool mesh = false;                     // GPUs 0-7: a DGX-1's hybrid cube mesh instead of domains
};

bool dgx1_link(std::size_t a, std::size_t b) {
  // Two fully linked quads (0-3, 4-7) and the links 0-4, 1-5, 2-6, 3-7 between them.
  if (a == b || a > 7 || b > 7) return false;
  return a / 4 == b / 4 || a % 4 == b % 4;
}

std::vector<std::vector<GpuLink>> table_of(const Layout& m) {
  const std::size_t n = m.tree.size();
  std::vector<std::vector<GpuLink>> links(n, std::vector<GpuLink>(n));
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      GpuLink& l = links[a][b];
      l.nvlink = m.mesh ? dgx1_link(a, b) : m.domain[a] >= 0 && m.domain[a] == m.domain[b];
      l.ancestor = 50;
      for (int k = 4; k >= 0; --k) {
        if (m.tree[a][static_cast<std::size_t>(k)] == m.tree[b][static_cast<std::size_t>(k)])
          l.ancestor = 10 * k;
      }
    }
  }
  return links;
}

TEST(Pick, AgreesWithEveryScoredSetOnSmallMachines) {
  std::mt19937 rng(20240601);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < 3000; ++round) {
    const auto count = static_cast<std::size_t>(pick(2, 10));
    Layout m;
    m.mesh = count >= 8 && pick(0, 4) == 0;
    // The tree: a random nesting, coarsest first; NUMA node = the group at 40.
    std::array<int, 5> fan{};
    for (int& f : fan) f = pick(1, 4);
    std::vector<GpuInfo> gpus;
    std::vector<FreeCandidate> c(count);
    const int domain_size = pick(1, 5);
    const bool some_without = pick(0, 2) == 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::array<int, 5> path{};
      int id = 0;
      for (int k = 4; k >= 0; --k) {
        id = id * 8 + pick(0, fan[static_cast<std::size_t>(k)] - 1);
        path[static_cast<std::size_t>(k)] = id;
      }
      m.tree.push_back(path);
      m.domain.push_back(some_without && pick(0, 3) == 0 ? -1 : static_cast<int>(i) / domain_size);
      gpus.push_back(test::make_gpu(static_cast<unsigned>(i), "GPU-" + std::to_string(i)));
      if (pick(0, 5) != 0) gpus.back().numa_node = path[4];
      if (pick(0, 1) == 0) gpus.back().memory_used = static_cast<std::uint64_t>(pick(0, 2)) << 30;
      if (pick(0, 2) == 0) gpus.back().utilization = static_cast<unsigned>(pick(0, 1));
      if (pick(0, 3) == 0) c[i].not_free = "leased";
      if (pick(0, 9) == 0) c[i].eligible = false;
    }
    const auto links = table_of(m);
    const std::size_t n = static_cast<std::size_t>(pick(1, static_cast<int>(count)));
    const auto want = pick_by_enumeration(gpus, c, links, n);
    const auto got = pick_free(gpus, c, links, static_cast<int>(n));
    ASSERT_EQ(want.has_value(), got.has_value()) << "round " << round;
    if (want) {
      ASSERT_EQ(got->picked, want->set) << "round " << round << ", free:" << n;
      if (n > 1) {
        ASSERT_NE(got->why.find(tier_words(want->tier)), std::string::npos)
            << "round " << round << ": " << got->why;
      }
    }
    // Without any topology, only NVML's NUMA nodes and the usage count.
    const auto want_blind = pick_by_enumeration(gpus, c, {}, n);
    const auto got_blind = pick_free(gpus, c, {}, static_cast<int>(n));
    if (want_blind) {
      ASSERT_EQ(got_blind->picked, want_blind->set) << "round " << round;
    }
  }
}

TEST(Pick, HybridCubeMeshIsReadLinkByLink) {
  // A DGX-1: NVLink within each quad and between GPUs i and i+4, nowhere else.
  Layout m;
  m.mesh = true;
  for (int i = 0; i < 8; ++i) {
    m.domain.push_back(0);
    m.tree.push_back({i, i / 2, i / 2, i / 4, i / 4});
  }
  std::vector<GpuInfo> gpus = eight();
  std::vector<FreeCandidate> c(8);
  const auto links = table_of(m);
  auto r = pick_free(gpus, c, links, 4);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_NE(r->why.find("NVLink"), std::string::npos);
  // 1 and 2 taken: 0-3, 0-4 and 3-7 are still NVLink pairs, but 4-5 share a PCIe switch.
  c[1].not_free = c[2].not_free = "leased";
  r = pick_free(gpus, c, links, 2);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{4, 5}));
  r = pick_free(gpus, c, links, 3);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{4, 5, 6}));
  EXPECT_NE(r->why.find("NVLink"), std::string::npos);
  c.assign(8, FreeCandidate{});
  for (int i : {1, 2, 3, 5, 6, 7}) c[static_cast<std::size_t>(i)].not_free = "leased";
  r = pick_free(gpus, c, links, 2);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 4}));
  EXPECT_NE(r->why.find("NVLink"), std::string::npos);
}

// A large machine as NVML shows it, counting what the picker asks: `gpus` H100s, 8 per NVSwitch
// domain (each domain's four switches at their own PCI addresses, or, as the simulator's double
// reports them today, at the same four addresses for every domain), two GPUs per PCIe switch,
// four per host bridge and NUMA node.
class CountingMachine final : public TopologySource {
 public:
  CountingMachine(std::size_t gpus, bool shared_switch_addresses)
      : gpus_(gpus), shared_(shared_switch_addresses) {}
  NvlinkEnd nvlink_end(std::size_t gpu, unsigned link) override {
    ++ends;
    NvlinkEnd e;
    if (link >= 18) {
      e.kind = NvlinkEnd::Kind::Past;
      return e;
    }
    e.kind = NvlinkEnd::Kind::Device;
    e.device = "0000000F:" + std::to_string(shared_ ? 0 : gpu / 8) + ":" + std::to_string(link % 4);
    return e;
  }
  std::optional<bool> nvlink(std::size_t a, std::size_t b) override {
    ++pairs;
    return a != b && a / 8 == b / 8;
  }
  int ancestor(std::size_t a, std::size_t b) override {
    ++pairs;
    if (a / 2 == b / 2) return 10;
    if (a / 4 == b / 4) return 40;
    return 50;
  }
  std::size_t gpus_;
  bool shared_;
  std::size_t ends = 0, pairs = 0;
};

std::vector<GpuInfo> h100s(std::size_t count) {
  std::vector<GpuInfo> gpus;
  for (std::size_t i = 0; i < count; ++i) {
    gpus.push_back(test::make_gpu(static_cast<unsigned>(i), "GPU-" + std::to_string(i)));
    gpus.back().numa_node = static_cast<int>(i / 4);
    gpus.back().memory_used = 0;
    gpus.back().utilization = 0;
  }
  return gpus;
}

TEST(Pick, LargeMachineLeasedGpuPicksAWholeFreeDomain) {
  for (bool shared : {false, true}) {
    auto gpus = h100s(64);
    std::vector<FreeCandidate> c(64);
    c[3].not_free = "leased";
    auto machine = std::make_shared<CountingMachine>(64, shared);
    const auto r = pick_free(gpus, c, Topology(machine), 8);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->picked, (std::vector<std::size_t>{8, 9, 10, 11, 12, 13, 14, 15})) << shared;
    EXPECT_NE(r->why.find("all connected by NVLink"), std::string::npos) << r->why;
    EXPECT_NE(r->why.find("of 63 free GPUs"), std::string::npos) << r->why;
  }
}

TEST(Pick, LargeMachinesOrderAndCost) {
  for (std::size_t count : {8u, 64u, 256u, 1024u}) {
    auto gpus = h100s(count);
    std::vector<FreeCandidate> c(count);
    auto machine = std::make_shared<CountingMachine>(count, false);
    Topology topo(machine);
    // Idle: the first domain, and in it the two switches of one NUMA node.
    auto r = pick_free(gpus, c, topo, 4);
    EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 1, 2, 3})) << count;
    // Per GPU its first link, and every link of one GPU per domain; pairs only within domains.
    EXPECT_LE(machine->ends, 4 * count) << count;
    EXPECT_LE(machine->pairs, 6 * count) << count;
    // Some memory in use on GPU 0: the same switch pair elsewhere in the domain is as close.
    gpus[0].memory_used = 1ull << 30;
    r = pick_free(gpus, c, topo, 2);
    EXPECT_EQ(r->picked, (std::vector<std::size_t>{2, 3})) << count;
    gpus[0].memory_used = 0;
    if (count == 8) continue;
    // One GPU busy in every domain: no domain holds 8, so one PCIe switch is not to be had
    // either; one NUMA node cannot hold 8 either: the least used, lowest indices.
    for (std::size_t i = 0; i < count; i += 8) c[i + 5].not_free = "busy";
    r = pick_free(gpus, c, topo, 8);
    EXPECT_NE(r->why.find("spread"), std::string::npos) << r->why;
    EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 1, 2, 3, 4, 6, 7, 8})) << count;
    // ... but 4 on one NUMA node are: 0-3.
    r = pick_free(gpus, c, topo, 4);
    EXPECT_EQ(r->picked, (std::vector<std::size_t>{0, 1, 2, 3})) << count;
    EXPECT_NE(r->why.find("NVLink"), std::string::npos) << r->why;
  }
}

TEST(Pick, AsksNothingWhenItNeedNot) {
  auto gpus = h100s(1024);
  std::vector<FreeCandidate> c(1024);
  for (std::size_t i = 0; i < 1024; ++i) c[i].not_free = i % 200 == 0 ? "" : "busy";
  auto machine = std::make_shared<CountingMachine>(1024, false);
  Topology topo(machine);
  EXPECT_FALSE(pick_free(gpus, c, topo, 8));  // 6 free: a waiting free:8 reads no topology
  auto r = pick_free(gpus, c, topo, 1);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{0}));
  EXPECT_EQ(machine->ends + machine->pairs, 0u);
}

TEST(Pick, SharedSwitchAddressesAreToldApartPairByPair) {
  // All domains' switches at one address (as the simulator's double answers): the domains are
  // still told apart, by NVML's P2P status, one check per GPU plus one per domain and earlier
  // domain.
  const std::size_t count = 256;
  auto gpus = h100s(count);
  std::vector<FreeCandidate> c(count);
  for (std::size_t i = 0; i < count; i += 8) c[i].not_free = "busy";
  c[200].not_free = c[201].not_free = "";  // one domain left whole: 200-207
  auto machine = std::make_shared<CountingMachine>(count, true);
  const auto r = pick_free(gpus, c, Topology(machine), 8);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{200, 201, 202, 203, 204, 205, 206, 207}));
  EXPECT_NE(r->why.find("NVLink"), std::string::npos);
}

TEST(Pick, UnknownLinksArePlacedPairByPair) {
  // A source that cannot say what links reach (no nvmlDeviceGetNvLinkRemotePciInfo_v2): NVML's
  // P2P status alone places the GPUs.
  class PairsOnly final : public TopologySource {
   public:
    NvlinkEnd nvlink_end(std::size_t, unsigned) override { return {}; }
    std::optional<bool> nvlink(std::size_t a, std::size_t b) override { return a / 4 == b / 4; }
    int ancestor(std::size_t a, std::size_t b) override { return a / 2 == b / 2 ? 10 : 40; }
  };
  auto gpus = eight();
  std::vector<FreeCandidate> c(8);
  c[0].not_free = "busy";
  const auto r = pick_free(gpus, c, Topology(std::make_shared<PairsOnly>()), 4);
  EXPECT_EQ(r->picked, (std::vector<std::size_t>{4, 5, 6, 7}));
  EXPECT_NE(r->why.find("NVLink"), std::string::npos);
}

}  // namespace
}  // namespace gpusel
