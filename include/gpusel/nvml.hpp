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

// From now on in this process, query_nvml answers a query of identity alone (no usage, no
// topology) from the first enumeration that read at least as much, instead of enumerating again.
// For a program that runs for moments and reads the GPUs in several places, as the gpusel command
// does (--gpu all, then the resolution); never for one whose GPUs may change while it runs.
void reuse_nvml_snapshots();

// What nvml_complete reads.
enum class NvmlPart {
  Mig,   // MIG mode and MIG devices (what refusing a MIG-enabled GPU needs)
  Full,  // every field of GpuInfo but usage (NvmlDetail::Full's)
};

// Reads `part` of the GPUs of `gpus` at `positions` (a failed GPU is skipped), in this process's
// NVML session, through this session's enumeration's handles where they are still valid, else
// finding each again by its UUID: a resolution reads first only the UUIDs, then the rest of the
// GPUs it picked. Returns why it could not (NVML unavailable, the library broken, a GPU no longer
// found); empty when done.
std::string nvml_complete(std::vector<GpuInfo>& gpus, const std::vector<std::size_t>& positions,
                          NvmlPart part);

GPUSEL_END_NAMESPACE
