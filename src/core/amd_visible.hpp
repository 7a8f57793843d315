// AMD's visibility variables, as ROCm reads them (docs/amd.md): ROCr filters the GPUs by
// ROCR_VISIBLE_DEVICES, then HIP picks among ROCr's result by HIP_VISIBLE_DEVICES (or, when that
// is unset or empty, CUDA_VISIBLE_DEVICES). Each layer has rules of its own, and HIP's changed
// between versions; the model takes them as parameters. Pure: values in, devices out.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "gpusel_detail.hpp"

namespace gpusel::detail {

// ROCr's filter (ROCR-Runtime amd_filter_device.cpp, unchanged from ROCm 5.2 to 6.x).
struct RocrVisible {
  // The GPUs left, as positions in the base (KFD topology) order, in the variable's order.
  std::vector<std::size_t> devices;
  // An empty entry among those read ("1,,2", ",1"): ROCr's parser throws and every program
  // that starts the HSA runtime (HIP programs included) aborts or fails to initialise.
  bool aborts = false;
  // The entry at which the list ended early (invalid, out of range, ambiguous, repeated), if any.
  std::optional<std::string> ended_at;
};

// `ids`: each GPU's unique id as ROCr shows it ("GPU-<16 hex>", "GPU-XX" when it has none), in
// KFD order. `value`: ROCR_VISIBLE_DEVICES (nullopt: unset, every GPU).
RocrVisible rocr_visible(const std::vector<std::string>& ids,
                         const std::optional<std::string>& value);

// Which of HIP's rules apply: both changed in AMD's clr (HIP's runtime).
struct HipRules {
  // An empty HIP_/CUDA_VISIBLE_DEVICES hides every GPU (clr from late 2022, first in the
  // rocm-5.6.0 tag among those read); before, an empty value was ignored.
  bool empty_hides = true;
  // Entries may be unique ids ("GPU-<hex>", matched as a substring, case-sensitive, first match
  // wins): from ROCm 6.2.
  bool uuid_entries = true;
};
// The rules of HIP `major`.`minor` (as ROCm numbers its releases).
HipRules hip_rules(int major, int minor);

struct HipVisible {
  std::vector<std::size_t> devices;  // positions in ROCr's result, in HIP's ordinal order
  const char* variable = nullptr;    // "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES" or null (none)
  std::optional<std::string> ended_at;
};

// HIP's pick among `ids` (ROCr's result, in its order).
HipVisible hip_visible(const std::vector<std::string>& ids, const std::optional<std::string>& hip,
                       const std::optional<std::string>& cuda, const HipRules& rules);

// hip_view (what a HIP program would see) and explain_amd_visibility (doctor's reading of the
// three variables): gpusel_detail.hpp.

}  // namespace gpusel::detail
