// gpusel: the CUDA driver, loaded at run time, as the worker side uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// One device as CUDA enumerates it in this process.
struct CudaDevice {
  int ordinal = 0;
  std::string uuid;  // GPU-... for a whole GPU, MIG-... for a MIG device (cuDeviceGetUuid_v2)
  std::string parent_uuid;  // the whole GPU's UUID (differs from uuid only for a MIG device)
  std::string name;
  std::uint64_t total_bytes = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::string pci_bus_id;            // NVML's form: 00000000:18:00.0
  std::uint64_t l2_cache_bytes = 0;  // 0 when unknown (not carried by the probe)
};

// What CUDA sees in this process: cuInit, then every device. Throws Error(Failure) when the
// library is missing, is the toolkit's stub, or cuInit fails; the message says which and why.
// Initialises CUDA in the calling process (contexts are not created).
std::vector<CudaDevice> cuda_devices();

// The CUDA driver's version, as cuDriverGetVersion gave it when the library was loaded (once per
// process; no cuInit): 1000 * major + 10 * minor, e.g. 12080 for 12.8. 0 when CUDA is unavailable.
int cuda_driver_version();

// Formats CUDA's 16 raw UUID bytes (which may hold zeros) the way nvidia-smi prints them.
std::string format_uuid(const unsigned char bytes[16], const char* prefix = "GPU-");

// "0000:18:00.0" (CUDA's form, any case) -> "00000000:18:00.0" (NVML's form, upper case).
std::string normalise_bus_id(const std::string& bus);

GPUSEL_END_NAMESPACE
