// Internal: resolution to positions in the GPU list, for callers that have the list at hand and
// the CUDA_VISIBLE_DEVICES model already made (resolve_gpus), so that neither is done twice.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpusel/spec.hpp"
#include "gpusel/visible.hpp"

namespace gpusel::detail {

// resolve_entries, answering with positions into `gpus` instead of UUIDs. `vs` is
// model_visible's answer for `gpus` and `env` (with CUDA's order where it was needed); it is read
// only when env.visible_devices is set, and must then be given.
std::vector<std::size_t> resolve_positions(const std::vector<GpuEntry>& entries,
                                           const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                                           const VisibleSet* vs);

}  // namespace gpusel::detail
