// The kernel's KFD topology (AMD's GPU compute driver): the nodes ROCr and HIP number GPUs by,
// read from sysfs where ROCm SMI does not say each GPU's node (rsmi_dev_node_id_get, which the
// ROCm 5.x SMI lacks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpusel::detail {

// One GPU node: its number, and its PCI address as the node's properties give it (domain, and
// location_id: bus << 8 | device << 3 | function).
struct KfdGpuNode {
  unsigned node = 0;
  std::uint32_t domain = 0;
  std::uint32_t location_id = 0;
  // Its DRM render node's minor (drm_render_minor: /dev/dri/renderD<minor>); nullopt when the
  // properties do not give one.
  std::optional<unsigned> render_minor;
};

// The folder of node folders: GPUSEL_KFD_TOPOLOGY where set (a copy, or the simulator's),
// else /sys/class/kfd/kfd/topology/nodes.
std::string kfd_nodes_folder();

// The GPU nodes under `folder`, in node order: each numbered folder whose gpu_id is not 0 (CPU
// nodes have 0), with its properties' location_id and domain (0 where a kernel before domains
// gives none). nullopt when the folder cannot be read, or a GPU node's files cannot be read or
// give no location_id: the order is then unknown, never guessed, and `why` (when given) says what
// could not be read, naming the file.
std::optional<std::vector<KfdGpuNode>> read_kfd_gpu_nodes(const std::string& folder,
                                                          std::string* why = nullptr);

// "/dev/dri/renderD<minor>", and whether this process may open it as ROCm's thunk does (read and
// write), asked of the kernel's permission check (faccessat, effective ids) without opening it:
// 0 when it may, else the errno. The thunk leaves a GPU whose render node is missing (ENOENT) or
// denied by the device cgroup (EPERM, which only an open shows: not seen here) out of the devices
// it numbers, and fails altogether on any other error (EACCES: the user is not in the render
// group).
std::string render_node_path(unsigned minor);
int render_node_error(unsigned minor);

}  // namespace gpusel::detail
