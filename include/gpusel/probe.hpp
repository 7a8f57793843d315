// gpusel: asking CUDA how it numbers the GPUs, from a short-lived child process, so that the
// caller never initialises CUDA itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/export.h"
#include "gpusel/resolution.hpp"  // resolve_gpus, which uses the probe, was declared here first
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

struct ProbeResult {
  bool ok = false;
  std::string reason;  // why the probe failed, for messages
  // The same as data: the probe's own failure (ProbeUnavailable, ProbeTimedOut, ProbeFailed), or
  // what CUDA answered in the child (LibraryNotLoaded, CudaLinkStub, NoDevice, DriverCallFailed
  // with the call and its CUresult ...).
  Problem problem;
  std::vector<CudaDevice> devices;
};

// Runs `helper` (the library's probe helper program, gpusel-probe-cuda; see default_probe_helper)
// and reads what CUDA enumerates in it. With `unfiltered`, the child runs without
// CUDA_VISIBLE_DEVICES, so it sees every device in CUDA's own order; otherwise it inherits this
// process's environment.
ProbeResult probe_cuda(const std::string& helper, bool unfiltered);

// CUDA's enumeration order of the physical GPUs (positions into `gpus`), from an unfiltered probe;
// nullopt when the probe does not account for every GPU exactly once.
std::optional<std::vector<int>> cuda_order_from(const std::vector<GpuInfo>& gpus,
                                                const std::vector<CudaDevice>& devices);

// The probe's helper program: GPUSEL_PROBE_HELPER when set, else the gpusel-probe-cuda installed
// with the library (gpusel-probe-cuda.exe on Windows), looked for beside the library (or the
// program the static library is linked into), then in ../libexec/gpusel/ and ../../libexec/gpusel/
// from there; empty when there is none (no probe: resolution refuses what only CUDA could tell).
std::string default_probe_helper();

// The GPUs CUDA enumerates, as NVML would list them: one per physical GPU (MIG devices under
// their GPU), in PCI bus order, indexed from 0.
std::vector<GpuInfo> gpus_from_cuda(const std::vector<CudaDevice>& devices);

GPUSEL_END_NAMESPACE
