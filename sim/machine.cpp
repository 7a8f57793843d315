// What the simulator's libraries ask of a machine: finding its file, the FASTEST_FIRST key and
// the topology between its GPUs. Reading and parsing a file is machine_file.cpp's, which only
// libgpusel-sim-machines.so (and the tests) link: the doubles take parsed machines from it.
#include "machine.hpp"

#ifdef _WIN32
#include <filesystem>
#else
#include <unistd.h>
#endif

#include <algorithm>
#include <numeric>

namespace gpusel::sim {

double derived_speed(int cc_major, int cc_minor, int sm_count) {
  // In double throughout: no int arithmetic to overflow, whatever the values.
  return 1000.0 * (10.0 * cc_major + cc_minor) + sm_count;
}

std::string find_machine(const std::string& spec, const std::vector<std::string>& dirs) {
#ifdef _WIN32
  const bool is_path = spec.find_first_of("/\\") != std::string::npos ||
#else
  const bool is_path = spec.find('/') != std::string::npos ||
#endif
                       (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".toml") == 0);
  if (is_path) return spec;
  for (const std::string& dir : dirs) {
    std::string candidate = dir + "/" + spec + ".toml";
    // Exists is enough: load_machine refuses what is not a regular file (and opening a FIFO to
    // test it would block).
#ifdef _WIN32
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::u8path(candidate), ec)) return candidate;
#else
    if (::access(candidate.c_str(), F_OK) == 0) return candidate;
#endif
  }
  std::string where;
  for (const std::string& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
  throw MachineError("no bundled machine named '" + spec + "' (looked in " +
                     (where.empty() ? "no folder" : where) +
                     "); run `gpusel sim list` to see them, or give a path to a machine file");
}

int topology_level(const SimGpu& a, const SimGpu& b) {
  if (&a == &b || a.uuid == b.uuid) return 0;
  if (a.pcie_switch >= 0 && a.pcie_switch == b.pcie_switch) return 10;
  if (a.pcie_root >= 0 && a.pcie_root == b.pcie_root) return 30;
  if (a.numa_node == b.numa_node) return 40;
  return 50;
}

bool nvlink_between(const SimGpu& a, const SimGpu& b) {
  return a.uuid != b.uuid && a.nvlink_domain >= 0 && a.nvlink_domain == b.nvlink_domain;
}

bool peer_access(const SimGpu& a, const SimGpu& b) {
  if (a.uuid == b.uuid || a.lost || b.lost) return false;
  if (nvlink_between(a, b)) return true;
  return a.pcie_p2p && b.pcie_p2p && topology_level(a, b) <= 40;
}

std::vector<int> fastest_first_order(const SimMachine& m) {
  std::vector<int> order(m.gpus.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return m.gpus[static_cast<std::size_t>(a)].speed > m.gpus[static_cast<std::size_t>(b)].speed;
  });  // stable: ties keep PCI order
  return order;
}

bool has_vendor(const SimMachine& m, const std::string& vendor) {
  if (m.gpus.empty()) return m.vendor == vendor;
  return std::any_of(m.gpus.begin(), m.gpus.end(),
                     [&](const SimGpu& g) { return g.vendor == vendor; });
}

bool mixed_vendors(const SimMachine& m) {
  return std::any_of(m.gpus.begin(), m.gpus.end(),
                     [&](const SimGpu& g) { return g.vendor != m.vendor; });
}

SimMachine vendor_view(const SimMachine& m, const std::string& vendor) {
  SimMachine v;
  v.path = m.path;
  v.name = m.name;
  v.vendor = vendor;
  v.description = m.description;
  v.driver_version = vendor == "amd" ? m.amd_driver_version : m.driver_version;
  v.amd_driver_version = m.amd_driver_version;
  v.cuda_driver_version = m.cuda_driver_version;
  v.mig_rule = m.mig_rule;
  v.rocm_smi_node_ids = m.rocm_smi_node_ids;
  v.faults = m.faults;
  for (const SimGpu& g : m.gpus) {
    if (g.vendor == vendor) v.gpus.push_back(g);
  }
  v.whole = &m;
  return v;
}

}  // namespace gpusel::sim
