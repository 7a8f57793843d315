// The simulator's librocm_smi64.so.1: ROCm SMI (AMD's GPU monitoring library) answering from the
// machine file named by GPUSEL_SIM_MACHINE, for the machines whose `vendor` is "amd". It numbers
// GPUs as rocm-smi 5.x does, by DRM card number (the machine file's `drm_card`), and reports each
// GPU's 64-bit unique id, PCI address, name, VRAM and busy percentage. An NVIDIA machine has no AMD
// GPU: rsmi_init succeeds and no device is monitored. Only the functions gpusel asks for
// (src/driver/rocm_smi.def) and those Debian's rocm-smi calls to show them are here; the tests run
// that rocm-smi over this library and compare its answers with gpusel's.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "machine.hpp"
#include "rocm_smi_abi.hpp"
#include "sim_common.hpp"
#include "usage.hpp"

#define GPUSEL_RSMI_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using gpusel::sim::SimGpu;

struct State {
  gpusel::sim::LoadedMachine loaded;
  std::vector<const SimGpu*> by_card;  // rocm-smi's device index -> GPU
};

void anchor() {}

State& state() {
  static State* s = [] {
    auto* st = new State;  // never destroyed: answers stay valid until the process ends
    st->loaded = gpusel::sim::load_from_environment(reinterpret_cast<const void*>(&anchor),
                                                    "librocm_smi64.so.1", "amd");
    if (st->loaded.ok && st->loaded.machine().vendor == "amd") {
      for (const SimGpu& g : st->loaded.machine().gpus) st->by_card.push_back(&g);
      std::sort(st->by_card.begin(), st->by_card.end(),
                [](const SimGpu* a, const SimGpu* b) { return a->drm_card < b->drm_card; });
    }
    return st;
  }();
  return *s;
}

std::atomic<int> initialised{0};

// The GPU at rocm-smi index `index`, or nullptr (and `rc` says why).
const SimGpu* gpu_at(std::uint32_t index, rsmi_status_t& rc) {
  if (initialised.load() == 0) {
    rc = RSMI_STATUS_INIT_ERROR;
    return nullptr;
  }
  const State& s = state();
  if (index >= s.by_card.size()) {
    rc = RSMI_STATUS_INVALID_ARGS;
    return nullptr;
  }
  rc = RSMI_STATUS_SUCCESS;
  return s.by_card[index];
}

// The answer `read` gives for the GPU at rocm-smi index `index` into `*out`, after the checks
// every getter makes (initialised, an index in range, somewhere to write).
template <typename T, typename Read>
rsmi_status_t answer(std::uint32_t index, T* out, Read read) {
  rsmi_status_t rc = RSMI_STATUS_SUCCESS;
  const SimGpu* g = gpu_at(index, rc);
  if (g == nullptr) return rc;
  if (out == nullptr) return RSMI_STATUS_INVALID_ARGS;
  return read(*g, *out);
}

// A list answered as ROCm SMI answers lists: with `out` null, its length into `*n`; else up to
// `*n` items into `out`, `*n` set to how many were written (INSUFFICIENT_SIZE when cut).
template <typename T>
rsmi_status_t answer_list(const std::vector<T>& all, T* out, std::uint32_t* n) {
  if (out == nullptr) {
    *n = static_cast<std::uint32_t>(all.size());
    return RSMI_STATUS_SUCCESS;
  }
  const std::size_t k = std::min<std::size_t>(*n, all.size());
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), out);
  *n = static_cast<std::uint32_t>(k);
  return k < all.size() ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

// `text` into `buf` of `len` bytes (len > 0), cut and NUL-terminated when it does not fit.
rsmi_status_t copy_text(const std::string& text, char* buf, std::size_t len) {
  const std::size_t n = std::min(len - 1, text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
  return n < text.size() ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

}  // namespace

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_init(std::uint64_t /*flags*/) {
  if (!state().loaded.ok) return RSMI_STATUS_INIT_ERROR;
  initialised.fetch_add(1);
  return RSMI_STATUS_SUCCESS;
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_shut_down(void) {
  int now = initialised.load();
  while (now > 0 && !initialised.compare_exchange_weak(now, now - 1)) {
  }
  return RSMI_STATUS_SUCCESS;
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_num_monitor_devices(std::uint32_t* count) {
  if (count == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (initialised.load() == 0) return RSMI_STATUS_INIT_ERROR;
  *count = static_cast<std::uint32_t>(state().by_card.size());
  return RSMI_STATUS_SUCCESS;
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_unique_id_get(std::uint32_t index, std::uint64_t* id) {
  return answer(index, id, [](const SimGpu& g, std::uint64_t& v) {
    v = std::stoull(g.uuid.substr(4), nullptr, 16);  // the machine file checked its form
    return RSMI_STATUS_SUCCESS;
  });
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_vendor_id_get(std::uint32_t index, std::uint16_t* id) {
  return answer(index, id, [](const SimGpu& g, std::uint16_t& v) {
    v = static_cast<std::uint16_t>(g.pci_device_id & 0xffffu);
    return RSMI_STATUS_SUCCESS;
  });
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_id_get(std::uint32_t index, std::uint16_t* id) {
  return answer(index, id, [](const SimGpu& g, std::uint16_t& v) {
    v = static_cast<std::uint16_t>(g.pci_device_id >> 16);
    return RSMI_STATUS_SUCCESS;
  });
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_name_get(std::uint32_t index, char* name,
                                                   std::size_t len) {
  if (len == 0) return RSMI_STATUS_INVALID_ARGS;
  return answer(index, name,
                [len](const SimGpu& g, char& first) { return copy_text(g.name, &first, len); });
}

// ((domain) << 32) | (bus << 8) | (device << 3) | function, as rocm_smi.h lays it out.
GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_pci_id_get(std::uint32_t index, std::uint64_t* bdf) {
  return answer(index, bdf, [](const SimGpu& g, std::uint64_t& v) {
    v = (std::uint64_t{g.pci_domain} << 32) | (std::uint64_t{g.pci_bus & 0xffu} << 8) |
        (std::uint64_t{g.pci_device & 0x1fu} << 3) | (g.pci_function & 0x7u);
    return RSMI_STATUS_SUCCESS;
  });
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_memory_total_get(std::uint32_t index,
                                                           rsmi_memory_type_t type,
                                                           std::uint64_t* total) {
  return answer(index, total, [type](const SimGpu& g, std::uint64_t& v) {
    if (type != RSMI_MEM_TYPE_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
    v = g.memory_total;
    return RSMI_STATUS_SUCCESS;
  });
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_memory_usage_get(std::uint32_t index,
                                                           rsmi_memory_type_t type,
                                                           std::uint64_t* used) {
  return answer(index, used, [type](const SimGpu& g, std::uint64_t& v) {
    if (type != RSMI_MEM_TYPE_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
    v = 0;
    for (const auto& p : g.processes) v += p.used_memory;  // pid 0 included: memory of no process
    for (const auto& p :
         gpusel::sim::live_processes(state().loaded.machine(), g.uuid, "librocm_smi64.so.1")) {
      v += p.used_memory;
    }
    return RSMI_STATUS_SUCCESS;
  });
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_busy_percent_get(std::uint32_t index,
                                                           std::uint32_t* percent) {
  return answer(index, percent, [](const SimGpu& g, std::uint32_t& v) {
    v = g.utilization_gpu;
    return RSMI_STATUS_SUCCESS;
  });
}

// The NUMA node the GPU's PCI device hangs from (the machine file's numa_node); a GPU the file
// gives -1 reports what a machine without NUMA's sysfs gives, 0xffffffff.
GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_topo_numa_affinity_get(std::uint32_t index,
                                                             std::uint32_t* numa) {
  return answer(index, numa, [](const SimGpu& g, std::uint32_t& v) {
    v = g.numa_node < 0 ? 0xffffffffu : static_cast<std::uint32_t>(g.numa_node);
    return RSMI_STATUS_SUCCESS;
  });
}

// How two GPUs are linked: XGMI (one hop) between GPUs of one XGMI hive (the machine file's
// xgmi_hive), else PCIe (two hops: up to the host and down again, as ROCm SMI counts a path
// through the CPU).
GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_topo_get_link_type(std::uint32_t src, std::uint32_t dst,
                                                         std::uint64_t* hops,
                                                         RSMI_IO_LINK_TYPE* type) {
  if (hops == nullptr || type == nullptr) return RSMI_STATUS_INVALID_ARGS;
  rsmi_status_t rc = RSMI_STATUS_SUCCESS;
  const SimGpu* a = gpu_at(src, rc);
  if (a == nullptr) return rc;
  const SimGpu* b = gpu_at(dst, rc);
  if (b == nullptr) return rc;
  if (a == b) return RSMI_STATUS_INVALID_ARGS;
  const bool xgmi = a->xgmi_hive >= 0 && a->xgmi_hive == b->xgmi_hive;
  *hops = xgmi ? 1 : 2;
  *type = xgmi ? RSMI_IOLINK_TYPE_XGMI : RSMI_IOLINK_TYPE_PCIEXPRESS;
  return RSMI_STATUS_SUCCESS;
}

// The GPU's KFD topology node (ROCm 6.x's function): node 0 is the CPU, then the GPUs in the
// order of the machine file's [[gpu]] tables. Not supported where the file says
// rocm_smi_node_ids = false (an SMI without the function).
GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_dev_node_id_get(std::uint32_t index, std::uint32_t* node) {
  return answer(index, node, [](const SimGpu& g, std::uint32_t& v) {
    if (!state().loaded.machine().rocm_smi_node_ids) return RSMI_STATUS_NOT_SUPPORTED;
    v = g.kfd_position + 1;
    return RSMI_STATUS_SUCCESS;
  });
}

// The processes on a GPU: the machine file's (`processes`; pid 0 is memory outside any process)
// and the live ones that made queues there (usage.hpp; in the tests, ROCr over the thunk stand-in
// records each GPU it makes a queue on, as the kernel lists a process's queues for ROCm SMI).
static std::vector<gpusel::sim::SimProcess> gpu_processes(const SimGpu& g) {
  std::vector<gpusel::sim::SimProcess> out;
  for (const auto& p : g.processes) {
    if (p.pid != 0) out.push_back(p);
  }
  for (const auto& p :
       gpusel::sim::live_processes(state().loaded.machine(), g.uuid, "librocm_smi64.so.1")) {
    out.push_back(p);
  }
  return out;
}

// Every process on the machine's GPUs, each once, with the VRAM it holds on all of them.
static std::vector<rsmi_process_info_t> sim_processes() {
  std::vector<rsmi_process_info_t> out;
  for (const SimGpu* g : state().by_card) {
    for (const auto& p : gpu_processes(*g)) {
      auto same = [&](const rsmi_process_info_t& q) { return q.process_id == p.pid; };
      auto it = std::find_if(out.begin(), out.end(), same);
      if (it == out.end()) it = out.insert(out.end(), rsmi_process_info_t{p.pid, p.pid, 0, 0, 0});
      it->vram_usage += p.used_memory;
    }
  }
  return out;
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t* procs,
                                                               std::uint32_t* num_items) {
  if (num_items == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (initialised.load() == 0) return RSMI_STATUS_INIT_ERROR;
  return answer_list(sim_processes(), procs, num_items);
}

// rocm-smi --showpids asks each process's usage by pid (gpusel does not).
GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_compute_process_info_by_pid_get(std::uint32_t pid,
                                                                      rsmi_process_info_t* proc) {
  if (proc == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (initialised.load() == 0) return RSMI_STATUS_INIT_ERROR;
  for (const rsmi_process_info_t& p : sim_processes()) {
    if (p.process_id == pid) {
      *proc = p;
      return RSMI_STATUS_SUCCESS;
    }
  }
  return RSMI_STATUS_NOT_FOUND;
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_compute_process_gpus_get(std::uint32_t pid,
                                                               std::uint32_t* dv_indices,
                                                               std::uint32_t* num_devices) {
  if (num_devices == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (initialised.load() == 0) return RSMI_STATUS_INIT_ERROR;
  std::vector<std::uint32_t> found;
  const State& s = state();
  for (std::size_t i = 0; i < s.by_card.size(); ++i) {
    for (const auto& p : gpu_processes(*s.by_card[i])) {
      if (p.pid == pid) {
        found.push_back(static_cast<std::uint32_t>(i));
        break;
      }
    }
  }
  if (found.empty()) return RSMI_STATUS_NOT_FOUND;
  return answer_list(found, dv_indices, num_devices);
}

GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_status_string(rsmi_status_t status, const char** text) {
  if (text == nullptr) return RSMI_STATUS_INVALID_ARGS;
  switch (status) {
    case RSMI_STATUS_SUCCESS:
      *text = "RSMI_STATUS_SUCCESS: no error (gpusel's simulated ROCm SMI)";
      break;
    case RSMI_STATUS_INVALID_ARGS:
      *text =
          "RSMI_STATUS_INVALID_ARGS: a bad argument or device index (gpusel's simulated ROCm SMI)";
      break;
    case RSMI_STATUS_NOT_SUPPORTED:
      *text = "RSMI_STATUS_NOT_SUPPORTED: not simulated (gpusel's simulated ROCm SMI)";
      break;
    case RSMI_STATUS_INIT_ERROR:
      *text =
          "RSMI_STATUS_INIT_ERROR: not initialised, or no usable machine file (gpusel's "
          "simulated ROCm SMI)";
      break;
    default:
      *text = "RSMI_STATUS_UNKNOWN_ERROR (gpusel's simulated ROCm SMI)";
      break;
  }
  return RSMI_STATUS_SUCCESS;
}

// The amdgpu driver's version (component 0, the only one): the machine file's driver_version.
GPUSEL_RSMI_EXPORT rsmi_status_t rsmi_version_str_get(std::uint32_t component, char* text,
                                                      std::uint32_t len) {
  if (text == nullptr || len == 0 || component != 0) return RSMI_STATUS_INVALID_ARGS;
  const State& s = state();
  if (!s.loaded.ok || s.loaded.machine().driver_version.empty()) return RSMI_STATUS_NOT_SUPPORTED;
  return copy_text(s.loaded.machine().driver_version, text, len);
}
