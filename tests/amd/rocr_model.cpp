// gpusel's model of ROCr's ROCR_VISIBLE_DEVICES (src/core/amd_visible.cpp), for
// tests/integration/test_amd_rocr.py to hold against Debian's real ROCr. Reads one JSON object on
// stdin, {"ids": [each GPU's unique id as ROCr shows it, in KFD order], "values": [a value of
// ROCR_VISIBLE_DEVICES, or null for unset, ...]}, and prints one JSON array: per value,
// {"devices": [the ids of the GPUs left, in order], "aborts": whether ROCr's parser throws}.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "amd_visible.hpp"

int main() {
  const nlohmann::json in = nlohmann::json::parse(std::cin);
  const auto ids = in.at("ids").get<std::vector<std::string>>();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : in.at("values")) {
    std::optional<std::string> value;
    if (!v.is_null()) value = v.get<std::string>();
    const gpusel::detail::RocrVisible r = gpusel::detail::rocr_visible(ids, value);
    nlohmann::json devices = nlohmann::json::array();
    for (std::size_t d : r.devices) devices.push_back(ids.at(d));
    out.push_back({{"devices", devices}, {"aborts", r.aborts}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
