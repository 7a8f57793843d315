// free:N: parsing, what counts as busy, and which GPUs sit best together.
#include "gpusel/pick.hpp"

#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"

namespace gpusel {
namespace {

using test::four_same;

TEST(Pick, ParseFreeRequest) {
  EXPECT_EQ(parse_free_request("free:2"), 2);
  EXPECT_EQ(parse_free_request(" FREE:02 "), 2);
  EXPECT_FALSE(parse_free_request("0,1").has_value());
  EXPECT_EQ(parse_gpu_spec("free:3"), (std::vector<std::string>{"free:3"}));
  EXPECT_EQ(parse_single_gpu("free:1"), "free:1");
  EXPECT_TRUE(is_free_entry("free:1"));
  for (const char* bad :
       {"free:0", "free:-1", "free:", "free:x", "free:2,0", "free:99999", "free:1.5"}) {
    try {
      parse_free_request(bad);
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
  g.memory_total = 80ull << 30;
  FreeLimits limits;
  EXPECT_EQ(busy_reason(g, limits), "");  // usage unknown: free
  g.processes = std::vector<GpuProcess>{{4242, 1ull << 30}};
  EXPECT_NE(busy_reason(g, limits).find("pid 4242"), std::string::npos);
  g.processes = std::vector<GpuProcess>{};
  g.memory_used = 20ull << 30;
  EXPECT_NE(busy_reason(g, limits).find("20 GiB of memory in use"), std::string::npos);
  limits.min_free_memory = 40ull << 30;
  EXPECT_EQ(busy_reason(g, limits), "");
  g.utilization = 50;
  EXPECT_NE(busy_reason(g, limits).find("50% utilisation"), std::string::npos);
  limits.max_utilization = 60;
  EXPECT_EQ(busy_reason(g, limits), "");
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

}  // namespace
}  // namespace gpusel
