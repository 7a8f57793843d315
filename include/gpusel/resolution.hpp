// gpusel: a parent's resolution of a --gpu list on this machine: NVML once, the CUDA probe only
// where NVML cannot tell CUDA's order, free:N picks; and the CUDA environment it reads.
#pragma once

#include <string>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/spec.hpp"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as this process sees them.
CudaEnv cuda_env_from_environment();

struct Resolution {
  bool resolved = false;      // false: entries passed on as given (UUIDs without NVML)
  std::string reason;         // why NVML is unavailable
  bool probed = false;        // CUDA's order came from a probe
  bool through_cuda = false;  // NVML unavailable: indices mapped through CUDA's PCI order
  std::vector<std::string> gpus;
  // The GPUs resolution used (NVML's, else CUDA's), read as far as resolving needed: every
  // GPU's UUID and index; under a preset, every GPU's name, compute capability and MIG devices;
  // without one, the MIG devices of the GPUs resolved to. (free:N reads every field of GpuInfo.)
  // query_nvml() reads the rest.
  std::vector<GpuInfo> machine;
  std::vector<std::string> notes;  // what a user should be told once (renumbering, fallbacks)
};

// The whole of a parent's resolution: NVML once, and a CUDA probe only where NVML cannot place
// an integer preset (GPUs of mixed models under FASTEST_FIRST). Without NVML, index entries are
// mapped through CUDA's own enumeration in PCI bus order (a probe); UUID entries are passed on.
// A free:N request picks N free GPUs as acquire_gpus does, leasing none; "all" stands for
// all_gpu_entries() (its notes go to the resolution's). The request is read once, by
// read_gpu_request.
// Throws Error(BadInput) for an entry that cannot be resolved, Error(Failure) when indices
// cannot be placed at all.
Resolution resolve_gpus(const GpuRequest& request, const CudaEnv& env,
                        const std::string& probe_helper);

// The entries "all" stands for here: without CUDA_VISIBLE_DEVICES, the nvidia-smi index of each
// GPU NVML lists, failed and MIG-enabled GPUs left out (and named in `notes`); under a preset,
// the positions 0..n-1 of the GPUs it exposes (MIG instances not counted); without NVML, CUDA's
// device count (asked through the probe). Throws Error(BadInput) when there is no GPU to use,
// Error(Failure) when the GPUs cannot be told.
std::vector<std::string> all_gpu_entries(const CudaEnv& env, const std::string& probe_helper,
                                         std::vector<std::string>* notes);

GPUSEL_END_NAMESPACE
