// gpusel: host and device copy bandwidth of the GPU this process is bound to, on the CUDA driver
// API (no toolkit needed). Methodology after NVIDIA's nvbandwidth: copy engines, CUDA events around
// the timed copies on a non-blocking stream, warm-up copies first, the median of the samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpusel {

// h2d, d2h: pinned host memory. d2d: a device-local copy. h2d-pageable, d2h-pageable: ordinary
// host memory. bidir: h2d and d2h at once, on two streams.
inline constexpr const char* kBandwidthTests[] = {"h2d",          "d2h",          "d2d",
                                                  "h2d-pageable", "d2h-pageable", "bidir"};

struct BandwidthOptions {
  std::vector<std::string> tests{"h2d", "d2h", "d2d"};
  std::uint64_t bytes = 512ull << 20;  // per buffer
  int copies = 16;                     // per sample, after warm-up copies
  int warmup = 4;
  int samples = 3;
};

struct BandwidthResult {
  std::string test;
  std::uint64_t bytes = 0;   // bytes per copy
  std::vector<double> gbps;  // one figure per sample, decimal GB/s of bytes copied
  double median = 0, min = 0, max = 0;
  bool verified = false;  // every sample's data checked and right
  std::string failure;    // a verification failure or a CUDA error, empty when none
};

// Runs the tests on the current context (bind first). Throws Error(Failure) when memory cannot be
// had (the message gives the sizes); a data mismatch is reported in the result, not thrown.
std::vector<BandwidthResult> measure_bandwidth(const BandwidthOptions& options);

// Theoretical per-direction rate of a PCIe link in decimal GB/s (after line coding); 0 when
// unknown.
double pcie_link_gbps(unsigned generation, unsigned width);

}  // namespace gpusel
