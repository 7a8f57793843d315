#include "bench_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include "gpusel_detail.hpp"
#include "problem_json.hpp"

namespace gpusel::cli::bench {
namespace {

// NVML's NVLink path between two GPUs, asked once per pair (the live display and the final
// report both make each row).
std::optional<detail::NvlinkPath> nvlink_path(const std::string& a, const std::string& b) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::optional<detail::NvlinkPath>> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(a, b);
  if (auto it = known.find(key); it != known.end()) return it->second;
  return known[key] = detail::nvml_nvlink_path(a, b);
}

// A p2p row's peer, path and link: over NVLink (where NVML says the two are NVLink peers and the
// copy had peer access), over PCIe with peer access, or staged through host memory ("host").
// link_gbps: NVLink's links x their per-link rate, else the slower of the two PCIe links as
// trained now (what a staged copy crosses at best too).
void put_peer(nlohmann::json& row, const BandwidthResult& t, const GpuInfo* g,
              const GpuInfo* peer) {
  row["peer"] = {{"index", peer ? nlohmann::json(peer->index) : nlohmann::json(nullptr)},
                 {"uuid", t.peer_uuid}};
  row["peer_access"] = t.peer_access;
  std::optional<detail::NvlinkPath> nvlink;
  if (t.peer_access && g && peer) nvlink = nvlink_path(g->uuid, peer->uuid);
  if (nvlink) {
    row["path"] = "nvlink";
    row["nvlinks"] = nvlink->links;
    row["nvlink_version"] = nvlink->version;
    const double gbps = detail::nvlink_gbps(nvlink->links, nvlink->version);
    if (gbps > 0) row["link_gbps"] = gbps;
    return;
  }
  row["path"] = t.peer_access ? "pcie" : "host";
  if (g && peer) {
    const double a = pcie_link_gbps(g->pcie_generation, g->pcie_width);
    const double b = pcie_link_gbps(peer->pcie_generation, peer->pcie_width);
    if (a > 0 && b > 0) row["link_gbps"] = std::min(a, b);
  }
}

}  // namespace

const GpuInfo* find_gpu(const std::vector<const GpuInfo*>& gpus, const std::string& uuid) {
  for (const GpuInfo* g : gpus) {
    if (g != nullptr && detail::same_entry(g->uuid, uuid)) return g;
  }
  return nullptr;
}

nlohmann::json make_row(const WorkerGpu& gpu, const BandwidthResult& t, const GpuInfo* g,
                        const GpuInfo* peer) {
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
  // The failure as data (problem_json: code, call, result, subject, fields); null when none.
  row["problem"] = problem_json(t.problem);
  if (t.test == "d2d") row["traffic_gbps"] = 2 * t.median;
  if (t.test == "p2p") {
    put_peer(row, t, g, peer);
    return row;
  }
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
      "(read + write){}\n",
      std::find(b.tests.begin(), b.tests.end(), "p2p") != b.tests.end()
          ? "; p2p rows name the GPU copied to, the path and its theoretical GB/s"
          : "");
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
  std::string test = row["test"].get<std::string>();
  if (row.contains("peer")) {
    // p2p: the TEST column names the peer's index; the rest goes after CHECK.
    const nlohmann::json& peer = row["peer"];
    test +=
        " to " + (peer["index"].is_null() ? "-" : std::to_string(peer["index"].get<unsigned>()));
    // The path, and its rate where NVML gave one.
    const std::string rate =
        row.contains("link_gbps") ? fmt::format(" {:.1f}", row["link_gbps"].get<double>()) : "";
    const std::string path = row.value("path", std::string());
    std::string how;
    if (path == "nvlink") {
      const unsigned version = row["nvlink_version"].get<unsigned>();
      how = version > 0
                ? fmt::format("NVLink {} x v{}{}", row["nvlinks"].get<unsigned>(), version, rate)
                : fmt::format("NVLink, {} links", row["nvlinks"].get<unsigned>());
    } else if (path == "pcie") {
      how = "PCIe" + rate;
    } else {
      how = "peer access: no (staged through host memory" + (rate.empty() ? "" : "; PCIe" + rate) +
            ")";
    }
    extra = "  to " + peer["uuid"].get<std::string>() + ", " + how;
  }
  return fmt::format(
      "{:<5} {:<40} {:<16} {:<12} {:>9.1f} {:>9.1f} {:>9.1f}  {}{}\n",
      row["index"].is_null() ? "-" : std::to_string(row["index"].get<unsigned>()),
      row["uuid"].get<std::string>(), row["pci_bus_id"].get<std::string>(), test,
      row["gbps"].get<double>(), row["gbps_min"].get<double>(), row["gbps_max"].get<double>(),
      row["verified"].get<bool>() ? "ok"
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
