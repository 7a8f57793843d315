#include "bench_output.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "gpusel_detail.hpp"

namespace gpusel::cli::bench {

nlohmann::json make_row(const WorkerGpu& gpu, const BandwidthResult& t, const GpuInfo* g) {
  nlohmann::json row;
  row["uuid"] = gpu.uuid;
  row["index"] = g ? nlohmann::json(g->index) : nlohmann::json(nullptr);
  row["name"] = gpu.name;
  row["pci_bus_id"] = gpu.pci_bus_id;
  row["test"] = t.test;
  row["bytes"] = t.bytes;
  row["gbps"] = t.median;
  row["gbps_min"] = t.min;
  row["gbps_max"] = t.max;
  row["samples"] = t.gbps;
  row["verified"] = t.verified;
  if (!t.failure.empty()) row["failure"] = t.failure;
  if (t.test == "d2d") row["traffic_gbps"] = 2 * t.median;
  // The PCIe link's theoretical rate per direction (both directions for bidir), as trained now
  // and at its best.
  if (g && t.test != "d2d") {
    const double k = t.test == "bidir" ? 2 : 1;
    const double now = pcie_link_gbps(g->pcie_generation, g->pcie_width);
    const double best = pcie_link_gbps(g->pcie_max_generation, g->pcie_max_width);
    if (now > 0) row["link_gbps"] = k * now;
    if (best > 0) row["link_max_gbps"] = k * best;
  }
  return row;
}

nlohmann::json sum_row(const std::string& test, std::uint64_t bytes, double gbps) {
  return {{"uuid", "all"},  {"index", nullptr}, {"test", test},
          {"bytes", bytes}, {"gbps", gbps},     {"sum", true}};
}

void print_table_heading(const BandwidthOptions& b, bool parallel,
                         const std::optional<std::string>& sim) {
  fmt::print(
      "gpusel bench bw: {} buffers, {} copies per sample after {} warm-up copies, {} "
      "samples{}{}\n",
      detail::format_bytes(b.bytes), b.copies, b.warmup, b.samples,
      parallel ? ", all GPUs at once" : ", one GPU at a time",
      sim ? "; simulated machine " + *sim : std::string());
  fmt::print(
      "rates in GB/s (1e9 bytes per second) of bytes copied; d2d also shows its memory traffic "
      "(read + write)\n");
  fmt::print("{:<5} {:<40} {:<16} {:<12} {:>9} {:>9} {:>9}  {}\n", "INDEX", "UUID", "PCI BUS ID",
             "TEST", "MEDIAN", "MIN", "MAX", "CHECK");
  std::fflush(stdout);
}

std::string text_row(const nlohmann::json& row) {
  if (row.contains("sum")) {
    return fmt::format("{:<5} {:<40} {:<16} {:<12} {:>9.1f}  (sum of the medians)\n", "all", "", "",
                       row["test"].get<std::string>(), row["gbps"].get<double>());
  }
  std::string extra;
  if (row.contains("traffic_gbps"))
    extra = fmt::format("  traffic {:.1f}", row["traffic_gbps"].get<double>());
  return fmt::format("{:<5} {:<40} {:<16} {:<12} {:>9.1f} {:>9.1f} {:>9.1f}  {}{}\n",
                     row["index"].is_null() ? "-" : std::to_string(row["index"].get<unsigned>()),
                     row["uuid"].get<std::string>(), row["pci_bus_id"].get<std::string>(),
                     row["test"].get<std::string>(), row["gbps"].get<double>(),
                     row["gbps_min"].get<double>(), row["gbps_max"].get<double>(),
                     row["verified"].get<bool>()
                         ? "ok"
                         : "FAILED: " + row.value("failure", std::string("not verified")),
                     extra);
}

std::string json_document(const nlohmann::json& rows, const std::vector<std::string>& warnings,
                          const std::optional<std::string>& sim, const BandwidthOptions& b) {
  nlohmann::json out;
  out["results"] = rows;
  out["warnings"] = warnings;
  out["simulated"] = sim ? nlohmann::json(*sim) : nlohmann::json(nullptr);
  out["copies"] = b.copies;
  out["samples"] = b.samples;
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace gpusel::cli::bench
