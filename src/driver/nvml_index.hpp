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

}  // namespace gpusel::detail
