// gpusel: asking CUDA how it numbers the GPUs, from a short-lived child process, so that the
// caller never initialises CUDA itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusel/cuda.hpp"
#include "gpusel/export.h"
#include "gpusel/resolution.hpp"  // resolve_gpus, which uses the probe, was declared here first
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

// The GPUs CUDA enumerates, as NVML would list them: one per physical GPU (MIG devices under
// their GPU), in PCI bus order, indexed from 0.
std::vector<GpuInfo> gpus_from_cuda(const std::vector<CudaDevice>& devices);

GPUSEL_END_NAMESPACE
