// gpusel: one enumeration of the physical GPUs through NVML, loaded at run time.
#pragma once

#include <string>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/pick.hpp"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

struct NvmlSnapshot {
  bool available = false;
  std::string reason;  // why NVML is unavailable, for messages
  std::string driver_version;
  int cuda_driver_version = 0;              // 1000 * major + 10 * minor, 0 when unknown
  std::vector<GpuInfo> gpus;                // nvidia-smi order
  std::vector<std::vector<GpuLink>> links;  // [i][j] over `gpus`, when topology was asked for
};

// What to read beyond identity (each costs NVML calls, so only commands that need it ask).
struct NvmlQuery {
  bool usage = false;     // memory in use, utilisation, compute processes
  bool topology = false;  // NVLink and PCIe common ancestors between every pair
};

// Opens libnvidia-ml.so.1 (or the file named by GPUSEL_NVML_LIBRARY) once per process and reads
// every GPU. NVML is initialised by the first query and stays initialised for the later ones (one
// session per process, shut down at exit; a forked child opens its own). Never throws for a missing
// or broken library: the snapshot says NVML is unavailable and why. Thread-safe.
NvmlSnapshot query_nvml(const NvmlQuery& what = {});

GPUSEL_END_NAMESPACE
