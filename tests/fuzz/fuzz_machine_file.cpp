// libFuzzer target: the machine-file loader (sim/machine_file.cpp, compiled into this target so
// that libFuzzer sees its coverage, toml++ included). Any bytes either load into a machine that
// keeps the loader's promises or fail with MachineError: never a crash, a hang, a sanitizer report
// or another exception.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "machine.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool printable_line(const std::string& s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpusel::sim::SimMachine m;
  try {
    m = gpusel::sim::parse_machine(text, "fuzz.toml");
  } catch (const gpusel::sim::MachineError& e) {
    check(std::string(e.what()).rfind("fuzz.toml", 0) == 0);  // names the file
    return 0;
  }
  check(printable_line(m.name));
  check(!m.gpus.empty());
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    const auto& g = m.gpus[i];
    if (i > 0) check(m.gpus[i - 1].pci_bus_id < g.pci_bus_id);
    check(g.uuid.size() == 40 && g.pci_bus_id.size() == 16);
    check(g.cc_major >= 1 && g.cc_major <= gpusel::sim::kMaxComputeCapability);
    check(g.cc_minor >= 0 && g.cc_minor <= gpusel::sim::kMaxComputeCapability);
    check(std::isfinite(g.speed));
    check(g.pcie_h2d_gbps > 0 && g.pcie_d2h_gbps > 0 && g.memory_bandwidth_gbps > 0);
    for (std::size_t j = 0; j < i; ++j) check(m.gpus[j].uuid != g.uuid);
  }
  // FASTEST_FIRST is a permutation of the GPUs.
  const auto order = gpusel::sim::fastest_first_order(m);
  std::string seen(m.gpus.size(), '\0');
  check(order.size() == m.gpus.size());
  for (int k : order) {
    check(k >= 0 && static_cast<std::size_t>(k) < m.gpus.size() && seen[k] == '\0');
    seen[static_cast<std::size_t>(k)] = 1;
  }
  return 0;
}
