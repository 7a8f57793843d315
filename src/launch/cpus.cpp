// CPU placement of workers near their GPUs.
#ifdef _WIN32
#include "win.hpp"
#else
#include <sched.h>
#endif

#include <algorithm>
#include <cctype>

#include "file_text.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel_detail.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

std::string read_line(const std::string& path) {
  return detail::read_first_line(path).value_or("");
}

std::string node_cpulist(const std::string& node) {
  return "/sys/devices/system/node/node" + node + "/cpulist";
}

// The CPUs of a NUMA node, from sysfs; empty when unknown.
std::vector<int> node_cpus(const std::string& node) {
  auto cpus = detail::parse_cpu_list(read_line(node_cpulist(node)));
  return cpus ? *cpus : std::vector<int>{};
}

// The sysfs file that says a PCI device's NUMA node.
std::string pci_numa_file(const std::string& nvml_bus_id) {
  if (nvml_bus_id.size() < 16) return "";
  std::string bus = nvml_bus_id.substr(4);  // 00000000:18:00.0 -> 0000:18:00.0
  std::transform(bus.begin(), bus.end(), bus.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return "/sys/bus/pci/devices/" + bus + "/numa_node";
}

// The CPUs near a GPU: the driver's CPU affinity (NVML's), else those of the NUMA node the driver
// gives (NVML's or ROCm SMI's), else of the PCI device's NUMA node in sysfs; empty when unknown,
// with what was looked at in `looked`.
std::vector<int> gpu_cpus(const GpuInfo& g, std::string& looked) {
  if (!g.cpus.empty()) return g.cpus;
  if (g.numa_node && *g.numa_node >= 0) {
    const std::string node = std::to_string(*g.numa_node);
    looked = "its NUMA node is " + node + ", and " + node_cpulist(node) + " cannot be read";
    return node_cpus(node);
  }
  const std::string file = pci_numa_file(g.pci_bus_id);
  const std::string node = file.empty() ? "" : read_line(file);
  looked = "the driver gives no CPU affinity or NUMA node for it" +
           (file.empty() ? std::string(", nor a PCI address") : ", and " + file + " gives none");
  if (node.empty() || node[0] == '-') return {};
  looked = file + " says NUMA node " + node + ", and " + node_cpulist(node) + " cannot be read";
  return node_cpus(node);
}

}  // namespace

#ifdef _WIN32
// Windows: the process's affinity within its processor group (GetProcessAffinityMask); CPU
// binding itself is refused in plan_cpus.
std::vector<int> own_cpus() {
  DWORD_PTR process = 0, system = 0;
  std::vector<int> out;
  if (!GetProcessAffinityMask(GetCurrentProcess(), &process, &system)) return out;
  for (int c = 0; c < static_cast<int>(sizeof process * 8); ++c) {
    if ((process >> c) & 1u) out.push_back(c);
  }
  return out;
}
#else
std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  // Up to the last CPU in the set, not all 1,024 the set can hold.
  const std::size_t count = static_cast<std::size_t>(CPU_COUNT(&set));
  for (int c = 0; c < CPU_SETSIZE && out.size() < count; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}
#endif

std::vector<std::vector<int>> plan_cpus(const std::vector<GpuInfo>& rank_gpus, CpuBinding mode,
                                        const std::vector<int>& allowed) {
  std::vector<std::vector<int>> near(rank_gpus.size());
  if (mode == CpuBinding::None) return near;
#ifdef _WIN32
  (void)allowed;
  throw failure(
      "binding workers to CPUs is not supported on Windows yet (processor groups and NUMA "
      "placement are not read there)");
#endif
  for (std::size_t r = 0; r < rank_gpus.size(); ++r) {
    const GpuInfo& g = rank_gpus[r];
    std::string looked;
    std::vector<int> cpus = gpu_cpus(g, looked);
    if (cpus.empty())
      throw failure("the CPUs near GPU " + g.uuid + " are unknown (" + looked + ")");
    std::vector<int> inside;
    std::set_intersection(cpus.begin(), cpus.end(), allowed.begin(), allowed.end(),
                          std::back_inserter(inside));
    if (inside.empty()) {
      throw failure("the CPUs near GPU " + g.uuid + " (" + detail::format_cpu_list(cpus) +
                    ") are all outside this process's CPUs (" + detail::format_cpu_list(allowed) +
                    ")");
    }
    near[r] = inside;
  }
  if (mode == CpuBinding::Node) return near;
  // Exclusive: ranks with the same CPU set split it into contiguous, even shares.
  std::vector<std::vector<int>> out(near.size());
  for (std::size_t r = 0; r < near.size(); ++r) {
    std::vector<std::size_t> group;
    for (std::size_t q = 0; q < near.size(); ++q) {
      if (near[q] == near[r]) group.push_back(q);
    }
    const std::size_t k =
        static_cast<std::size_t>(std::find(group.begin(), group.end(), r) - group.begin());
    const std::size_t m = group.size(), n = near[r].size();
    if (n < m) {
      out[r] = {near[r][k % n]};
    } else {
      out[r].assign(near[r].begin() + static_cast<std::ptrdiff_t>(k * n / m),
                    near[r].begin() + static_cast<std::ptrdiff_t>((k + 1) * n / m));
    }
  }
  return out;
}

GPUSEL_END_NAMESPACE
