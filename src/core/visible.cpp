// The CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER model. Each rule cites driver-rules.md's tag:
// [NV] documented by NVIDIA, [DRV] observed behaviour of released drivers, [OPEN] our reading.
#include "gpusel/visible.hpp"

#include <algorithm>
#include <limits>

#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

// [NV] A MIG-enabled GPU exposes its MIG devices, not itself.
void expand(const std::vector<GpuInfo>& gpus, int gpu, std::vector<VisibleDevice>& out) {
  const GpuInfo& g = gpus[static_cast<std::size_t>(gpu)];
  if (!g.mig_enabled) {
    out.push_back({gpu, -1});
    return;
  }
  for (std::size_t m = 0; m < g.migs.size(); ++m) out.push_back({gpu, static_cast<int>(m)});
}

// A UUID-prefix entry names exactly one item, else it is invalid ([NV], [DRV]).
template <typename Candidates>
std::optional<VisibleDevice> match_unique(const std::string& entry, const Candidates& candidates) {
  std::optional<VisibleDevice> hit;
  for (const auto& [text, device] : candidates) {
    if (!detail::starts_with_ci(text, entry)) continue;
    if (hit) return std::nullopt;
    hit = device;
  }
  return hit;
}

// [OPEN] What an entry is, by its prefix, written exactly "GPU-" or "MIG-". NVIDIA documents the
// upper-case forms only; how the driver reads "gpu-..." is not known. The model (and the
// simulator, sim/cuda_rules.hpp's entry_kind) reads such an entry as no UUID: an invalid integer,
// which ends the list. gpusel refuses a preset holding one (uuid_case_problem) rather than guess.
enum class EntryKind { Integer, GpuUuid, MigUuid };

EntryKind entry_kind(std::string_view entry) {
  if (entry.substr(0, 4) == "GPU-") return EntryKind::GpuUuid;
  if (entry.substr(0, 4) == "MIG-") return EntryKind::MigUuid;
  return EntryKind::Integer;
}

}  // namespace

namespace {

VisibleSet model_present(const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                         const std::vector<int>* cuda_order, MigRule mig_rule);

}  // namespace

VisibleSet model_visible(const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                         const std::vector<int>* cuda_order, MigRule mig_rule) {
  if (std::none_of(gpus.begin(), gpus.end(), [](const GpuInfo& g) { return g.failed(); }))
    return model_present(gpus, env, cuda_order, mig_rule);
  // [OPEN] CUDA does not enumerate a GPU that has failed: model the others, then map positions
  // back to the full list.
  std::vector<GpuInfo> present;
  std::vector<int> position;  // in `gpus`, of each present GPU
  std::vector<int> present_of(gpus.size(), -1);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].failed()) continue;
    present_of[i] = static_cast<int>(present.size());
    position.push_back(static_cast<int>(i));
    present.push_back(gpus[i]);
  }
  std::vector<int> order;
  if (cuda_order != nullptr) {
    for (int g : *cuda_order) {
      if (g >= 0 && static_cast<std::size_t>(g) < gpus.size() && present_of[g] >= 0)
        order.push_back(present_of[g]);
    }
  }
  VisibleSet vs = model_present(present, env, cuda_order ? &order : nullptr, mig_rule);
  for (VisibleDevice& d : vs.devices) d.gpu = position[static_cast<std::size_t>(d.gpu)];
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (!gpus[i].failed()) continue;
    vs.notes.push_back({"gpu-failed", "GPU " + std::to_string(gpus[i].index) + " has failed (" +
                                          gpus[i].failure +
                                          "): CUDA does not enumerate it, so CUDA's numbering "
                                          "skips it"});
  }
  return vs;
}

namespace {

// What the UUID entries of a list in `mode` are matched against: each GPU's UUID, or each MIG
// device's; nothing for indices.
using Candidates = std::vector<std::pair<std::string, VisibleDevice>>;
Candidates candidates_for(const std::vector<GpuInfo>& gpus, VisibleMode mode) {
  Candidates candidates;
  if (mode == VisibleMode::GpuUuids) {
    for (std::size_t g = 0; g < gpus.size(); ++g)
      candidates.push_back({gpus[g].uuid, {static_cast<int>(g), -1}});
  } else if (mode == VisibleMode::MigUuids) {
    for (std::size_t g = 0; g < gpus.size(); ++g) {
      for (std::size_t m = 0; m < gpus[g].migs.size(); ++m) {
        candidates.push_back({gpus[g].migs[m].uuid, {static_cast<int>(g), static_cast<int>(m)}});
      }
    }
  }
  return candidates;
}

// The physical device one entry of a list in `mode` names, or nullopt when it names none.
std::optional<VisibleDevice> device_named(const std::string& entry, VisibleMode mode,
                                          const std::vector<GpuInfo>& gpus,
                                          const Candidates& candidates) {
  if (mode == VisibleMode::Indices) {
    auto n = detail::read_driver_integer(entry);  // [DRV] strtoul-like reading
    if (n && *n < gpus.size()) return VisibleDevice{static_cast<int>(*n), -1};
    return std::nullopt;
  }
  if (mode == VisibleMode::GpuUuids) {
    // [DRV] an entry of another kind ends the list; [DRV] blanks are not stripped
    if (entry_kind(entry) != EntryKind::GpuUuid) return std::nullopt;
    return match_unique(entry, candidates);
  }
  if (entry_kind(entry) != EntryKind::MigUuid) return std::nullopt;
  std::optional<VisibleDevice> device = match_unique(entry, candidates);
  if (!device) {  // [NV] the pre-R470 form MIG-GPU-<gpu uuid>/<gi>/<ci>, whole
    for (const auto& [text, d] : candidates) {
      const GpuInfo& g = gpus[static_cast<std::size_t>(d.gpu)];
      const MigDevice& m = g.migs[static_cast<std::size_t>(d.mig)];
      std::string legacy = "MIG-" + g.uuid + "/" + std::to_string(m.gpu_instance) + "/" +
                           std::to_string(m.compute_instance);
      if (legacy.size() == entry.size() && detail::starts_with_ci(legacy, entry)) device = d;
    }
  }
  return device;
}

// Whether two entries name the same device.
bool names_one_twice(const std::vector<VisibleDevice>& named) {
  for (std::size_t i = 0; i < named.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (named[i] == named[j]) return true;
    }
  }
  return false;
}

VisibleSet model_present(const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                         const std::vector<int>* cuda_order, MigRule mig_rule) {
  VisibleSet vs;

  // [OPEN] An unknown CUDA_DEVICE_ORDER value is read as the default, FASTEST_FIRST.
  if (env.device_order && *env.device_order != "PCI_BUS_ID" &&
      *env.device_order != "FASTEST_FIRST") {
    vs.notes.push_back({"device-order-unknown",
                        "CUDA_DEVICE_ORDER=\"" + *env.device_order +
                            "\" is not PCI_BUS_ID or FASTEST_FIRST; it is read as FASTEST_FIRST"});
  }

  // Order first: CUDA's enumeration order of the physical GPUs, before any filter.
  std::vector<int> order;
  bool order_known = true;
  std::vector<int> pci(gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i)
    pci[i] = static_cast<int>(i);  // NVML order is PCI order
  if (cuda_order != nullptr) {
    order = *cuda_order;
  } else if (detail::pci_bus_order(env) || detail::homogeneous(gpus)) {
    order = pci;  // [NV] PCI_BUS_ID; [NV] one model: FASTEST_FIRST equals PCI order
  } else {
    order_known = false;  // [NV] mixed models under FASTEST_FIRST: only CUDA knows
  }
  vs.pci_order = order_known && order == pci;
  const std::string unknown_reason =
      "this machine has GPUs of different models and CUDA_DEVICE_ORDER is " +
      (env.device_order ? "\"" + *env.device_order + "\"" : std::string("unset")) +
      " (FASTEST_FIRST), so CUDA's device order cannot be read from NVML";

  if (!env.visible_devices) {  // [NV] unset: everything, in CUDA order
    vs.mode = VisibleMode::All;
    if (!order_known) {
      vs.known = false;
      vs.unknown_reason = unknown_reason;
      return vs;
    }
    for (int g : order) expand(gpus, g, vs.devices);
  } else {
    const std::string& value = *env.visible_devices;
    for (std::string_view entry : detail::split_commas(value)) vs.entries.emplace_back(entry);
    // [DRV] The first entry decides the kind of the whole list (entry_kind: [OPEN] its prefix
    // written exactly GPU- or MIG-).
    if (entry_kind(value) == EntryKind::GpuUuid) {
      vs.mode = VisibleMode::GpuUuids;
    } else if (entry_kind(value) == EntryKind::MigUuid) {
      vs.mode = VisibleMode::MigUuids;
    } else {
      vs.mode = VisibleMode::Indices;
    }
    if (value.empty())
      vs.notes.push_back(
          {"preset-empty", "CUDA_VISIBLE_DEVICES is set but empty: CUDA sees no device"});

    const Candidates candidates = candidates_for(gpus, vs.mode);
    std::vector<VisibleDevice> named;  // physical device named by each valid entry
    for (const std::string& entry : vs.entries) {
      const std::optional<VisibleDevice> device = device_named(entry, vs.mode, gpus, candidates);
      if (!device) {  // [NV] the first invalid entry ends the list
        vs.invalid_entry = entry;
        break;
      }
      named.push_back(*device);
      ++vs.used_entries;
    }

    // [DRV] A device named twice hides every device.
    vs.duplicate = names_one_twice(named);
    if (vs.duplicate) {
      vs.notes.push_back(
          {"preset-duplicate",
           "CUDA_VISIBLE_DEVICES names one device twice: CUDA sees no device at all"});
      return vs;
    }

    if (vs.mode == VisibleMode::Indices) {
      // [NV] integers are positions in CUDA's order, which must be known to place them (unless
      // no entry was valid: then nothing is visible in any order).
      if (!order_known && !named.empty()) {
        vs.known = false;
        vs.unknown_reason = unknown_reason;
        return vs;
      }
      for (const VisibleDevice& d : named)
        expand(gpus, order[static_cast<std::size_t>(d.gpu)], vs.devices);
    } else {
      for (const VisibleDevice& d : named) {
        if (d.mig >= 0) {
          vs.devices.push_back(d);
        } else {
          expand(gpus, d.gpu, vs.devices);
        }
      }
    }
  }

  if (mig_rule == MigRule::Legacy) {
    // [NV] before R570 a process sees at most one MIG device, and nothing beside it.
    auto first_mig = std::find_if(vs.devices.begin(), vs.devices.end(),
                                  [](const VisibleDevice& d) { return d.mig >= 0; });
    if (first_mig != vs.devices.end()) vs.devices = {*first_mig};
  }
  return vs;
}

}  // namespace

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

std::optional<std::uint64_t> read_driver_integer(std::string_view entry) noexcept {
  std::size_t i = 0;
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (i < entry.size() && space(entry[i])) ++i;
  bool negative = false;
  if (i < entry.size() && (entry[i] == '+' || entry[i] == '-')) negative = entry[i++] == '-';
  std::size_t first_digit = i;
  std::uint64_t value = 0;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  while (i < entry.size() && entry[i] >= '0' && entry[i] <= '9') {
    const auto digit = static_cast<std::uint64_t>(entry[i] - '0');
    value = (value > (kMax - digit) / 10) ? kMax : value * 10 + digit;
    ++i;
  }
  if (i == first_digit) return std::nullopt;        // [DRV] no digits: invalid
  if (negative && value != 0) return std::nullopt;  // [DRV] negative: invalid; "-0" reads as 0
  return value;
}

std::optional<std::string> uuid_case_problem(const CudaEnv& env) {
  if (!env.visible_devices) return std::nullopt;
  std::optional<std::string> out;
  detail::each_comma_piece(*env.visible_devices, [&](std::string_view entry) {
    const std::string_view head = entry.substr(0, 4);
    if ((detail::equal_ci(head, "GPU-") || detail::equal_ci(head, "MIG-")) &&
        entry_kind(entry) == EntryKind::Integer) {
      std::string upper(head);
      for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
      out = detail::describe_preset(env) + " has the entry " + detail::quote_value(entry) +
            ", which starts with " + detail::quote_value(head) + " rather than " + upper +
            ": how the NVIDIA driver reads that is not documented, so gpusel does not guess. "
            "Write " +
            upper + std::string(entry.substr(4)) + " instead";
      return false;
    }
    return true;
  });
  return out;
}

bool pci_bus_order(const CudaEnv& env) noexcept {
  return env.device_order && *env.device_order == "PCI_BUS_ID";
}

bool homogeneous(const std::vector<GpuInfo>& gpus) noexcept {
  const GpuInfo* first = nullptr;
  for (const GpuInfo& g : gpus) {
    if (g.failed()) continue;
    if (first == nullptr) first = &g;
    if (g.name != first->name || g.cc_major != first->cc_major || g.cc_minor != first->cc_minor)
      return false;
  }
  return true;
}

}  // namespace gpusel::detail
