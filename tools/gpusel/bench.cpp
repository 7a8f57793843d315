// gpusel bench bw: copy bandwidth of the selected GPUs, one worker process per GPU, each bound
// by UUID and placed near its GPU before it allocates host memory.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpusel/bandwidth.hpp"
#include "gpusel/cli11.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolve.hpp"
#include "gpusel/units.hpp"
#include "gpusel/worker.hpp"

namespace gpusel::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    if (!item.empty() && std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

BandwidthOptions checked_options(const BenchOptions& o) {
  BandwidthOptions b;
  b.tests = split(o.tests);
  std::string known;
  for (const char* t : kBandwidthTests) known += (known.empty() ? "" : ", ") + std::string(t);
  if (b.tests.empty())
    throw bad_input("--tests " + quote_value(o.tests) + " names no test; choose from " + known);
  for (const std::string& t : b.tests) {
    if (std::find(std::begin(kBandwidthTests), std::end(kBandwidthTests), t) ==
        std::end(kBandwidthTests)) {
      throw bad_input("--tests: unknown test " + quote_value(t) + "; choose from " + known);
    }
  }
  b.bytes = parse_size_option("--size", o.size, 4);
  b.copies = o.copies;
  b.samples = o.samples;
  return b;
}

std::string worker_file(const std::string& dir, const std::string& gpu) {
  return dir + "/" + gpu + ".json";
}

}  // namespace

CLI::App* setup_bench(CLI::App& app, BenchOptions& options) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks of the selected GPUs");
  bench->require_subcommand(1);
  CLI::App* bw =
      bench->add_subcommand("bw", "host<->device and device-local copy bandwidth, per GPU");
  add_gpu_option(*bw, options.gpus)->required();
  add_choice_options(*bw, options.choice, true);
  bw->add_option("--tests", options.tests,
                 "comma-separated: h2d, d2h, d2d, h2d-pageable, d2h-pageable, bidir")
      ->capture_default_str();
  bw->add_option("--size", options.size, "bytes per buffer, e.g. 512MiB")->capture_default_str();
  bw->add_option("--copies", options.copies, "timed copies per sample")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  bw->add_option("--samples", options.samples, "samples per test; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  bw->add_flag("--parallel", options.parallel,
               "measure all GPUs at once (they then share the host's links) and report the sum");
  bw->add_flag("--json", options.json, "print {\"results\": [...]}");
  return bench;
}

CLI::App* setup_bench_worker(CLI::App& app, BenchOptions& options) {
  CLI::App* cmd = app.add_subcommand("internal-bench-worker", "");
  cmd->group("");
  cmd->add_option("--tests", options.tests);
  cmd->add_option("--size", options.size);
  cmd->add_option("--copies", options.copies);
  cmd->add_option("--samples", options.samples);
  cmd->add_option("--out", options.out)->required();
  return cmd;
}

// In the worker: bind by UUID, measure, write the figures for the parent.
int run_bench_worker(const BenchOptions& options) {
  const BandwidthOptions b = checked_options(options);
  const char* gpu = std::getenv("GPUSEL_GPU");
  nlohmann::json out;
  int status = 0;
  try {
    assign_from_environment();
    const int ordinal = bind_assigned_gpu();
    const GpuIdentity id = gpu_identity(ordinal);
    out["uuid"] = id.uuid;
    out["name"] = id.name;
    out["pci_bus_id"] = id.pci_bus_id;
    out["l2_cache_bytes"] = id.l2_cache_bytes;
    out["results"] = nlohmann::json::array();
    for (const BandwidthResult& r : measure_bandwidth(b)) {
      out["results"].push_back({{"test", r.test},
                                {"bytes", r.bytes},
                                {"samples", r.gbps},
                                {"median", r.median},
                                {"min", r.min},
                                {"max", r.max},
                                {"verified", r.verified},
                                {"failure", r.failure}});
    }
  } catch (const Error& e) {
    out["error"] = e.what();
    print_error(std::string("GPU ") + (gpu ? gpu : "?") + ": " + e.what());
    status = e.exit_code();
  }
  std::ofstream(worker_file(options.out, gpu ? gpu : "unknown")) << out.dump();
  return status;
}

int run_bench(const BenchOptions& options) {
  const BandwidthOptions b = checked_options(options);
  const Acquisition held = acquire(options.gpus, options.choice, true);  // leased while it runs
  const Resolution& r = held.resolution;
  if (!r.resolved) {
    print_warning("NVML is unavailable (" + r.reason +
                  "); GPUs are matched by CUDA in each worker, without CPU placement");
  }
  for (const std::string& note : r.notes) print_note(note);
  std::vector<const GpuInfo*> info(r.gpus.size(), nullptr);
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    for (const GpuInfo& g : r.machine) {
      if (g.uuid == r.gpus[i]) info[i] = &g;
    }
  }
  std::vector<std::vector<int>> cpus(r.gpus.size());
  std::vector<std::string> warnings;
  if (r.resolved) {
    const std::vector<int> allowed = own_cpus();
    for (std::size_t i = 0; i < info.size(); ++i) {
      try {
        cpus[i] = plan_cpus({*info[i]}, CpuBinding::Node, allowed).front();
      } catch (const Error& e) {
        warnings.push_back(std::string("host buffers are not placed near the GPU: ") + e.what());
      }
    }
  }

  char dir_template[] = "/tmp/gpusel-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) throw failure("cannot make a temporary folder in /tmp");
  const std::string dir = dir_template;
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_dir{dir};

  const std::string self = fs::read_symlink("/proc/self/exe").string();
  LaunchOptions launch;
  launch.command = {self,        "internal-bench-worker",   "--tests",  options.tests,
                    "--size",    std::to_string(b.bytes),   "--copies", std::to_string(b.copies),
                    "--samples", std::to_string(b.samples), "--out",    dir};
  launch.grace_seconds = 10;
  const bool progress = isatty(2) && !options.json;
  int worst = 0;
  if (options.parallel) {
    launch.gpus = r.gpus;
    launch.cpus = cpus;
    if (progress)
      std::cerr << "gpusel: measuring " << r.gpus.size() << " GPUs at once...\r" << std::flush;
    worst = launch_workers(launch);
  } else {
    for (std::size_t i = 0; i < r.gpus.size(); ++i) {
      if (progress) {
        std::cerr << fmt::format("gpusel: measuring GPU {}/{} ({})...\r", i + 1, r.gpus.size(),
                                 r.gpus[i])
                  << std::flush;
      }
      launch.gpus = {r.gpus[i]};
      launch.cpus = {cpus[i]};
      worst = std::max(worst, launch_workers(launch));
    }
  }
  if (progress) std::cerr << std::string(80, ' ') << "\r" << std::flush;

  // Gather the workers' figures, in rank order.
  nlohmann::json results = nlohmann::json::array();
  bool all_verified = true;
  std::size_t no_figures = 0;
  std::map<std::string, double> sums;
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    nlohmann::json w;
    std::ifstream in(worker_file(dir, r.gpus[i]));
    if (!in || !(in >> w) || w.contains("error")) {
      ++no_figures;  // the worker said why on stderr
      continue;
    }
    const GpuInfo* g = info[i];
    const std::uint64_t l2 = w["l2_cache_bytes"].get<std::uint64_t>();
    if (l2 > 0 && b.bytes < 4 * l2) {
      warnings.push_back(
          fmt::format("GPU {}: {} buffers are under 4x its L2 cache ({}); device-local figures may "
                      "measure the cache, use --size {} or more",
                      w["uuid"].get<std::string>(), format_bytes(b.bytes), format_bytes(l2),
                      format_bytes(4 * l2)));
    }
    for (const auto& t : w["results"]) {
      nlohmann::json row;
      const std::string test = t["test"];
      row["uuid"] = w["uuid"];
      row["index"] = g ? nlohmann::json(g->index) : nlohmann::json(nullptr);
      row["name"] = w["name"];
      row["pci_bus_id"] = w["pci_bus_id"];
      row["test"] = test;
      row["bytes"] = t["bytes"];
      row["gbps"] = t["median"];
      row["gbps_min"] = t["min"];
      row["gbps_max"] = t["max"];
      row["samples"] = t["samples"];
      row["verified"] = t["verified"];
      if (!t["failure"].get<std::string>().empty()) row["failure"] = t["failure"];
      if (test == "d2d") row["traffic_gbps"] = 2 * t["median"].get<double>();
      all_verified = all_verified && t["verified"].get<bool>();
      sums[test] += t["median"].get<double>();
      // A PCIe figure far below what the link can carry.
      if (g && (test == "h2d" || test == "d2h") && g->pcie_generation > 0) {
        const double best = pcie_link_gbps(g->pcie_max_generation, g->pcie_max_width);
        const double now = pcie_link_gbps(g->pcie_generation, g->pcie_width);
        if (best > 0 && t["median"].get<double>() < 0.6 * best) {
          std::string why =
              now < best
                  ? fmt::format(" the link is trained down to Gen{} x{} (it can do Gen{} x{})",
                                g->pcie_generation, g->pcie_width, g->pcie_max_generation,
                                g->pcie_max_width)
                  : std::string(" check the slot, riser and BIOS PCIe settings");
          warnings.push_back(
              fmt::format("GPU {}: {} at {:.1f} GB/s is far below the {:.1f} GB/s a Gen{} x{} link "
                          "carries;{}",
                          g->uuid, test, t["median"].get<double>(), best, g->pcie_max_generation,
                          g->pcie_max_width, why));
        }
      }
      results.push_back(row);
    }
  }
  if (b.tests.end() != std::find_if(b.tests.begin(), b.tests.end(), [](const std::string& t) {
        return t.find("pageable") != std::string::npos;
      })) {
    warnings.push_back(
        "pageable tests measure copies through the driver's staging buffers, not the link itself");
  }
  if (options.parallel) {
    for (const std::string& test : b.tests) {
      if (sums.count(test))
        results.push_back({{"uuid", "all"},
                           {"index", nullptr},
                           {"test", test},
                           {"bytes", b.bytes},
                           {"gbps", sums[test]},
                           {"sum", true}});
    }
  }

  const auto sim = simulated_machine();
  if (options.json) {
    nlohmann::json out;
    out["results"] = results;
    out["warnings"] = warnings;
    out["simulated"] = sim ? nlohmann::json(*sim) : nlohmann::json(nullptr);
    out["copies"] = b.copies;
    out["samples"] = b.samples;
    std::cout << out.dump(2) << "\n";
  } else {
    fmt::print(
        "gpusel bench bw: {} buffers, {} copies per sample after {} warm-up copies, {} "
        "samples{}{}\n",
        format_bytes(b.bytes), b.copies, 4, b.samples,
        options.parallel ? ", all GPUs at once" : ", one GPU at a time",
        sim ? "; simulated machine " + *sim : std::string());
    fmt::print(
        "rates in GB/s (1e9 bytes per second) of bytes copied; d2d also shows its memory traffic "
        "(read + write)\n");
    fmt::print("{:<5} {:<40} {:<16} {:<12} {:>9} {:>9} {:>9}  {}\n", "INDEX", "UUID", "PCI BUS ID",
               "TEST", "MEDIAN", "MIN", "MAX", "CHECK");
    for (const auto& row : results) {
      if (row.contains("sum")) {
        fmt::print("{:<5} {:<40} {:<16} {:<12} {:>9.1f}  (sum of the medians)\n", "all", "", "",
                   row["test"].get<std::string>(), row["gbps"].get<double>());
        continue;
      }
      std::string extra;
      if (row.contains("traffic_gbps"))
        extra = fmt::format("  traffic {:.1f}", row["traffic_gbps"].get<double>());
      fmt::print("{:<5} {:<40} {:<16} {:<12} {:>9.1f} {:>9.1f} {:>9.1f}  {}{}\n",
                 row["index"].is_null() ? "-" : std::to_string(row["index"].get<unsigned>()),
                 row["uuid"].get<std::string>(), row["pci_bus_id"].get<std::string>(),
                 row["test"].get<std::string>(), row["gbps"].get<double>(),
                 row["gbps_min"].get<double>(), row["gbps_max"].get<double>(),
                 row["verified"].get<bool>()
                     ? "ok"
                     : "FAILED: " + row.value("failure", std::string("not verified")),
                 extra);
    }
  }
  for (const std::string& w : warnings) print_warning(w);
  if (no_figures > 0) {
    print_error(fmt::format("no figures from {} of {} GPUs; the messages above say why", no_figures,
                            r.gpus.size()));
  }
  if (!all_verified)
    print_error("copied data did not verify on some tests (FAILED in the CHECK column)");
  return (no_figures > 0 || !all_verified || worst != 0) ? 1 : 0;
}

}  // namespace gpusel::cli
