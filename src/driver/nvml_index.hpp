// Internal: what NVML says of one GPU or a few, without enumerating every GPU again.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/nvml.hpp"

namespace gpusel::detail {

// The nvidia-smi index of the GPU whose UUID is exactly `uuid` (nvmlDeviceGetHandleByUUID, then
// nvmlDeviceGetIndex), in this process's NVML session, into `index` (left empty when NVML is
// unavailable). False when NVML could not answer this way (no such functions, no GPU of that
// exact spelling, an error): the caller then enumerates.
bool nvml_gpu_index(const std::string& uuid, std::optional<unsigned>& index);

// From now on in this process, query_nvml answers a query of identity alone (no usage, no
// topology) from the first enumeration that read at least as much, instead of enumerating again.
// For the gpusel command, which runs for moments and reads the GPUs in several places (--gpu all,
// then the resolution); never for a program whose GPUs may change while it runs.
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

}  // namespace gpusel::detail
