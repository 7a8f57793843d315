// gpusel's model of AMD's visibility variables (src/core/amd_visible.cpp), for
// tests/integration/test_amd_rocr.py to hold against Debian's real ROCr and HIP. Reads one JSON
// object on stdin:
//   {"ids": [each GPU's unique id as ROCr shows it, in KFD order],
//    "hip_version": [major, minor],
//    "cases": [{"rocr": ROCR_VISIBLE_DEVICES, "hip": HIP_VISIBLE_DEVICES,
//               "cuda": CUDA_VISIBLE_DEVICES}, ...]}   (each a string, or null for unset)
// and prints one JSON array, per case: {"rocr": [the ids ROCr keeps, in its order], "hip": [the
// ids of HIP's devices, in ordinal order], "aborts": whether ROCr's parser throws}.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "amd_visible.hpp"

namespace {

std::optional<std::string> value_of(const nlohmann::json& c, const char* key) {
  if (!c.contains(key) || c.at(key).is_null()) return std::nullopt;
  return c.at(key).get<std::string>();
}

}  // namespace

int main() {
  const nlohmann::json in = nlohmann::json::parse(std::cin);
  const auto ids = in.at("ids").get<std::vector<std::string>>();
  const auto version = in.at("hip_version").get<std::vector<int>>();
  const gpusel::detail::HipRules rules = gpusel::detail::hip_rules(version.at(0), version.at(1));
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : in.at("cases")) {
    const gpusel::detail::RocrVisible r = gpusel::detail::rocr_visible(ids, value_of(c, "rocr"));
    std::vector<std::string> kept;
    for (std::size_t d : r.devices) kept.push_back(ids.at(d));
    const gpusel::detail::HipVisible h =
        gpusel::detail::hip_visible(kept, value_of(c, "hip"), value_of(c, "cuda"), rules);
    std::vector<std::string> hip;
    for (std::size_t d : h.devices) hip.push_back(kept.at(d));
    out.push_back({{"rocr", kept}, {"hip", hip}, {"aborts", r.aborts}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
