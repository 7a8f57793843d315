// gpusel bench bw: copy bandwidth of the selected GPUs, one worker process per GPU, each bound
// by UUID and placed near its GPU before it allocates host memory.
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "args.hpp"
#include "bench_report.hpp"
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

// The worker's progress, one JSON object a line, appended as it goes.
std::string events_file(const std::string& dir, const std::string& gpu) {
  return dir + "/" + gpu + ".events";
}

nlohmann::json result_json(const BandwidthResult& r) {
  return {{"test", r.test}, {"bytes", r.bytes}, {"samples", r.gbps},      {"median", r.median},
          {"min", r.min},   {"max", r.max},     {"verified", r.verified}, {"failure", r.failure}};
}

// One row of the report, from a worker's identity (`w`), one of its results (`t`) and what NVML
// says of the GPU (null without NVML).
nlohmann::json make_row(const nlohmann::json& w, const nlohmann::json& t, const GpuInfo* g) {
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
  // The PCIe link's theoretical rate per direction (both directions for bidir), as trained now
  // and at its best.
  if (g && test != "d2d") {
    const double k = test == "bidir" ? 2 : 1;
    const double now = pcie_link_gbps(g->pcie_generation, g->pcie_width);
    const double best = pcie_link_gbps(g->pcie_max_generation, g->pcie_max_width);
    if (now > 0) row["link_gbps"] = k * now;
    if (best > 0) row["link_max_gbps"] = k * best;
  }
  return row;
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

std::string format_seconds(double s) {
  if (s < 60) return fmt::format("{:.0f} s", std::max(1.0, std::ceil(s)));
  const long total = std::lround(s);
  if (total < 3600) return fmt::format("{} min {:02} s", total / 60, total % 60);
  return fmt::format("{} h {:02} min", total / 3600, (total % 3600) / 60);
}

// Follows the workers' event files while they run: prints each row as it is measured (text
// output), and a progress line with an estimate of the time left on stderr when it is a terminal.
class Display {
 public:
  Display(std::string dir, const std::vector<std::string>& gpus,
          const std::vector<const GpuInfo*>& info, const BandwidthOptions& b, bool parallel,
          bool rows, bool progress)
      : dir_(std::move(dir)),
        gpus_(gpus),
        info_(info),
        b_(b),
        parallel_(parallel),
        rows_(rows),
        progress_(progress),
        state_(gpus.size()) {}

  ~Display() { stop(); }

  // Sequential runs: the GPU now being measured.
  void set_current(std::size_t i) { current_ = i; }

  void start() {
    if (!rows_ && !progress_) return;
    // The supervisor reads INT, TERM, HUP, QUIT and CHLD from a signalfd: they must stay blocked
    // in this thread, or the kernel could deliver one here, where its default action applies.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_ = std::thread([this] { loop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  // Stops following, after a last look at the files (prints rows not printed yet).
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    poll();
    clear_line();
  }

  // Rows of GPU i already printed.
  std::size_t printed(std::size_t i) const { return state_[i].rows; }

 private:
  struct PerGpu {
    std::uint64_t offset = 0;  // read so far of the events file
    std::size_t steps = 0;     // warm-ups and samples done
    std::size_t rows = 0;      // rows printed
    std::string test;          // where it stands
    int sample = 0;
  };

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      poll();
      if (progress_) draw();
      lock.lock();
      wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; });
    }
  }

  void poll() {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      PerGpu& p = state_[i];
      std::ifstream in(events_file(dir_, gpus_[i]), std::ios::binary);
      if (!in) continue;
      in.seekg(static_cast<std::streamoff>(p.offset));
      std::string line;
      while (std::getline(in, line)) {
        if (in.eof()) break;  // a line still being written
        p.offset += line.size() + 1;
        nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
        if (e.is_discarded()) continue;
        if (e.contains("result")) {
          if (rows_) {
            clear_line();
            std::cout << text_row(make_row(e, e["result"], info_[i])) << std::flush;
          }
          ++p.rows;
          continue;
        }
        const std::string test = e.value("test", std::string());
        const int sample = e.value("sample", 0);
        const double seconds = e.value("seconds", 0.0);
        auto& [sum, n] = step_seconds_[{test, sample == 0}];
        sum += seconds;
        ++n;
        all_seconds_ += seconds;
        ++all_steps_;
        ++p.steps;
        p.test = test;
        p.sample = sample;
        last_event_ = std::chrono::steady_clock::now();
      }
    }
  }

  // Seconds left for GPU i, from the steps measured so far (per test, warm-up and samples apart).
  std::optional<double> left_for(std::size_t i) const {
    if (all_steps_ == 0) return std::nullopt;
    const double mean = all_seconds_ / static_cast<double>(all_steps_);
    double left = 0;
    std::size_t step = 0;
    for (const std::string& test : b_.tests) {
      for (int s = 0; s <= b_.samples; ++s, ++step) {
        if (step < state_[i].steps) continue;
        auto it = step_seconds_.find({test, s == 0});
        left += it != step_seconds_.end() ? it->second.first / it->second.second : mean;
      }
    }
    return left;
  }

  void draw() {
    const std::size_t per_gpu = b_.tests.size() * static_cast<std::size_t>(b_.samples + 1);
    std::size_t done = 0;
    for (const PerGpu& p : state_) done += p.steps;
    const std::size_t total = per_gpu * gpus_.size();
    std::optional<double> left;
    if (all_steps_ > 0) {
      double sum = 0, most = 0;
      for (std::size_t i = 0; i < gpus_.size(); ++i) {
        const double l = *left_for(i);
        sum += l;
        most = std::max(most, l);
      }
      const double since =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - last_event_).count();
      left = std::max(0.0, (parallel_ ? most : sum) - since);
    }
    std::string where;
    if (parallel_) {
      where = fmt::format("{} GPUs at once", gpus_.size());
    } else {
      const std::size_t i = std::min<std::size_t>(current_, gpus_.size() - 1);
      const PerGpu& p = state_[i];
      where = fmt::format("GPU {}/{}", i + 1, gpus_.size());
      if (info_[i] != nullptr) where += fmt::format(" (index {})", info_[i]->index);
      if (!p.test.empty()) {
        where += p.sample == 0 ? fmt::format(", {} warm-up done", p.test)
                               : fmt::format(", {} sample {}/{}", p.test, p.sample, b_.samples);
      }
    }
    std::string line =
        fmt::format("gpusel: measuring {}; {}% done, {}", where, total ? 100 * done / total : 0,
                    left ? "about " + format_seconds(*left) + " left" : "estimating the time left");
    winsize ws{};
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col)
      line.resize(ws.ws_col - 1);
    std::cerr << "\r" << line << "\33[K" << std::flush;
    drawn_ = true;
  }

  void clear_line() {
    if (drawn_) std::cerr << "\r\33[K" << std::flush;
    drawn_ = false;
  }

  std::string dir_;
  std::vector<std::string> gpus_;
  std::vector<const GpuInfo*> info_;
  BandwidthOptions b_;
  bool parallel_, rows_, progress_;
  std::vector<PerGpu> state_;
  std::atomic<std::size_t> current_{0};
  std::map<std::pair<std::string, bool>, std::pair<double, int>> step_seconds_;
  double all_seconds_ = 0;
  std::size_t all_steps_ = 0;
  std::chrono::steady_clock::time_point last_event_ = std::chrono::steady_clock::now();
  bool drawn_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

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
  bw->add_option("--plot", options.plot,
                 "also draw the rates beside each link's theoretical limit in an SVG file")
      ->type_name("FILE.svg");
  bw->add_option("--csv", options.csv, "also write the rows as CSV to FILE (- for stdout)")
      ->type_name("FILE");
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

// In the worker: bind by UUID, measure, write the figures for the parent (and each step as it
// ends, for its progress display).
int run_bench_worker(const BenchOptions& options) {
  BandwidthOptions b = checked_options(options);
  const char* gpu = std::getenv("GPUSEL_GPU");
  const std::string name = gpu ? gpu : "unknown";
  if (simulated_machine()) {
    // Simulated copies take simulated time; moving every byte would only cost real time. The
    // double then moves a sample of each buffer, and the bench writes and checks that sample.
    setenv("GPUSEL_SIM_SAMPLED_COPIES", "1", 1);
    b.sampled = true;
  }
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
    std::ofstream events(events_file(options.out, name), std::ios::app);
    auto observe = [&](const BandwidthProgress& p) {
      nlohmann::json e;
      if (p.result != nullptr) {
        e = {{"uuid", id.uuid},
             {"name", id.name},
             {"pci_bus_id", id.pci_bus_id},
             {"test", p.test},
             {"result", result_json(*p.result)}};
      } else {
        e = {{"test", p.test}, {"sample", p.sample}, {"seconds", p.seconds}};
      }
      events << e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"
             << std::flush;
    };
    for (const BandwidthResult& r : measure_bandwidth(b, observe))
      out["results"].push_back(result_json(r));
  } catch (const Error& e) {
    out["error"] = e.what();
    print_error("GPU " + name + ": " + e.what());
    status = e.exit_code();
  }
  std::ofstream(worker_file(options.out, name))
      << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return status;
}

int run_bench(const BenchOptions& options) {
  const BandwidthOptions b = checked_options(options);
  if (!options.plot.empty()) {
    check_output_path("--plot", options.plot);
    std::string ext = fs::path(options.plot).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext != ".svg") {
      throw bad_input("--plot " + quote_value(options.plot) +
                      ": gpusel draws SVG only; name the file .svg (`rsvg-convert -o chart.png "
                      "chart.svg` makes a PNG of it)");
    }
  }
  if (!options.csv.empty()) {
    check_output_path("--csv", options.csv);
    if (options.csv == "-" && options.json)
      throw bad_input("--csv - and --json both write to stdout; give --csv a file name");
  }
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

  const auto sim = simulated_machine();
  // The text table goes to stdout unless --json or --csv - takes it.
  const bool table = !options.json && options.csv != "-";
  if (table) {
    fmt::print(
        "gpusel bench bw: {} buffers, {} copies per sample after {} warm-up copies, {} "
        "samples{}{}\n",
        format_bytes(b.bytes), b.copies, b.warmup, b.samples,
        options.parallel ? ", all GPUs at once" : ", one GPU at a time",
        sim ? "; simulated machine " + *sim : std::string());
    fmt::print(
        "rates in GB/s (1e9 bytes per second) of bytes copied; d2d also shows its memory traffic "
        "(read + write)\n");
    fmt::print("{:<5} {:<40} {:<16} {:<12} {:>9} {:>9} {:>9}  {}\n", "INDEX", "UUID", "PCI BUS ID",
               "TEST", "MEDIAN", "MIN", "MAX", "CHECK");
    std::fflush(stdout);
  }

  const std::string self = fs::read_symlink("/proc/self/exe").string();
  LaunchOptions launch;
  launch.command = {self,        "internal-bench-worker",   "--tests",  options.tests,
                    "--size",    std::to_string(b.bytes),   "--copies", std::to_string(b.copies),
                    "--samples", std::to_string(b.samples), "--out",    dir};
  launch.grace_seconds = 10;
  Display display(dir, r.gpus, info, b, options.parallel, table, isatty(2) != 0);
  display.start();
  int worst = 0;
  if (options.parallel) {
    launch.gpus = r.gpus;
    launch.cpus = cpus;
    worst = launch_workers(launch);
  } else {
    for (std::size_t i = 0; i < r.gpus.size(); ++i) {
      display.set_current(i);
      launch.gpus = {r.gpus[i]};
      launch.cpus = {cpus[i]};
      worst = std::max(worst, launch_workers(launch));
    }
  }
  display.stop();

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
    std::size_t n = 0;
    for (const auto& t : w["results"]) {
      const nlohmann::json row = make_row(w, t, g);
      const std::string test = t["test"];
      all_verified = all_verified && t["verified"].get<bool>();
      sums[test] += t["median"].get<double>();
      // A row the display did not print as it was measured (its event was not read).
      if (table && n++ >= display.printed(i)) std::cout << text_row(row);
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
      if (sums.count(test)) {
        nlohmann::json row = {{"uuid", "all"},    {"index", nullptr},   {"test", test},
                              {"bytes", b.bytes}, {"gbps", sums[test]}, {"sum", true}};
        if (table) std::cout << text_row(row);
        results.push_back(row);
      }
    }
  }
  std::cout << std::flush;

  if (options.json) {
    nlohmann::json out;
    out["results"] = results;
    out["warnings"] = warnings;
    out["simulated"] = sim ? nlohmann::json(*sim) : nlohmann::json(nullptr);
    out["copies"] = b.copies;
    out["samples"] = b.samples;
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  if (!options.csv.empty()) write_output("--csv", options.csv, bench_csv(results));
  if (!options.plot.empty()) {
    const std::string subtitle = fmt::format(
        "{} buffers, {} copies per sample, median of {} samples; {}{}", format_bytes(b.bytes),
        b.copies, b.samples, options.parallel ? "all GPUs at once" : "one GPU at a time",
        sim ? "; simulated machine " + *sim : std::string());
    write_output("--plot", options.plot, bench_svg(results, subtitle));
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
