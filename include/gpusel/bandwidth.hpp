// gpusel: host and device copy bandwidth of the GPU this process is bound to, on the CUDA driver
// API (no toolkit needed). Methodology after NVIDIA's nvbandwidth: copy engines, CUDA events around
// the timed copies on a non-blocking stream, warm-up copies first, the median of the samples.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpusel/error.hpp"
#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// h2d, d2h: pinned host memory. d2d: a device-local copy. h2d-pageable, d2h-pageable: ordinary
// host memory. bidir: h2d and d2h at once, on two streams. p2p: from this device to each device of
// BandwidthOptions::peers, over peer access where the devices allow it, else staged by the driver
// through host memory (not in the default set: it needs a second device).
inline constexpr const char* kBandwidthTests[] = {"h2d",          "d2h",   "d2d", "h2d-pageable",
                                                  "d2h-pageable", "bidir", "p2p"};

struct BandwidthOptions {
  std::vector<std::string> tests{"h2d", "d2h", "d2d"};
  std::uint64_t bytes = 512ull << 20;  // per buffer
  int copies = 16;                     // per sample, after warm-up copies
  int warmup = 4;
  int samples = 3;
  // Write, clear and check only the sampled bytes of each buffer (src/bench/copy_sample.hpp):
  // for the simulator's sampled copies, which move only those. Every byte otherwise.
  bool sampled = false;
  // p2p: the CUDA ordinals of the devices to copy to, one result each, in this order. The
  // current device is skipped. Each one's primary context is retained for the run.
  std::vector<int> peers;
};

struct BandwidthResult {
  std::string test;
  std::uint64_t bytes = 0;   // bytes per copy
  std::vector<double> gbps;  // one figure per sample, decimal GB/s of bytes copied
  double median = 0, min = 0, max = 0;
  bool verified = false;  // every sample's data checked and right
  std::string failure;    // a verification failure or a CUDA error, empty when none
  // The failure as data: a CUDA error's code, call and result, or for copies whose data came back
  // wrong the field "reason" "data-mismatch"; ErrorCode::None when none.
  Problem problem;
  // p2p: the device copied to (its CUDA ordinal and UUID), and whether the copy went over peer
  // access (cuDeviceCanAccessPeer said yes and it was enabled) or was staged through host memory.
  int peer = -1;
  std::string peer_uuid;
  bool peer_access = false;
};

// Where a run stands, for progress displays: after the warm-up copies of a test (`sample` 0),
// after each sample (`sample` 1..`samples`, `seconds` the real time that step took), and once
// the test is finished (`result` set, valid only during the call).
struct BandwidthProgress {
  std::string test;
  int sample = 0;
  int samples = 0;
  double seconds = 0;
  const BandwidthResult* result = nullptr;
};
using BandwidthObserver = std::function<void(const BandwidthProgress&)>;

// Runs the tests on the current context (bind first), telling `observe` (when given) how far it
// got. Throws Error(Failure) when memory cannot be had (the message gives the sizes); a data
// mismatch is reported in the result, not thrown.
std::vector<BandwidthResult> measure_bandwidth(const BandwidthOptions& options,
                                               const BandwidthObserver& observe = {});

// Theoretical per-direction rate of a PCIe link in decimal GB/s (after line coding); 0 when
// unknown.
double pcie_link_gbps(unsigned generation, unsigned width);

GPUSEL_END_NAMESPACE
