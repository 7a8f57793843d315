// What a `gpusel bench bw` worker tells its parent, and the one definition of its JSON: the
// worker writes these, the parent reads them back (bench_ipc.hpp says where).
//   report  {"uuid", "name", "pci_bus_id", "l2_cache_bytes", "results": [result...]} or, when
//           the worker failed, {"error": message}
//   event   a step done: {"test", "sample" (0: the warm-ups), "seconds"}; or a test finished:
//           {"uuid", "name", "pci_bus_id", "test", "result": result}
//   result  {"test", "bytes", "samples": [GB/s...], "median", "min", "max", "verified", "failure"}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/bandwidth.hpp"

namespace gpusel::cli::bench {

// The GPU a worker measured, as CUDA names it.
struct WorkerGpu {
  std::string uuid;
  std::string name;
  std::string pci_bus_id;
};

// A worker's figures, written once when it ends.
struct WorkerReport {
  WorkerGpu gpu;
  std::uint64_t l2_cache_bytes = 0;  // 0 when unknown
  std::vector<BandwidthResult> results;
  std::string error;  // set when the worker failed (it said why on stderr); nothing else is then
};

// One line of a worker's progress: a step (the warm-ups or a sample) of `test` done, or, with
// `result` set, the test finished.
struct WorkerEvent {
  std::string test;
  int sample = 0;
  double seconds = 0;
  WorkerGpu gpu;                          // with `result` only
  std::optional<BandwidthResult> result;  // the finished test's figures
};

// One line of JSON each; invalid UTF-8 in a text is replaced.
std::string encode(const WorkerReport& report);
std::string encode(const WorkerEvent& event);
// nullopt for text that is not such JSON (a line still being written, a worker that died).
std::optional<WorkerReport> decode_report(const std::string& text);
std::optional<WorkerEvent> decode_event(const std::string& line);

}  // namespace gpusel::cli::bench
