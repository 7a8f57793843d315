// The simulated CUDA driver's own reading of CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER: a direct
// transcription of docs/driver-rules.md, written apart from gpusel's model
// (src/core/visible.cpp) and sharing no code with it, so that a test running both over many
// values (tests/unit/oracle_test.cpp) catches a rule misread on either side. Header-only: the
// CUDA double and that test include it; nothing in libgpusel does.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpusel::sim::rules {

// One physical GPU, in PCI bus order (NVML's order).
struct Gpu {
  std::string uuid;   // GPU-...
  double speed = 0;   // the FASTEST_FIRST key: highest first, ties in PCI order
  bool lost = false;  // fallen off the bus: NVML reports it lost and CUDA does not enumerate it
  bool mig_enabled = false;
  struct Mig {
    std::string uuid;  // MIG-...
    unsigned gpu_instance = 0;
    unsigned compute_instance = 0;
  };
  std::vector<Mig> migs;
};

// A device CUDA enumerates: a GPU (mig -1) or one of its MIG devices. Positions in the Gpu list.
struct Device {
  int gpu = 0;
  int mig = -1;
  bool operator==(const Device&) const = default;
};

namespace detail {

inline bool starts_with(std::string_view s, std::string_view head) {
  return s.size() >= head.size() && s.compare(0, head.size(), head) == 0;
}

// Case-insensitive prefix test ("prefix matching is case-insensitive").
inline bool prefix_of(std::string_view prefix, std::string_view whole) {
  if (prefix.size() > whole.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(prefix[i])) !=
        std::tolower(static_cast<unsigned char>(whole[i])))
      return false;
  }
  return true;
}

// [OPEN] What an entry is: a GPU UUID or a MIG UUID by its prefix written exactly "GPU-" or
// "MIG-"; anything else (lower-case "gpu-" included, which NVIDIA does not document) is read as an
// integer, so it is invalid and ends the list. gpusel's model reads it the same way and refuses
// such a value (src/core/visible.cpp, entry_kind).
inline bool gpu_entry(std::string_view entry) {
  return starts_with(entry, "GPU-");
}
inline bool mig_entry(std::string_view entry) {
  return starts_with(entry, "MIG-");
}

// "Integer entries are read the way C's strtoul would start reading them: surrounding blanks are
// ignored, an optional sign is accepted, then leading decimal digits; anything after the digits
// is ignored. No digits at all, or a negative value, is invalid. -0 reads as 0, +2 as 2."
// Returns the value, saturated at a number larger than any device count; nullopt when invalid.
inline std::optional<unsigned long long> strtoul_start(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  const std::size_t first_digit = i;
  unsigned long long value = 0;
  constexpr unsigned long long kHuge = 1ull << 40;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    value = std::min(kHuge, value * 10 + static_cast<unsigned long long>(s[i] - '0'));
    ++i;
  }
  if (i == first_digit) return std::nullopt;  // no digits
  if (negative && value != 0) return std::nullopt;
  return value;
}

inline std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string_view::npos ? s.npos : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// "GPU-<uuid>/<gi>/<ci>" -> the MIG device, if one matches.
inline std::optional<unsigned> decimal(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v;
}

}  // namespace detail

namespace detail {
inline std::optional<Device> old_mig_form(const std::vector<Gpu>& gpus,
                                          const std::vector<int>& physical, std::string_view s) {
  const std::size_t a = s.find('/');
  if (a == std::string_view::npos) return std::nullopt;
  const std::size_t b = s.find('/', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  const auto gi = decimal(s.substr(a + 1, b - a - 1));
  const auto ci = decimal(s.substr(b + 1));
  const std::string_view uuid = s.substr(0, a);
  if (!gi || !ci) return std::nullopt;
  for (int g : physical) {
    const Gpu& gpu = gpus[static_cast<std::size_t>(g)];
    if (!gpu.mig_enabled || uuid.size() != gpu.uuid.size() || !prefix_of(uuid, gpu.uuid)) continue;
    for (std::size_t m = 0; m < gpu.migs.size(); ++m) {
      if (gpu.migs[m].gpu_instance == *gi && gpu.migs[m].compute_instance == *ci)
        return Device{g, static_cast<int>(m)};
    }
  }
  return std::nullopt;
}
}  // namespace detail

// The devices CUDA enumerates, in ordinal order. `visible` and `order` are the variables' values
// (nullopt: unset). `legacy_mig`: drivers before R570 (at most one MIG device, and then nothing
// else); otherwise R570 (one compute instance per GPU instance, non-MIG GPUs alongside).
inline std::vector<Device> enumerate(const std::vector<Gpu>& gpus,
                                     const std::optional<std::string>& visible,
                                     const std::optional<std::string>& order, bool legacy_mig) {
  // "Order first": CUDA_DEVICE_ORDER=PCI_BUS_ID orders by PCI bus id, which is the list's own
  // order. Anything else, unset included, is FASTEST_FIRST ([OPEN] for values other than the two
  // names: treated as the default): by speed, highest first, ties in PCI order.
  // A lost GPU is not enumerated at all: integer positions count over the others.
  std::vector<int> physical;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (!gpus[i].lost) physical.push_back(static_cast<int>(i));
  }
  if (!(order && *order == "PCI_BUS_ID")) {
    std::stable_sort(physical.begin(), physical.end(), [&](int a, int b) {
      return gpus[static_cast<std::size_t>(a)].speed > gpus[static_cast<std::size_t>(b)].speed;
    });
  }

  // The named physical GPUs or MIG devices, in list order.
  std::vector<Device> named;
  if (!visible) {
    for (int g : physical) named.push_back({g, -1});  // "Unset: every device is visible"
  } else if (!visible->empty()) {                     // "Set but empty: no device is visible"
    enum class Kind { Integers, GpuUuids, MigUuids };
    // "The first entry decides the mode" (by how the value starts).
    const Kind kind = detail::gpu_entry(*visible)   ? Kind::GpuUuids
                      : detail::mig_entry(*visible) ? Kind::MigUuids
                                                    : Kind::Integers;
    for (std::string_view entry : detail::split_commas(*visible)) {
      std::optional<Device> found;
      if (kind == Kind::Integers) {
        // An integer at or beyond the number of physical devices is invalid.
        if (auto n = detail::strtoul_start(entry); n && *n < physical.size())
          found = Device{physical[static_cast<std::size_t>(*n)], -1};
      } else if (kind == Kind::GpuUuids) {
        // "GPU-" then any prefix of the UUID; exactly one GPU must match. No blank stripping.
        if (detail::gpu_entry(entry)) {
          int matches = 0;
          for (int g : physical) {
            if (detail::prefix_of(entry, gpus[static_cast<std::size_t>(g)].uuid)) {
              ++matches;
              found = Device{g, -1};
            }
          }
          if (matches != 1) found.reset();
        }
      } else if (detail::starts_with(entry, "MIG-GPU-")) {
        // The form of drivers before R470, MIG-GPU-<gpu uuid>/<gpu instance>/<compute instance>.
        // [OPEN] The rules do not say whether later drivers still read it; the simulator does
        // (exact GPU UUID, any case; decimal instance ids), so that old job scripts keep working.
        found = detail::old_mig_form(gpus, physical, entry.substr(4));
      } else if (detail::mig_entry(entry)) {
        int matches = 0;
        for (int g : physical) {
          const Gpu& gpu = gpus[static_cast<std::size_t>(g)];
          if (!gpu.mig_enabled) continue;
          for (std::size_t m = 0; m < gpu.migs.size(); ++m) {
            if (detail::prefix_of(entry, gpu.migs[m].uuid)) {
              ++matches;
              found = Device{g, static_cast<int>(m)};
            }
          }
        }
        if (matches != 1) found.reset();
      }
      if (!found) break;  // "The first invalid entry ends the list"
      // "A device named twice ... makes the whole value expose no devices at all."
      if (std::find(named.begin(), named.end(), *found) != named.end()) return {};
      named.push_back(*found);
    }
  }

  // "A MIG-enabled GPU exposes its MIG devices to CUDA, not the whole GPU."
  std::vector<Device> out;
  for (const Device& d : named) {
    const Gpu& gpu = gpus[static_cast<std::size_t>(d.gpu)];
    if (d.mig >= 0 || !gpu.mig_enabled) {
      out.push_back(d);
      continue;
    }
    for (std::size_t m = 0; m < gpu.migs.size(); ++m) out.push_back({d.gpu, static_cast<int>(m)});
  }
  if (legacy_mig) {
    // "At most one MIG device (the first one), and non-MIG GPUs are not enumerated alongside it."
    for (const Device& d : out) {
      if (d.mig >= 0) return {d};
    }
    return out;
  }
  // R570: "one compute instance per GPU instance": a later device of an instance already
  // enumerated is left out.
  std::vector<Device> kept;
  for (const Device& d : out) {
    bool seen = false;
    if (d.mig >= 0) {
      const Gpu& gpu = gpus[static_cast<std::size_t>(d.gpu)];
      for (const Device& k : kept) {
        seen = seen || (k.gpu == d.gpu && k.mig >= 0 &&
                        gpu.migs[static_cast<std::size_t>(k.mig)].gpu_instance ==
                            gpu.migs[static_cast<std::size_t>(d.mig)].gpu_instance);
      }
    }
    if (!seen) kept.push_back(d);
  }
  return kept;
}

}  // namespace gpusel::sim::rules
