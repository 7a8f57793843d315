// gpusel bench bw: copy bandwidth of the selected GPUs, one worker process per GPU, each bound
// by UUID and placed near its GPU before it allocates host memory. This file runs the workers and
// gathers their figures; the command line is bench_cli.cpp, the worker bench_worker.cpp, their
// files bench_ipc.cpp (in bench_schema.cpp's JSON), the live display bench_display.cpp, the
// diagnosis bench_diagnosis.cpp and the output bench_output.cpp and bench_report.cpp.
#include <fmt/format.h>
#include <cstdio>
#ifdef _WIN32
#include <io.h>  // isatty
#else
#include <unistd.h>
#endif

#include <algorithm>
#include <filesystem>
#include <map>

#include "bench_cli.hpp"
#include "bench_diagnosis.hpp"
#include "bench_display.hpp"
#include "bench_ipc.hpp"
#include "bench_output.hpp"
#include "bench_report.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {
namespace {

namespace fs = std::filesystem;

// Refuses --plot and --csv values that could not be written, before anything is measured.
void check_outputs(const BenchOptions& options) {
  if (!options.plot.empty()) {
    check_output_path("--plot", options.plot);
    std::string ext = fs::path(options.plot).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext != ".svg") {
      throw bad_input("--plot " + detail::quote_value(options.plot) +
                      ": gpusel draws SVG only; name the file .svg (`rsvg-convert -o chart.png "
                      "chart.svg` makes a PNG of it)");
    }
  }
  if (!options.csv.empty()) {
    check_output_path("--csv", options.csv);
    if (options.csv == "-" && options.json)
      throw bad_input("--csv - and --json both write to stdout; give --csv a file name");
  }
}

// p2p copies between the selected GPUs: refuses (Error(BadInput)) fewer than two.
void check_peers(const BandwidthOptions& b, const std::vector<std::string>& gpus) {
  if (std::find(b.tests.begin(), b.tests.end(), "p2p") == b.tests.end() || gpus.size() >= 2) return;
  throw bad_input(fmt::format(
      "--tests p2p copies from each selected GPU to each other one, and --gpu selected {} ({}); "
      "select two or more (e.g. --gpu 0,1 or --gpu all)",
      gpus.size() == 1 ? "only one GPU" : "no GPU", detail::join_entries(gpus)));
}

// The worker's command line. With p2p, each worker is told every GPU of the job, and copies to
// the others' GPUs: it opens a context on each. (run_bench sets no placement check: the workers
// are gpusel's own, and each binds its GPU by UUID.)
std::vector<std::string> worker_command(const BenchOptions& options, const BandwidthOptions& b,
                                        const std::vector<std::string>& gpus,
                                        const std::string& folder) {
  std::vector<std::string> command = {
      executable_path(), "internal-bench-worker",   "--tests",  options.tests,
      "--size",          std::to_string(b.bytes),   "--copies", std::to_string(b.copies),
      "--samples",       std::to_string(b.samples), "--out",    folder};
  if (std::find(b.tests.begin(), b.tests.end(), "p2p") != b.tests.end()) {
    std::string peers;
    for (const std::string& g : gpus) peers += (peers.empty() ? "" : ",") + g;
    command.insert(command.end(), {"--peers", peers});
  }
  return command;
}

// The copies are CUDA's (cuMemcpy*): AMD GPUs, whose HIP copies are not measured yet, refused.
void refuse_amd(const BenchOptions& options, const Resolution& r) {
  if (r.vendor != "amd") return;
  std::string asked;
  for (const std::string& t : options.gpus.texts()) asked += (asked.empty() ? "" : ",") + t;
  throw failure("bench bw measures copies through CUDA, on NVIDIA GPUs; --gpu " + asked +
                    " names AMD GPUs, which it does not measure (docs/amd.md says what works on "
                    "AMD GPUs)",
                about(Subject::GpuRequest, {{"reason", "amd-gpus"}}));
}

// AMD GPUs refused before any is leased or waited for: asked where the machine may be AMD's, or
// an entry has an AMD id's form (no dash past "GPU-").
void refuse_amd_early(const BenchOptions& options) {
  const std::vector<std::string> texts = options.gpus.texts();
  if (nvml_usable() && std::none_of(texts.begin(), texts.end(),
                                    [](const std::string& t) { return detail::amd_id_form(t); }))
    return;
  refuse_amd(options,
             resolve_gpus(options.gpus, cuda_env_from_environment(), probe_helper_when_needed()));
}

}  // namespace

int run_bench(const BenchOptions& options) {
  const BandwidthOptions b = bench::checked_options(options);
  check_outputs(options);
  refuse_amd_early(options);
  const Acquisition held = acquire(options.gpus, options.choice, true);  // leased while it runs
  const Resolution& r = held.resolution;
  check_peers(b, r.gpus);
  if (!r.resolved) {
    print_warning("NVML is unavailable (" + r.reason +
                  "); GPUs are matched by CUDA in each worker, without CPU placement");
  }
  for (const Note& note : r.notes) print_note(note.text);
  const std::vector<std::optional<GpuInfo>> full = resolved_in_full(r);
  std::vector<const GpuInfo*> info(r.gpus.size(), nullptr);
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    if (full[i]) info[i] = &*full[i];
  }
  std::vector<std::vector<int>> cpus(r.gpus.size());
  std::vector<std::string> warnings;
  if (r.resolved) {
    const std::vector<int> allowed = own_cpus();
    for (std::size_t i = 0; i < info.size(); ++i) {
      try {
        cpus[i] = plan_cpus({*info[i]}, CpuBinding::Node, allowed).front();
      } catch (const Error& e) {
        warnings.push_back(std::string("host buffers are not placed near the GPU: ") + said(e));
      }
    }
  }

  const bench::TempFolder folder;
  const auto sim = simulated_machine();
  // The text table goes to stdout unless --json or --csv - takes it.
  const bool table = !options.json && options.csv != "-";
  if (table) bench::print_table_heading(b, options.parallel, sim);

  LaunchOptions launch;
  launch.command = worker_command(options, b, r.gpus, folder.path());
  launch.grace_seconds = 10;
  bench::Display display(folder.path(), r.gpus, info, b, options.parallel, table, isatty(2) != 0);
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
      // The first failure's status: a crash's NTSTATUS (0xC0000005) is negative as an int, so
      // std::max would drop it.
      const int rc = launch_workers(launch);
      if (worst == 0) worst = rc;
    }
  }
  display.stop();

  // Gather the workers' figures, in rank order.
  nlohmann::json results = nlohmann::json::array();
  bool all_verified = true;
  std::size_t no_figures = 0;
  std::map<std::string, double> sums;
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    const std::optional<bench::WorkerReport> w = bench::read_report(folder.path(), r.gpus[i]);
    if (!w || !w->error.empty()) {
      ++no_figures;  // the worker said why on stderr
      continue;
    }
    const GpuInfo* g = info[i];
    if (auto warning = bench::cache_warning(*w, b.bytes)) warnings.push_back(*warning);
    std::size_t n = 0;
    for (const BandwidthResult& t : w->results) {
      const nlohmann::json row = bench::make_row(w->gpu, t, g, bench::find_gpu(info, t.peer_uuid));
      all_verified = all_verified && t.verified;
      if (t.test != "p2p") sums[t.test] += t.median;  // no sum over pairs: they share links
      // A row the display did not print as it was measured (its event was not read).
      if (table && n++ >= display.printed(i)) to_stdout() << bench::text_row(row);
      if (auto warning = bench::link_warning(t, g)) warnings.push_back(*warning);
      results.push_back(row);
    }
  }
  for (const std::string& w : bench::test_warnings(b)) warnings.push_back(w);
  if (options.parallel) {
    for (const std::string& test : b.tests) {
      if (sums.count(test)) {
        const nlohmann::json row = bench::sum_row(test, b.bytes, sums[test]);
        if (table) to_stdout() << bench::text_row(row);
        results.push_back(row);
      }
    }
  }
  to_stdout() << flushed;

  if (options.json) to_stdout() << bench::json_document(results, warnings, sim, b);
  if (!options.csv.empty()) write_output("--csv", options.csv, bench_csv(results));
  if (!options.plot.empty()) {
    const std::string subtitle =
        fmt::format("{} buffers, {} copies per sample, median of {} samples; {}{}",
                    detail::format_bytes(b.bytes), b.copies, b.samples,
                    options.parallel ? "all GPUs at once" : "one GPU at a time",
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
