// gpusel: asking CUDA how it numbers the GPUs, from a short-lived child process, so that the
// caller never initialises CUDA itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusel/cuda.hpp"
#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

struct ProbeResult {
  bool ok = false;
  std::string reason;  // why the probe failed
  std::vector<CudaDevice> devices;
};

// Runs `helper internal-probe-cuda` (the gpusel executable) and reads what CUDA enumerates in it.
// With `unfiltered`, the child runs without CUDA_VISIBLE_DEVICES, so it sees every device in
// CUDA's own order; otherwise it inherits this process's environment.
ProbeResult probe_cuda(const std::string& helper, bool unfiltered);

// The lines the child prints for `devices`, and their parser (one device a line, tab-separated).
std::string serialise_devices(const std::vector<CudaDevice>& devices);
std::optional<std::vector<CudaDevice>> parse_devices(const std::string& text);

// CUDA's enumeration order of the physical GPUs (positions into `gpus`), from an unfiltered probe;
// nullopt when the probe does not account for every GPU exactly once.
std::optional<std::vector<int>> cuda_order_from(const std::vector<GpuInfo>& gpus,
                                                const std::vector<CudaDevice>& devices);

// The gpusel executable to use as the probe's helper: GPUSEL_PROBE_HELPER, else this process's
// own executable when it is gpusel, else empty (no probe).
std::string default_probe_helper();

// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as this process sees them.
CudaEnv cuda_env_from_environment();

struct Resolution {
  bool resolved = false;      // false: entries passed on as given (UUIDs without NVML)
  std::string reason;         // why NVML is unavailable
  bool probed = false;        // CUDA's order came from a probe
  bool through_cuda = false;  // NVML unavailable: indices mapped through CUDA's PCI order
  std::vector<std::string> gpus;
  std::vector<GpuInfo> machine;    // the GPUs resolution used (NVML's, else CUDA's)
  std::vector<std::string> notes;  // what a user should be told once (renumbering, fallbacks)
};

// The GPUs CUDA enumerates, as NVML would list them: one per physical GPU (MIG devices under
// their GPU), in PCI bus order, indexed from 0.
std::vector<GpuInfo> gpus_from_cuda(const std::vector<CudaDevice>& devices);

// The whole of a parent's resolution: NVML once, and a CUDA probe only where NVML cannot place
// an integer preset (GPUs of mixed models under FASTEST_FIRST). Without NVML, index entries are
// mapped through CUDA's own enumeration in PCI bus order (a probe); UUID entries are passed on.
// Throws Error(BadInput) for an entry that cannot be resolved, Error(Failure) when indices
// cannot be placed at all.
Resolution resolve_gpus(const std::vector<std::string>& entries, const CudaEnv& env,
                        const std::string& probe_helper);

GPUSEL_END_NAMESPACE
