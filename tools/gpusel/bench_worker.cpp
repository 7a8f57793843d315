// gpusel bench bw's worker (internal-bench-worker): one per GPU, started by run_bench with the
// GPU assigned in its environment. It binds by UUID, measures, and tells the parent its figures
// (and each step as it ends, for the progress display) through bench_ipc.hpp's files.
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "bench_ipc.hpp"
#include "common.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/worker.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {
namespace {

// The CUDA ordinals of the job's GPUs (`list`: their entries, UUIDs where NVML resolved them,
// comma-separated), for p2p. An entry CUDA does not list by UUID is taken as a CUDA ordinal when
// it is a number (the parent had no NVML); otherwise throws Error(Failure).
std::vector<int> peer_ordinals(const std::string& list) {
  std::vector<int> out;
  if (list.empty()) return out;
  const std::vector<CudaDevice> devices = cuda_devices();
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string entry = list.substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) continue;
    int found = -1;
    for (const CudaDevice& d : devices) {
      if (detail::same_entry(entry, d.uuid)) found = d.cuda_ordinal;
    }
    if (found < 0 && entry.find_first_not_of("0123456789") == std::string::npos &&
        entry.size() < 6 && std::stoi(entry) < static_cast<int>(devices.size())) {
      found = std::stoi(entry);
    }
    if (found < 0) throw failure("p2p: GPU " + entry + " is not visible to CUDA in this worker");
    out.push_back(found);
  }
  return out;
}

}  // namespace

int run_bench_worker(const BenchOptions& options) {
  BandwidthOptions b = bench::checked_options(options);
  const char* gpu = std::getenv("GPUSEL_GPU");
  const std::string name = gpu ? gpu : "unknown";
  if (simulated_machine()) {
    // Simulated copies take simulated time; moving every byte would only cost real time. The
    // double then moves a sample of each buffer, and the bench writes and checks that sample.
    set_env("GPUSEL_SIM_SAMPLED_COPIES", "1");
    b.sampled = true;
  }
  bench::WorkerReport report;
  int status = 0;
  try {
    assign_from_environment();
    const int ordinal = bind_assigned_gpu();
    b.peers = peer_ordinals(options.peers);
    const CudaDevice id = gpu_identity(ordinal);
    report.gpu = {id.uuid, id.name, id.pci_bus_id};
    report.l2_cache_bytes = id.l2_cache_bytes;
    bench::EventWriter events(options.out, name);
    auto observe = [&](const BandwidthProgress& p) {
      bench::WorkerEvent e;
      e.test = p.test;
      if (p.result != nullptr) {
        e.gpu = report.gpu;
        e.result = *p.result;
      } else {
        e.sample = p.sample;
        e.seconds = p.seconds;
      }
      events.write(e);
    };
    report.results = measure_bandwidth(b, observe);
  } catch (const Error& e) {
    report.error = said(e);
    print_error("GPU " + name + ": " + said(e));
    status = e.exit_code();
  }
  bench::write_report(options.out, name, report);
  return status;
}

}  // namespace gpusel::cli
