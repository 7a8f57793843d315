#include "bench_cli.hpp"

#include <algorithm>

#include "args.hpp"
#include "common.hpp"
#include "gpusel/cli11.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"
#include "interface.hpp"

namespace gpusel::cli {
namespace {

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

}  // namespace

BandwidthOptions bench::checked_options(const BenchOptions& o) {
  BandwidthOptions b;
  b.tests = split(o.tests);
  std::string known;
  for (const char* t : kBandwidthTests) known += (known.empty() ? "" : ", ") + std::string(t);
  if (b.tests.empty())
    throw bad_input("--tests " + detail::quote_value(o.tests) + " names no test; choose from " +
                    known);
  for (const std::string& t : b.tests) {
    if (std::find(std::begin(kBandwidthTests), std::end(kBandwidthTests), t) ==
        std::end(kBandwidthTests)) {
      const std::string guess = closest(
          t, std::vector<std::string>(std::begin(kBandwidthTests), std::end(kBandwidthTests)));
      throw bad_input("--tests: unknown test " + detail::quote_value(t) +
                      (guess.empty() ? "" : "; did you mean '" + guess + "'?") + "; choose from " +
                      known);
    }
  }
  b.bytes = parse_size_option("--size", o.size, 4);
  b.copies = o.copies;
  b.samples = o.samples;
  return b;
}

void setup_bench(CLI::App& command, BenchOptions& options) {
  CLI::App* bench = &command;
  bench->require_subcommand(1);
  CLI::App* bw =
      bench->add_subcommand("bw", "host<->device, device-local and GPU-to-GPU copy bandwidth");
  set_completion(add_gpu_option(*bw, options.gpus, "--gpu", kGpuHelp, true)->required(), "gpu-all");
  add_choice_options(*bw, options.choice, true);
  set_completion(
      bw->add_option("--tests", options.tests,
                     "comma-separated: h2d, d2h, d2d, h2d-pageable, d2h-pageable, bidir, "
                     "p2p (each GPU to each other selected GPU)")
          ->capture_default_str()
          ->type_name("LIST"),
      "list", {"h2d", "d2h", "d2d", "h2d-pageable", "d2h-pageable", "bidir", "p2p"});
  bw->add_option("--size", options.size, "bytes per buffer, e.g. 512MiB")
      ->capture_default_str()
      ->type_name("BYTES");
  bw->add_option("--copies", options.copies, "timed copies per sample")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str()
      ->type_name("N");
  bw->add_option("--samples", options.samples, "samples per test; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str()
      ->type_name("N");
  bw->add_flag("--parallel", options.parallel,
               "measure all GPUs at once (they then share the host's links) and report the sum");
  bw->add_flag("--json", options.json, "print {\"results\": [...]}");
  bw->add_option("--plot", options.plot,
                 "also draw the rates beside each link's theoretical limit in an SVG file")
      ->type_name("FILE.svg");
  bw->add_option("--csv", options.csv, "also write the rows as CSV to FILE (- for stdout)")
      ->type_name("FILE");
}

void setup_bench_worker(CLI::App& command, BenchOptions& options) {
  CLI::App* cmd = &command;
  cmd->add_option("--tests", options.tests);
  cmd->add_option("--size", options.size);
  cmd->add_option("--copies", options.copies);
  cmd->add_option("--samples", options.samples);
  cmd->add_option("--out", options.out)->required();
  cmd->add_option("--peers", options.peers);
}

}  // namespace gpusel::cli
