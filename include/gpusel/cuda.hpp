// gpusel: the CUDA driver, loaded at run time, as the worker side uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// One device as CUDA enumerates it in this process: the one record of the CUDA side
// (cuda_devices, the CUDA probe, gpu_identity). What NVML's GpuInfo knows too has the same name and
// unit there.
// (uuid: GPU-... for a whole GPU, MIG-... for a MIG device, as cuDeviceGetUuid_v2 gives it.)
struct CudaDevice : GpuRecord {
  int cuda_ordinal = 0;  // CUDA's number for it in this process
  // NVML's index of the GPU (of the parent GPU for a MIG device), as nvidia-smi shows it: filled
  // by gpu_identity, unset where NVML does not know it and in cuda_devices' answer.
  std::optional<unsigned> nvidia_smi_index;
  std::string parent_uuid;  // the whole GPU's UUID (differs from uuid only for a MIG device)
  int sm_count = 0;         // 0 when unknown
  std::uint64_t l2_cache_bytes = 0;  // 0 when unknown (not carried by the probe)
};

// What CUDA sees in this process: cuInit, then every device. Throws Error(Failure) when the
// library is missing, is the toolkit's stub, or cuInit fails; the message says which and why.
// Initialises CUDA in the calling process (contexts are not created).
std::vector<CudaDevice> cuda_devices();

// The CUDA driver's version, as cuDriverGetVersion gave it when the library was loaded (once per
// process; no cuInit): 1000 * major + 10 * minor, e.g. 12080 for 12.8. 0 when CUDA is unavailable.
int cuda_driver_version();

GPUSEL_END_NAMESPACE
