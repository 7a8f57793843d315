// gpusel: one enumeration of the physical GPUs through NVML, loaded at run time.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpusel/error.hpp"
#include "gpusel/export.h"
#include "gpusel/pick.hpp"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// How much of each GPU query_nvml reads (each field is an NVML call or more).
enum class NvmlDetail {
  Uuid,   // the UUID and index alone (what resolving --gpu without a preset needs): the other
          // fields of GpuInfo stay empty and mig_enabled false, and the driver versions unread
  Model,  // and what the CUDA_VISIBLE_DEVICES model reads: name, compute capability, MIG mode
          // and MIG devices
  Full,   // every field of GpuInfo, and the driver's versions
};

struct NvmlSnapshot {
  bool available = false;
  std::string reason;  // why NVML is unavailable, for messages
  Problem problem;     // the same as data (None while available)
  std::string driver_version;
  int cuda_driver_version = 0;           // 1000 * major + 10 * minor, 0 when unknown
  std::vector<GpuInfo> gpus;             // nvidia-smi order
  NvmlDetail detail = NvmlDetail::Full;  // how much of each GPU was read
  // How `gpus` are connected, when topology was asked for: read from NVML only as a pick asks
  // (pick_free), in this process's NVML session, each answer kept for later picks (copies share
  // them); unknown once the session has closed.
  Topology links;
};

// What to read (each costs NVML calls, so only commands that need it ask).
struct NvmlQuery {
  bool usage = false;     // memory in use, utilisation, compute processes
  bool topology = false;  // NVLink and PCIe topology, read later as pick_free needs it (and
                          // the PCI bus ids, whatever `detail` says)
  NvmlDetail detail = NvmlDetail::Full;
};

// Opens libnvidia-ml.so.1 (or the file named by GPUSEL_NVML_LIBRARY) once per process and reads
// every GPU. NVML is initialised by the first query and stays initialised for the later ones (one
// session per process, shut down at exit; a forked child opens its own). Never throws for a missing
// or broken library: the snapshot says NVML is unavailable and why. Thread-safe.
NvmlSnapshot query_nvml(const NvmlQuery& what = {});

// Whether NVML opens and initialises in this process (the session it opens is kept for the later
// queries, so asking costs nothing more on a machine where it works).
bool nvml_usable();

GPUSEL_END_NAMESPACE
