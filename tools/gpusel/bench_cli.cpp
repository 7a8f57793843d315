#include "bench_cli.hpp"

#include <algorithm>

#include "args.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
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

BenchOptions read_bench(const CommandLine& line) {
  BenchOptions o;
  o.gpus = read_gpu_list(line);
  o.choice = read_choice_options(line);
  o.tests = line.value("--tests").value_or(o.tests);
  o.size = line.value("--size").value_or(o.size);
  o.copies = static_cast<int>(whole_option(line, "--copies", 1, 100000, o.copies));
  o.samples = static_cast<int>(whole_option(line, "--samples", 1, 1000, o.samples));
  o.parallel = line.flag("--parallel");
  o.json = line.flag("--json");
  o.plot = line.value("--plot").value_or("");
  o.csv = line.value("--csv").value_or("");
  return o;
}

BenchOptions read_bench_worker(const CommandLine& line) {
  BenchOptions o;
  o.tests = line.value("--tests").value_or(o.tests);
  o.size = line.value("--size").value_or(o.size);
  o.copies = static_cast<int>(whole_option(line, "--copies", 1, 100000, o.copies));
  o.samples = static_cast<int>(whole_option(line, "--samples", 1, 1000, o.samples));
  o.out = line.value("--out").value_or("");
  o.peers = line.value("--peers").value_or("");
  return o;
}

}  // namespace gpusel::cli
