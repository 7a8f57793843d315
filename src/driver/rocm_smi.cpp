// AMD GPUs through ROCm SMI (librocm_smi64.so.1), opened at run time by the symbol list in
// rocm_smi.def, as NVML is by nvml.def.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "dl.hpp"
#include "gpusel/amd.hpp"
#include "gpusel_detail.hpp"
#include "kfd_topology.hpp"
#include "rocm_smi_abi.hpp"

GPUSEL_BEGIN_NAMESPACE

namespace {

#ifdef _WIN32
constexpr const char* kRocmSmiLibraryName = "rocm_smi64.dll";
#else
constexpr const char* kRocmSmiLibraryName = "librocm_smi64.so.1";
#endif

struct RsmiApi {
#define GPUSEL_RSMI(name, required, ret, params) ret(*name) params = nullptr;
#include "rocm_smi.def"
#undef GPUSEL_RSMI
};

struct RsmiLibrary {
  RsmiApi api;
  bool usable = false;
  std::string path;
  std::string reason;
  ErrorCode code = ErrorCode::None;
};

RsmiLibrary open_library() {
  RsmiLibrary lib;
  std::string why;
  void* handle =
      detail::open_driver_library("GPUSEL_ROCM_SMI_LIBRARY", kRocmSmiLibraryName, lib.path, why);
  if (handle == nullptr) {
    lib.reason = "cannot load " + lib.path +
                 " (ROCm SMI, which AMD's ROCm installs: package librocm-smi64-1 on Debian)";
    lib.code = ErrorCode::LibraryNotLoaded;
    return lib;
  }
  std::string missing;
#define GPUSEL_RSMI(name, required, ret, params)                                      \
  lib.api.name = reinterpret_cast<ret(*) params>(detail::find_symbol(handle, #name)); \
  if (required && lib.api.name == nullptr) detail::note_missing(missing, #name);
#include "rocm_smi.def"
#undef GPUSEL_RSMI
  if (!missing.empty()) {
    lib.reason = lib.path + " lacks " + missing + " (not a ROCm SMI library gpusel can use)";
    lib.code = ErrorCode::LibraryIncomplete;
    return lib;  // never closed, as the NVIDIA libraries
  }
  lib.usable = true;
  return lib;
}

const RsmiLibrary& library() {
  static const RsmiLibrary lib = open_library();
  return lib;
}

std::mutex rsmi_mutex;  // ROCm SMI calls are serialised

std::string status_text(const RsmiApi& api, rsmi_status_t rc) {
  std::string text = "ROCm SMI status " + std::to_string(rc);
  const char* words = nullptr;
  if (api.rsmi_status_string != nullptr && api.rsmi_status_string(rc, &words) == 0 &&
      words != nullptr) {
    text += " (" + std::string(words) + ")";
  }
  return text;
}

std::string bus_text(std::uint64_t bdf) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08X:%02X:%02X.%X", static_cast<unsigned>(bdf >> 32),
                static_cast<unsigned>((bdf >> 8) & 0xffu),
                static_cast<unsigned>((bdf >> 3) & 0x1fu), static_cast<unsigned>(bdf & 0x7u));
  return buf;
}

// Reads GPU `gpu.index`; returns its PCI address as ROCm SMI encodes it (domain << 32 | bus << 8
// | device << 3 | function), nullopt when not given.
std::optional<std::uint64_t> read_gpu(const RsmiApi& api, bool usage, AmdGpu& gpu) {
  const std::uint32_t i = gpu.index;
  std::uint64_t id = 0;
  if (const rsmi_status_t rc = api.rsmi_dev_unique_id_get(i, &id); rc == RSMI_STATUS_SUCCESS) {
    gpu.id = amd_gpu_id(id);
  } else {
    gpu.failure = "rsmi_dev_unique_id_get: " + status_text(api, rc);
  }
  if (api.rsmi_dev_name_get != nullptr) {
    char name[256] = {};
    if (api.rsmi_dev_name_get(i, name, sizeof name) == RSMI_STATUS_SUCCESS) gpu.name = name;
  }
  std::optional<std::uint64_t> bdf;
  if (std::uint64_t v = 0;
      api.rsmi_dev_pci_id_get != nullptr && api.rsmi_dev_pci_id_get(i, &v) == RSMI_STATUS_SUCCESS) {
    gpu.pci_bus_id = bus_text(v);
    bdf = v;
  }
  if (api.rsmi_dev_memory_total_get != nullptr)
    api.rsmi_dev_memory_total_get(i, RSMI_MEM_TYPE_VRAM, &gpu.memory_total);
  std::uint32_t numa = 0;
  if (api.rsmi_topo_numa_affinity_get != nullptr &&
      api.rsmi_topo_numa_affinity_get(i, &numa) == RSMI_STATUS_SUCCESS && numa < 65536)
    gpu.numa_node = static_cast<int>(numa);  // -1 (no NUMA) arrives as 0xffffffff: unknown
  std::uint32_t node = 0;
  if (api.rsmi_dev_node_id_get != nullptr &&
      api.rsmi_dev_node_id_get(i, &node) == RSMI_STATUS_SUCCESS)
    gpu.kfd_node = node;
  if (!usage) return bdf;
  if (api.rsmi_dev_memory_usage_get != nullptr)
    api.rsmi_dev_memory_usage_get(i, RSMI_MEM_TYPE_VRAM, &gpu.memory_used);
  std::uint32_t busy = 0;
  if (api.rsmi_dev_busy_percent_get != nullptr &&
      api.rsmi_dev_busy_percent_get(i, &busy) == RSMI_STATUS_SUCCESS && busy <= 100)
    gpu.busy_percent = busy;
  return bdf;
}

// Where ROCm SMI gives no GPU its KFD node (the ROCm 5.x SMI has no rsmi_dev_node_id_get): each
// GPU's node from the kernel's topology, the one node at its PCI address, when the topology's GPU
// nodes and ROCm SMI's GPUs match one to one; otherwise the nodes stay unknown. (A partitioned
// GPU's nodes share one address, so they are never told apart this way.)
void nodes_from_topology(AmdSnapshot& snap, const std::vector<std::optional<std::uint64_t>>& bdfs,
                         const std::optional<std::vector<detail::KfdGpuNode>>& nodes,
                         const std::string& unread) {
  if (snap.gpus.empty()) return;
  for (const AmdGpu& g : snap.gpus) {
    if (g.kfd_node) return;
  }
  auto unknown = [&snap](std::string why) { snap.kfd_order_problem = std::move(why); };
  if (!nodes) return unknown(unread);
  if (nodes->size() != snap.gpus.size()) {
    return unknown("it has " + std::to_string(nodes->size()) + " GPU nodes, and ROCm SMI " +
                   std::to_string(snap.gpus.size()) + " GPUs");
  }
  std::vector<unsigned> found;
  for (std::size_t i = 0; i < bdfs.size(); ++i) {
    const std::optional<std::uint64_t>& bdf = bdfs[i];
    if (!bdf) return unknown("ROCm SMI gives GPU " + std::to_string(i) + " no PCI address");
    const auto domain = static_cast<std::uint32_t>(*bdf >> 32);
    const auto location = static_cast<std::uint32_t>(*bdf & 0xffffu);
    const std::string& address = snap.gpus[i].pci_bus_id;
    std::optional<unsigned> node;
    for (const detail::KfdGpuNode& n : *nodes) {
      if (n.domain != domain || n.location_id != location) continue;
      if (node) {  // a partitioned GPU's nodes share its address
        return unknown("nodes " + std::to_string(*node) + " and " + std::to_string(n.node) +
                       " are both at " + address + " (GPU " + std::to_string(i) + ")");
      }
      node = n.node;
    }
    if (!node) {
      return unknown("no GPU node is at " + address + ", ROCm SMI's GPU " + std::to_string(i));
    }
    if (std::find(found.begin(), found.end(), *node) != found.end()) {
      return unknown("node " + std::to_string(*node) +
                     " is at the address of two of ROCm SMI's GPUs");
    }
    found.push_back(*node);
  }
  for (std::size_t i = 0; i < snap.gpus.size(); ++i) snap.gpus[i].kfd_node = found[i];
}

// Which pairs of GPUs XGMI links, where ROCm SMI answers for every pair (else nothing is known).
void read_xgmi(const RsmiApi& api, AmdSnapshot& snap) {
  if (api.rsmi_topo_get_link_type == nullptr) return;
  const std::size_t n = snap.gpus.size();
  std::vector<std::vector<bool>> xgmi(n, std::vector<bool>(n, false));
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t j = i + 1; j < n; ++j) {
      std::uint64_t hops = 0;
      RSMI_IO_LINK_TYPE type = 0;
      if (api.rsmi_topo_get_link_type(i, j, &hops, &type) != RSMI_STATUS_SUCCESS) return;
      xgmi[i][j] = xgmi[j][i] = type == RSMI_IOLINK_TYPE_XGMI;
    }
  }
  snap.xgmi = std::move(xgmi);
}

// Each GPU's render node, from its KFD node's drm_render_minor, tried as ROCm's thunk opens it.
void read_render_nodes(AmdSnapshot& snap,
                       const std::optional<std::vector<detail::KfdGpuNode>>& nodes) {
  if (!nodes) return;
  for (AmdGpu& g : snap.gpus) {
    if (!g.kfd_node) continue;
    for (const detail::KfdGpuNode& n : *nodes) {
      if (n.node != *g.kfd_node || !n.render_minor) continue;
      g.render_node = detail::render_node_path(*n.render_minor);
      g.render_error = detail::render_node_error(*n.render_minor);
    }
  }
}

// Each process using GPUs, onto the GPUs it uses (`snap.gpus[i].processes`, known only when both
// functions are there and answer). A process may leave between the two calls: it is skipped.
void read_processes(const RsmiApi& api, AmdSnapshot& snap) {
  if (api.rsmi_compute_process_info_get == nullptr || api.rsmi_compute_process_gpus_get == nullptr)
    return;
  std::vector<rsmi_process_info_t> procs;
  std::uint32_t n = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {  // the list may grow between the calls
    if (api.rsmi_compute_process_info_get(nullptr, &n) != RSMI_STATUS_SUCCESS) return;
    procs.assign(n + 8, rsmi_process_info_t{});
    n = static_cast<std::uint32_t>(procs.size());
    const rsmi_status_t rc = api.rsmi_compute_process_info_get(procs.data(), &n);
    if (rc == RSMI_STATUS_SUCCESS) break;
    if (rc != RSMI_STATUS_INSUFFICIENT_SIZE || attempt == 3) return;
  }
  procs.resize(std::min<std::size_t>(n, procs.size()));
  for (AmdGpu& g : snap.gpus) g.processes.emplace();
  for (const rsmi_process_info_t& p : procs) {
    std::uint32_t indices[64] = {};
    std::uint32_t count = 64;
    if (api.rsmi_compute_process_gpus_get(p.process_id, indices, &count) != RSMI_STATUS_SUCCESS)
      continue;
    for (std::uint32_t k = 0; k < std::min<std::uint32_t>(count, 64); ++k) {
      if (indices[k] < snap.gpus.size())
        snap.gpus[indices[k]].processes->push_back(GpuProcess{p.process_id, p.vram_usage});
    }
  }
}

}  // namespace

std::string amd_gpu_id(std::uint64_t unique_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "GPU-%016llx", static_cast<unsigned long long>(unique_id));
  return buf;
}

std::vector<GpuInfo> amd_gpu_records(const AmdSnapshot& amd) {
  std::vector<GpuInfo> out;
  for (const AmdGpu& a : amd.gpus) {
    GpuInfo g;
    g.index = a.index;
    g.uuid = a.id;
    g.name = a.name;
    g.pci_bus_id = a.pci_bus_id;
    g.memory_total_bytes = a.memory_total;
    g.memory_used = a.memory_used;
    g.utilization = a.busy_percent;
    g.processes = a.processes;
    g.numa_node = a.numa_node;
    if (a.id.empty()) {
      g.failure = a.failure;
      g.problem = Problem(ErrorCode::DriverCallFailed, "rsmi_dev_unique_id_get");
    }
    out.push_back(std::move(g));
  }
  return out;
}

RenderAccess render_access(const AmdGpu& gpu) {
  if (!gpu.render_error || *gpu.render_error == 0) return RenderAccess::Usable;
  if (*gpu.render_error == ENOENT || *gpu.render_error == EPERM) return RenderAccess::LeftOut;
  return RenderAccess::StopsRocm;
}

std::string render_node_remedy(const AmdGpu& gpu) {
  if (gpu.render_error == EACCES) {
    return "add the user to the group that owns it (`ls -l " + gpu.render_node +
           "`: usually render, and video), then log in again";
  }
  return "check the amdgpu driver (`dmesg | grep amdgpu`)";
}

std::string kfd_order_unknown_text(const AmdSnapshot& amd) {
  for (const AmdGpu& g : amd.gpus) {
    if (render_access(g) == RenderAccess::StopsRocm) {
      return "ROCm starts no GPU here: it opens every GPU's render node, and " + g.render_node +
             " cannot be opened (" + std::strerror(*g.render_error) + ")";
    }
  }
  return "neither this ROCm SMI gives it (rsmi_dev_node_id_get, ROCm 6 and later) nor the "
         "kernel's KFD topology in " +
         detail::kfd_nodes_folder() + " (" +
         (amd.kfd_order_problem.empty() ? "" : amd.kfd_order_problem + "; ") +
         "each GPU node must match one of ROCm SMI's GPUs by PCI address; GPUSEL_KFD_TOPOLOGY "
         "names another folder)";
}

bool amd_driver_present() {
  std::error_code ec;
  return std::filesystem::exists("/dev/kfd", ec);
}

std::optional<Error> amd_unreadable(const std::string& asked, const AmdSnapshot& amd) {
  if ((amd.available && !amd.gpus.empty()) || !amd_driver_present()) return std::nullopt;
  const char* set = std::getenv("GPUSEL_ROCM_SMI_LIBRARY");
  return failure(
      asked +
          ": NVIDIA's NVML is unavailable, and this machine has AMD's GPU driver (/dev/kfd), "
          "but ROCm SMI " +
          (amd.available ? std::string("lists no GPU") : "cannot be used: " + amd.reason) +
          (set != nullptr ? "; GPUSEL_ROCM_SMI_LIBRARY=" + detail::quote_value(set) : "") +
          ". Without it gpusel cannot check which AMD GPU a worker gets, so it places none: "
          "install ROCm SMI (librocm-smi64-1 on Debian) or point GPUSEL_ROCM_SMI_LIBRARY at "
          "librocm_smi64.so.1",
      about(Subject::GpuRequest, {{"reason", "amd-smi-unavailable"}}));
}

std::optional<std::vector<std::string>> kfd_order(const AmdSnapshot& amd) {
  std::vector<const AmdGpu*> gpus;
  for (const AmdGpu& g : amd.gpus) {
    if (!g.kfd_node || g.id.empty()) return std::nullopt;
    gpus.push_back(&g);
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const AmdGpu* a, const AmdGpu* b) { return *a->kfd_node < *b->kfd_node; });
  for (std::size_t i = 1; i < gpus.size(); ++i) {
    if (*gpus[i]->kfd_node == *gpus[i - 1]->kfd_node) return std::nullopt;  // not one per GPU
  }
  std::vector<std::string> ids;
  for (const AmdGpu* g : gpus) {
    const RenderAccess access = render_access(*g);
    if (access == RenderAccess::StopsRocm) return std::nullopt;  // nothing to number
    if (access == RenderAccess::Usable) ids.push_back(g->id);    // else left out, as ROCm does
  }
  return ids;
}

AmdSnapshot query_rocm_smi(bool usage, bool links) {
  AmdSnapshot snap;
  const RsmiLibrary& lib = library();
  if (!lib.usable) {
    snap.reason = lib.reason;
    snap.problem = Problem(lib.code);
    return snap;
  }
  const RsmiApi& api = lib.api;
  std::lock_guard<std::mutex> lock(rsmi_mutex);
  if (const rsmi_status_t rc = api.rsmi_init(0); rc != RSMI_STATUS_SUCCESS) {
    snap.reason = "rsmi_init failed: " + status_text(api, rc) +
                  "; is AMD's amdgpu driver loaded (`lsmod | grep amdgpu`)?";
    snap.problem = Problem(ErrorCode::DriverCallFailed, "rsmi_init", rc);
    return snap;
  }
  std::uint32_t count = 0;
  if (const rsmi_status_t rc = api.rsmi_num_monitor_devices(&count); rc != RSMI_STATUS_SUCCESS) {
    snap.reason = "rsmi_num_monitor_devices failed: " + status_text(api, rc);
    snap.problem = Problem(ErrorCode::DriverCallFailed, "rsmi_num_monitor_devices", rc);
    api.rsmi_shut_down();
    return snap;
  }
  constexpr std::uint32_t kMostGpus = 4096;  // far past any machine: a count beyond is broken
  if (count > kMostGpus) {
    snap.reason = "ROCm SMI reports " + std::to_string(count) + " GPUs, which no machine has";
    snap.problem = Problem(ErrorCode::DriverBroken, "rsmi_num_monitor_devices", count);
    api.rsmi_shut_down();
    return snap;
  }
  snap.available = true;
  if (api.rsmi_version_str_get != nullptr) {
    char version[256] = {};
    if (api.rsmi_version_str_get(0, version, sizeof version) == RSMI_STATUS_SUCCESS)
      snap.driver_version = version;
  }
  std::vector<std::optional<std::uint64_t>> bdfs;
  for (std::uint32_t i = 0; i < count; ++i) {
    AmdGpu gpu;
    gpu.index = i;
    bdfs.push_back(read_gpu(api, usage, gpu));
    snap.gpus.push_back(std::move(gpu));
  }
  std::string unread;
  const auto topology = detail::read_kfd_gpu_nodes(detail::kfd_nodes_folder(), &unread);
  nodes_from_topology(snap, bdfs, topology, unread);
  read_render_nodes(snap, topology);
  if (usage) read_processes(api, snap);
  if (links) read_xgmi(api, snap);
  api.rsmi_shut_down();
  return snap;
}

GPUSEL_END_NAMESPACE
