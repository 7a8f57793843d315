#include "bench_diagnosis.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpusel_detail.hpp"

namespace gpusel::cli::bench {

std::optional<std::string> cache_warning(const WorkerReport& report, std::uint64_t bytes) {
  const std::uint64_t l2 = report.l2_cache_bytes;
  if (l2 == 0 || bytes >= 4 * l2) return std::nullopt;
  return fmt::format(
      "GPU {}: {} buffers are under 4x its L2 cache ({}); device-local figures may measure the "
      "cache, use --size {} or more",
      report.gpu.uuid, detail::format_bytes(bytes), detail::format_bytes(l2),
      detail::format_bytes(4 * l2));
}

std::optional<std::string> link_warning(const BandwidthResult& t, const GpuInfo* g) {
  if (!g || (t.test != "h2d" && t.test != "d2h") || g->pcie_generation == 0) return std::nullopt;
  const double best = pcie_link_gbps(g->pcie_max_generation, g->pcie_max_width);
  const double now = pcie_link_gbps(g->pcie_generation, g->pcie_width);
  if (best <= 0 || t.median >= 0.6 * best) return std::nullopt;
  const std::string why =
      now < best ? fmt::format(" the link is trained down to Gen{} x{} (it can do Gen{} x{})",
                               g->pcie_generation, g->pcie_width, g->pcie_max_generation,
                               g->pcie_max_width)
                 : std::string(" check the slot, riser and BIOS PCIe settings");
  return fmt::format(
      "GPU {}: {} at {:.1f} GB/s is far below the {:.1f} GB/s a Gen{} x{} link carries;{}", g->uuid,
      t.test, t.median, best, g->pcie_max_generation, g->pcie_max_width, why);
}

std::vector<std::string> test_warnings(const BandwidthOptions& b) {
  std::vector<std::string> out;
  if (std::any_of(b.tests.begin(), b.tests.end(),
                  [](const std::string& t) { return t.find("pageable") != std::string::npos; })) {
    out.push_back(
        "pageable tests measure copies through the driver's staging buffers, not the link itself");
  }
  return out;
}

}  // namespace gpusel::cli::bench
