// gpusel: the model of which devices CUDA exposes under CUDA_VISIBLE_DEVICES and
// CUDA_DEVICE_ORDER (pure, no I/O). The rules are those of docs/driver-rules.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/error.hpp"
#include "gpusel/export.h"
#include "gpusel/gpu_fields.hpp"

GPUSEL_BEGIN_NAMESPACE

struct MigDevice {
  std::string uuid;  // MIG-xxxxxxxx-...
  unsigned gpu_instance = 0;
  unsigned compute_instance = 0;
  std::string name;
  std::uint64_t memory_total_bytes = 0;
};

// A compute process on a GPU, as NVML lists it.
struct GpuProcess {
  unsigned pid = 0;
  std::uint64_t used_memory = 0;  // bytes; 0 when NVML does not say
};

// What every record of a GPU says of it, under one set of names and units: NVML's (GpuInfo) and
// CUDA's (CudaDevice) are both one.
struct GpuRecord {
  std::string uuid;  // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (MIG-... for a MIG device)
  std::string name;
  std::string pci_bus_id;                // NVML's form, 00000000:18:00.0
  std::uint64_t memory_total_bytes = 0;  // its memory, in bytes; 0 when unknown
  int cc_major = -1;                     // compute capability; -1 when unknown
  int cc_minor = -1;
};

// One physical GPU as NVML describes it. Fields NVML could not give stay empty / -1 / 0.
struct GpuInfo : GpuRecord {
  unsigned index = 0;  // nvidia-smi index (PCI order)
  std::optional<int> numa_node;
  std::vector<int> cpus;                         // CPUs near the GPU, when NVML reports them
  unsigned pcie_generation = 0, pcie_width = 0;  // the link as trained now; 0: unknown
  unsigned pcie_max_generation = 0, pcie_max_width = 0;  // what the link can do
  bool mig_enabled = false;
  std::vector<MigDevice> migs;
  // Empty when NVML reads the GPU; else why it cannot ("lost: ..." for a GPU fallen off the bus,
  // or the NVML error). Such a GPU keeps its index, has no UUID, and CUDA does not enumerate it.
  std::string failure;
  // The same as data: ErrorCode::GpuLost for a GPU fallen off the bus, else the NVML call that
  // failed and what it returned (None while the GPU is readable).
  Problem problem;
  bool failed() const noexcept { return static_cast<bool>(problem); }
  // Usage, read only when asked for (query_nvml's `usage`); nullopt: not read or not reported.
  std::optional<std::uint64_t> memory_used;
  std::optional<unsigned> utilization;  // percent
  std::optional<std::vector<GpuProcess>> processes;
  // The numbers NVML gives by one call each (gpu_fields.def's GPUSEL_GPU_READING rows), by
  // GpuReading; nullopt: not read or not reported.
  std::array<std::optional<std::uint64_t>, kGpuReadingCount> readings{};
  std::optional<std::uint64_t> reading(GpuReading r) const {
    return readings[static_cast<std::size_t>(r)];
  }
};

// What the process environment says; nullopt means the variable is unset.
struct CudaEnv {
  std::optional<std::string> visible_devices;
  std::optional<std::string> device_order;
};

enum class MigRule {
  R570,    // driver R570 / CUDA 12.8 and later: several MIG devices, non-MIG GPUs alongside
  Legacy,  // older drivers: at most one MIG device, and then nothing else
};

enum class VisibleMode { All, Indices, GpuUuids, MigUuids };

struct VisibleDevice {
  int gpu = 0;   // position in the GpuInfo list
  int mig = -1;  // position in that GPU's MIG list, or -1 for the whole GPU
  bool operator==(const VisibleDevice&) const = default;
};

struct VisibleSet {
  // False when the answer depends on CUDA's FASTEST_FIRST heuristic on a machine of mixed models;
  // `unknown_reason` then says why and `devices` is empty.
  bool known = true;
  std::string unknown_reason;
  bool pci_order = false;  // the order in force is PCI bus order (nvidia-smi order)
  VisibleMode mode = VisibleMode::All;
  std::vector<std::string> entries;          // the preset split on commas, untouched
  std::size_t used_entries = 0;              // entries read before the first invalid one
  std::optional<std::string> invalid_entry;  // the entry that ended the list
  bool duplicate = false;  // a device named twice: the driver then exposes nothing
  std::vector<Note> notes;
  std::vector<VisibleDevice> devices;  // CUDA ordinal order
};

// The devices CUDA will expose, in ordinal order. `cuda_order`, when given, is CUDA's own
// enumeration order of the physical GPUs (positions into `gpus`) before filtering, as a probe of
// CUDA or the simulator knows it; without it the order is derived from NVML alone when it can be.
// [OPEN] A failed GPU (GpuInfo::failure) is not enumerated by CUDA: integer entries count over
// the others, and `cuda_order` lists only the others.
VisibleSet model_visible(const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                         const std::vector<int>* cuda_order = nullptr,
                         MigRule mig_rule = MigRule::R570);

GPUSEL_END_NAMESPACE
