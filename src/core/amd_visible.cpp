// AMD's visibility variables (amd_visible.hpp). The rules are ROCr's RvdFilter
// (ROCR-Runtime amd_filter_device.cpp) and HIP's device list (clr rocdevice.cpp, flags.cpp), as
// docs/amd.md states them with the cases Debian's ROCm 5.2.3 was run on.
#include "amd_visible.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "gpusel_detail.hpp"

namespace gpusel::detail {
namespace {

// Split on ',' as std::getline does: a last empty piece ("1,") is not a token; "" is none.
std::vector<std::string> getline_tokens(const std::string& value) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < value.size()) {
    const std::size_t comma = value.find(',', start);
    if (comma == std::string::npos) {
      out.push_back(value.substr(start));
      break;
    }
    out.push_back(value.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string upper_trimmed(const std::string& token) {
  std::size_t b = 0, e = token.size();
  while (b < e && (token[b] == ' ' || token[b] == '\t')) ++b;
  while (e > b && (token[e - 1] == ' ' || token[e - 1] == '\t')) --e;
  std::string out = token.substr(b, e - b);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// ROCr's reading of one integer token: strtol with base 0 (0x2 is 2, 010 is 8), whole token.
std::optional<long> rocr_integer(const std::string& token) {
  if (token.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(token.c_str(), &end, 0);
  if (errno != 0 || end == nullptr || *end != '\0') return std::nullopt;
  return v;
}

// The GPU a ROCr unique-id token names: a prefix of exactly one id (compared upper-case), 5 to 20
// characters; nullopt for none or several.
std::optional<std::size_t> rocr_uuid(const std::vector<std::string>& ids,
                                     const std::string& token) {
  if (token.size() < 5 || token.size() > 20) return std::nullopt;
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string id = upper_trimmed(ids[i]);
    if (id == "GPU-XX") continue;  // no unique id: never matched
    if (id.compare(0, token.size(), token) == 0) {
      if (found) return std::nullopt;  // ambiguous
      found = i;
    }
  }
  return found;
}

// HIP's canonical decimal: the text atoi gives back ("01", " 1", "+1" are not).
std::optional<long> hip_integer(const std::string& entry) {
  if (entry.empty()) return std::nullopt;
  const long v = std::atol(entry.c_str());
  if (std::to_string(v) != entry) return std::nullopt;
  return v;
}

}  // namespace

RocrVisible rocr_visible(const std::vector<std::string>& ids,
                         const std::optional<std::string>& value) {
  RocrVisible out;
  if (!value) {
    for (std::size_t i = 0; i < ids.size(); ++i) out.devices.push_back(i);
    return out;
  }
  const std::vector<std::string> tokens = getline_tokens(*value);
  const std::size_t read = std::min(tokens.size(), ids.size());
  for (std::size_t t = 0; t < read; ++t) {
    const std::string token = upper_trimmed(tokens[t]);
    if (token.empty()) {
      out.aborts = true;  // ROCr reads the token's first character, which is not there
      out.devices.clear();
      return out;
    }
    std::optional<std::size_t> gpu;
    if (token.front() == 'G') {
      gpu = rocr_uuid(ids, token);
    } else if (const std::optional<long> v = rocr_integer(token);
               v && *v >= 0 && static_cast<unsigned long>(*v) < ids.size()) {
      gpu = static_cast<std::size_t>(*v);
    }
    if (!gpu || std::find(out.devices.begin(), out.devices.end(), *gpu) != out.devices.end()) {
      out.ended_at = tokens[t];
      return out;
    }
    out.devices.push_back(*gpu);
  }
  return out;
}

HipRules hip_rules(int major, int minor) {
  HipRules r;
  r.empty_hides = major > 5 || (major == 5 && minor >= 6);
  r.uuid_entries = major > 6 || (major == 6 && minor >= 2);
  return r;
}

HipVisible hip_visible(const std::vector<std::string>& ids, const std::optional<std::string>& hip,
                       const std::optional<std::string>& cuda, const HipRules& rules) {
  HipVisible out;
  // An empty value is read as " " by newer HIP (non-empty, and no valid entry), ignored by older.
  auto effective = [&](const std::optional<std::string>& v) -> std::optional<std::string> {
    if (!v) return std::nullopt;
    if (v->empty()) return rules.empty_hides ? std::optional<std::string>(" ") : std::nullopt;
    return v;
  };
  std::optional<std::string> value = effective(hip);
  out.variable = "HIP_VISIBLE_DEVICES";
  if (!value) {
    value = effective(cuda);
    out.variable = "CUDA_VISIBLE_DEVICES";
  }
  if (!value) {
    out.variable = nullptr;
    for (std::size_t i = 0; i < ids.size(); ++i) out.devices.push_back(i);
    return out;
  }
  std::string text = *value;
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
    text = text.substr(1, text.size() - 2);
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string entry =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::optional<std::size_t> gpu;
    if (rules.uuid_entries && entry.rfind("GPU-", 0) == 0) {
      for (std::size_t i = 0; i < ids.size() && !gpu; ++i) {
        if (ids[i].find(entry) != std::string::npos) gpu = i;
      }
    } else if (const std::optional<long> v = hip_integer(entry);
               v && *v >= 0 && static_cast<unsigned long>(*v) < ids.size()) {
      gpu = static_cast<std::size_t>(*v);
    }
    if (!gpu) {
      out.ended_at = entry;
      break;
    }
    if (std::find(out.devices.begin(), out.devices.end(), *gpu) == out.devices.end())
      out.devices.push_back(*gpu);  // a repeated GPU is dropped, silently
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

// A stand-in machine for a composition on unknown hardware: 64 GPUs with distinct ids, and the
// unique ids the variables name made to exist (lower case, as ROCm shows them).
std::vector<std::string> stand_in_ids(const std::vector<std::optional<std::string>>& values) {
  std::vector<std::string> ids;
  for (int i = 0; i < 64; ++i) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016x", 0xa0000000u + static_cast<unsigned>(i));
    ids.push_back(std::string("GPU-") + hex);
  }
  std::size_t next = 0;
  for (const std::optional<std::string>& value : values) {
    if (!value) continue;
    for (const std::string& token : getline_tokens(*value)) {
      const std::string t = upper_trimmed(token);
      if (t.size() < 5 || t.rfind("GPU-", 0) != 0 || next >= 32) continue;
      std::string hex = t.substr(4, 16);
      for (char& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      hex.resize(16, '0');  // 16 hex digits, the entry's a prefix
      ids[63 - next++] = "GPU-" + hex;
    }
  }
  return ids;
}

std::string show(const std::optional<std::string>& v) {
  return v ? quote_value(*v) : std::string("unset");
}

}  // namespace

std::string amd_visibility_settings(const std::optional<std::string>& rocr,
                                    const std::optional<std::string>& hip,
                                    const std::optional<std::string>& cuda) {
  return "ROCR_VISIBLE_DEVICES=" + show(rocr) + ", HIP_VISIBLE_DEVICES=" + show(hip) +
         ", CUDA_VISIBLE_DEVICES=" + show(cuda);
}

std::vector<AmdVisibilityNote> explain_amd_visibility(const std::optional<std::string>& rocr,
                                                      const std::optional<std::string>& hip,
                                                      const std::optional<std::string>& cuda) {
  std::vector<AmdVisibilityNote> out;
  if (!rocr && !hip) return out;  // nothing AMD-specific set: CUDA_VISIBLE_DEVICES is NVIDIA's
  const std::string settings = amd_visibility_settings(rocr, hip, cuda);
  const std::vector<std::string> ids = stand_in_ids({rocr, hip, cuda});
  const RocrVisible r = rocr_visible(ids, rocr);
  if (r.aborts) {
    out.push_back({AmdVisibilityNote::Kind::Aborts, "amd-rocr-empty-entry",
                   settings + ": ROCR_VISIBLE_DEVICES has an empty entry, which ROCr's parser does "
                              "not survive: every HIP program aborts at start (or its HSA "
                              "runtime fails to initialise)",
                   "remove the empty entry (\"1,,2\" -> \"1,2\"; no comma first)"});
    return out;
  }
  if (rocr && r.devices.empty()) {
    out.push_back({AmdVisibilityNote::Kind::NoDevice, "amd-rocr-hides-all",
                   settings + ": ROCr keeps no GPU (" +
                       (rocr->empty() ? std::string("an empty ROCR_VISIBLE_DEVICES hides every GPU")
                                      : "its first entry, " + quote_value(r.ended_at.value_or("")) +
                                            ", names none") +
                       "), so HIP programs find no device",
                   "unset ROCR_VISIBLE_DEVICES, or give it GPU indices or unique ids "
                   "(GPU-<16 hex>, at most 20 characters)"});
    return out;
  }
  std::vector<std::string> kept;
  for (std::size_t d : r.devices) kept.push_back(ids[d]);
  const HipVisible newer = hip_visible(kept, hip, cuda, hip_rules(6, 2));
  const HipVisible older = hip_visible(kept, hip, cuda, hip_rules(5, 2));
  std::string rocr_part = "ROCr keeps every GPU";
  if (rocr && kept.size() == 1) {
    rocr_part = "ROCr keeps 1 GPU, at position 0 of its list";
  } else if (rocr) {
    rocr_part = "ROCr keeps " + std::to_string(kept.size()) + " GPUs, at positions 0 to " +
                std::to_string(kept.size() - 1) + " of its list";
  }
  if (newer.devices.empty() && older.devices.empty()) {
    const std::string var = newer.variable != nullptr ? newer.variable : "HIP_VISIBLE_DEVICES";
    const bool slurm_both = rocr && !hip && cuda && *rocr == *cuda;
    out.push_back({AmdVisibilityNote::Kind::NoDevice, "amd-composition-hides-all",
                   settings + ": " + rocr_part + "; HIP then reads " + var +
                       " as positions in that list, and " +
                       quote_value(newer.ended_at.value_or("")) +
                       " is not one, so HIP programs "
                       "find no device" +
                       (slurm_both ? " (Slurm sets both variables to the same GPU numbers)" : ""),
                   rocr ? "give the GPUs once: unset " + var +
                              " and keep ROCR_VISIBLE_DEVICES, "
                              "or unset ROCR_VISIBLE_DEVICES; with Slurm, have it set only one "
                              "of them"
                        : "unset " + var + " or give positions from 0"});
    return out;
  }
  if (newer.devices != older.devices) {
    out.push_back({AmdVisibilityNote::Kind::VersionDependent, "amd-hip-version-dependent",
                   settings + ": what HIP programs see depends on the HIP version: " +
                       std::to_string(older.devices.size()) +
                       " GPU(s) before ROCm 5.6 (an empty "
                       "value ignored, no unique ids), " +
                       std::to_string(newer.devices.size()) +
                       " from ROCm 6.2 (an empty value hides every GPU; GPU-<hex> entries)",
                   "give indices, and never an empty HIP_/CUDA_VISIBLE_DEVICES"});
  } else if (newer.ended_at) {
    out.push_back({AmdVisibilityNote::Kind::Dropped, "amd-hip-list-cut",
                   settings + ": HIP reads " + std::string(newer.variable) + " up to " +
                       quote_value(*newer.ended_at) + " and drops it and every entry after it (" +
                       rocr_part + ")",
                   "give only positions within ROCr's list, in HIP's form (decimal, no blanks)"});
  }
  return out;
}

HipView hip_view(const std::vector<std::string>& ids, const std::optional<std::string>& rocr,
                 const std::optional<std::string>& hip, const std::optional<std::string>& cuda) {
  HipView view;
  const RocrVisible r = rocr_visible(ids, rocr);
  if (r.aborts) {
    view.aborts = true;
    return view;
  }
  std::vector<std::string> kept;
  for (std::size_t d : r.devices) kept.push_back(ids[d]);
  const HipVisible older = hip_visible(kept, hip, cuda, hip_rules(5, 2));
  const HipVisible newer = hip_visible(kept, hip, cuda, hip_rules(6, 2));
  view.version_dependent = older.devices != newer.devices;
  for (std::size_t d : newer.devices) view.devices.push_back(r.devices[d]);
  return view;
}

}  // namespace gpusel::detail
