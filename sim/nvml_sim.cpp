// The simulated libnvidia-ml.so.1: NVML's C entry points over a machine file.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "../src/driver/nvml_abi.hpp"
#include "sim_common.hpp"
#include "usage.hpp"

#define NVML_SIM_API extern "C" __attribute__((visibility("default")))
// The "no_v2" fault build hides the _v2 entry points, like a very old or fake library.
#ifdef GPUSEL_SIM_NO_V2
#define NVML_SIM_V2_API extern "C" __attribute__((visibility("hidden")))
#else
#define NVML_SIM_V2_API NVML_SIM_API
#endif

namespace {

using gpusel::sim::SimGpu;
using gpusel::sim::SimMachine;

struct gpuselNvmlDeviceBox {
  int gpu = 0;
  int mig = -1;  // MIG device slot, or -1 for the GPU itself
};

constexpr unsigned kMigSlots = 7;

struct State {
  gpusel::sim::LoadedMachine loaded;
  std::vector<gpuselNvmlDeviceBox> gpu_handles;
  std::vector<gpuselNvmlDeviceBox> mig_handles;  // kMigSlots per GPU
  std::mutex mutex;
  int refcount = 0;
};

void anchor() {}

State& state() {
  static State* s = [] {
    auto* st = new State;  // never destroyed: handles stay valid until the process ends
    st->loaded = gpusel::sim::load_from_environment(reinterpret_cast<const void*>(&anchor),
                                                    "libnvidia-ml.so.1");
    if (st->loaded.ok) {
      const auto n = static_cast<int>(st->loaded.machine.gpus.size());
      for (int g = 0; g < n; ++g) {
        st->gpu_handles.push_back({g, -1});
        for (unsigned m = 0; m < kMigSlots; ++m)
          st->mig_handles.push_back({g, static_cast<int>(m)});
      }
    }
    return st;
  }();
  return *s;
}

nvmlDevice_t to_handle(gpuselNvmlDeviceBox* box) {
  return reinterpret_cast<nvmlDevice_t>(box);
}

bool initialised() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.refcount > 0;
}

// A handle this library gave out, else nullptr (never dereference an unknown pointer).
const gpuselNvmlDeviceBox* lookup(nvmlDevice_t device) {
  State& s = state();
  auto in = [&](const std::vector<gpuselNvmlDeviceBox>& v) -> const gpuselNvmlDeviceBox* {
    for (const auto& b : v) {
      if (reinterpret_cast<const void*>(&b) == reinterpret_cast<const void*>(device)) return &b;
    }
    return nullptr;
  };
  const gpuselNvmlDeviceBox* box = in(s.gpu_handles);
  return box != nullptr ? box : in(s.mig_handles);
}

// Common checks: initialised, a known handle, a GPU still on the bus.
nvmlReturn_t check(nvmlDevice_t device, const gpuselNvmlDeviceBox** box, const SimGpu** gpu) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  *box = lookup(device);
  if (*box == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *gpu = &state().loaded.machine.gpus[static_cast<std::size_t>((*box)->gpu)];
  if ((*gpu)->lost) return NVML_ERROR_GPU_IS_LOST;
  if ((*box)->mig >= static_cast<int>((*gpu)->migs.size())) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

nvmlReturn_t copy_string(const std::string& value, char* buf, unsigned len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (len < value.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t do_init() {
  State& s = state();
  if (!s.loaded.ok) return NVML_ERROR_DRIVER_NOT_LOADED;
  const std::string& fault = s.loaded.machine.faults.nvml;
  if (fault == "init_fails" || fault == "missing") return NVML_ERROR_DRIVER_NOT_LOADED;
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.refcount;
  return NVML_SUCCESS;
}

nvmlReturn_t handle_by_index(unsigned index, nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  State& s = state();
  if (device == nullptr || index >= s.gpu_handles.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.loaded.machine.gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
  *device = to_handle(&s.gpu_handles[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t device_count(unsigned* count) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(state().gpu_handles.size());
  return NVML_SUCCESS;
}

}  // namespace

NVML_SIM_V2_API nvmlReturn_t nvmlInit_v2(void) {
  return do_init();
}
NVML_SIM_API nvmlReturn_t nvmlInit(void) {
  return do_init();
}
NVML_SIM_API nvmlReturn_t nvmlInitWithFlags(unsigned int) {
  return do_init();
}

NVML_SIM_API nvmlReturn_t nvmlShutdown(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  --s.refcount;
  return NVML_SUCCESS;
}

NVML_SIM_API const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires reset";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    default:
      return "Unknown Error";
  }
}

NVML_SIM_API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  return copy_string(state().loaded.machine.driver_version, version, length);
}

NVML_SIM_V2_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *version = state().loaded.machine.cuda_driver_version;
  return NVML_SUCCESS;
}
NVML_SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return nvmlSystemGetCudaDriverVersion_v2(version);
}

NVML_SIM_V2_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return device_count(count);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return device_count(count);
}
NVML_SIM_V2_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                           nvmlDevice_t* device) {
  return handle_by_index(index, device);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index(index, device);
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  State& s = state();
  const auto& gpus = s.loaded.machine.gpus;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    if (gpus[g].uuid == uuid) {
      if (gpus[g].lost) return NVML_ERROR_GPU_IS_LOST;
      *device = to_handle(&s.gpu_handles[g]);
      return NVML_SUCCESS;
    }
    for (std::size_t m = 0; m < gpus[g].migs.size(); ++m) {
      if (gpus[g].migs[m].uuid == uuid) {
        *device = to_handle(&s.mig_handles[g * kMigSlots + m]);
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  return copy_string(box->mig < 0 ? gpu->uuid : gpu->migs[static_cast<std::size_t>(box->mig)].uuid,
                     uuid, length);
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  return copy_string(box->mig < 0 ? gpu->name : gpu->migs[static_cast<std::size_t>(box->mig)].name,
                     name, length);
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(box->gpu);
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  return nvmlDeviceGetIndex(device, minor);  // /dev/nvidiaN numbering follows PCI order here
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long used = 0;
  for (const auto& p : gpu->processes) used += p.used_memory;
  if (box->mig < 0) {
    for (const auto& p : gpusel::sim::live_processes(state().loaded.machine, gpu->uuid))
      used += p.used_memory;
  }
  memory->total =
      box->mig < 0 ? gpu->memory_total : gpu->migs[static_cast<std::size_t>(box->mig)].memory_total;
  memory->used = std::min<unsigned long long>(used, memory->total);
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

NVML_SIM_V2_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                        nvmlMemory_v2_t* memory) {
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != gpusel::abi::kNvmlMemoryV2Version) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlMemory_t v1{};
  if (nvmlReturn_t rc = nvmlDeviceGetMemoryInfo(device, &v1); rc != NVML_SUCCESS) return rc;
  memory->total = v1.total;
  memory->reserved = 0;
  memory->free = v1.free;
  memory->used = v1.used;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", gpu->pci_domain,
                gpu->pci_bus, gpu->pci_device);
  pci->domain = gpu->pci_domain;
  pci->bus = gpu->pci_bus;
  pci->device = gpu->pci_device;
  pci->pciDeviceId = gpu->pci_device_id;
  pci->pciSubSystemId = 0;
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", gpu->pci_domain, gpu->pci_bus,
                gpu->pci_device);
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                             int* minor) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = gpu->cc_major;
  *minor = gpu->cc_minor;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int words,
                                                   unsigned long* mask) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (mask == nullptr || words == 0) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  std::fill(mask, mask + words, 0UL);
  for (int cpu : gpu->cpus) {
    const auto c = static_cast<unsigned>(cpu);
    if (c / kBits < words) mask[c / kBits] |= 1UL << (c % kBits);
  }
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int words,
                                                      unsigned long* nodes, unsigned int scope) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (nodes == nullptr || words == 0 || scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  std::fill(nodes, nodes + words, 0UL);
  if (gpu->numa_node < 0) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned>(gpu->numa_node);
  if (n / kBits < words) nodes[n / kBits] |= 1UL << (n % kBits);
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  (void)node;
  return NVML_ERROR_NOT_SUPPORTED;  // only where GPU memory is a NUMA node of its own
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                               unsigned int* pending) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = gpu->mig_enabled ? 1u : 0u;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = gpu->mig_enabled ? kMigSlots : 0;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                              unsigned int index,
                                                              nvmlDevice_t* mig) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (mig == nullptr || box->mig >= 0 || index >= kMigSlots) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (index >= gpu->migs.size()) return NVML_ERROR_NOT_FOUND;
  *mig = to_handle(&state().mig_handles[static_cast<std::size_t>(box->gpu) * kMigSlots + index]);
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *is_mig = box->mig >= 0 ? 1u : 0u;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t device,
                                                                       nvmlDevice_t* parent) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (parent == nullptr || box->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *parent = to_handle(&state().gpu_handles[static_cast<std::size_t>(box->gpu)]);
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (id == nullptr || box->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = gpu->migs[static_cast<std::size_t>(box->mig)].gpu_instance;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (id == nullptr || box->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = gpu->migs[static_cast<std::size_t>(box->mig)].compute_instance;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                        nvmlUtilization_t* util) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (util == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  const auto live =
      static_cast<unsigned>(gpusel::sim::live_processes(state().loaded.machine, gpu->uuid).size());
  util->gpu = std::min(100u, gpu->utilization_gpu + live * gpusel::sim::kUtilizationPerProcess);
  util->memory =
      std::min(100u, gpu->utilization_memory + live * gpusel::sim::kUtilizationPerProcess / 2);
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int* count,
                                                                  nvmlProcessInfo_t* infos) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // The machine file's processes, then the simulated processes that have a context on the GPU.
  std::vector<gpusel::sim::SimProcess> procs = gpu->processes;
  if (box->mig < 0) {
    for (const auto& p : gpusel::sim::live_processes(state().loaded.machine, gpu->uuid))
      procs.push_back(p);
  }
  const auto needed = static_cast<unsigned>(procs.size());
  if (*count < needed) {
    *count = needed;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (needed > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < needed; ++i) {
    infos[i].pid = procs[i].pid;
    infos[i].usedGpuMemory = procs[i].used_memory;
    infos[i].gpuInstanceId = 0xFFFFFFFFu;
    infos[i].computeInstanceId = 0xFFFFFFFFu;
  }
  *count = needed;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                              int* level) {
  const gpuselNvmlDeviceBox* ba;
  const gpuselNvmlDeviceBox* bb;
  const SimGpu* ga;
  const SimGpu* gb;
  if (nvmlReturn_t rc = check(a, &ba, &ga); rc != NVML_SUCCESS) return rc;
  if (nvmlReturn_t rc = check(b, &bb, &gb); rc != NVML_SUCCESS) return rc;
  if (level == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Same GPU: INTERNAL; one PCIe switch: SINGLE; same NUMA node: NODE; else SYSTEM.
  *level = ga == gb                                                       ? 0
           : (ga->pcie_switch >= 0 && ga->pcie_switch == gb->pcie_switch) ? 10
           : ga->numa_node == gb->numa_node                               ? 40
                                                                          : 50;
  return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps,
                                                 int* status) {
  const gpuselNvmlDeviceBox *ba, *bb;
  const SimGpu* ga;
  const SimGpu* gb;
  if (nvmlReturn_t rc = check(a, &ba, &ga); rc != NVML_SUCCESS) return rc;
  if (nvmlReturn_t rc = check(b, &bb, &gb); rc != NVML_SUCCESS) return rc;
  if (status == nullptr || caps < 0 || caps > 4) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr int kOk = 0, kNotSupported = 5;  // nvmlGpuP2PStatus_t
  const bool nvlink = ga->nvlink_domain >= 0 && ga->nvlink_domain == gb->nvlink_domain;
  if (caps == gpusel::abi::kNvmlP2PCapsIndexNvlink) {
    *status = ga != gb && nvlink ? kOk : kNotSupported;
  } else {
    // Reads, writes, atomics and the PCIe property work between GPUs of one machine here.
    *status = ga != gb ? kOk : kNotSupported;
  }
  return NVML_SUCCESS;
}

namespace {
nvmlReturn_t link_value(nvmlDevice_t device, unsigned int* out, unsigned SimGpu::*field) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig >= 0 || gpu->*field == 0) return NVML_ERROR_NOT_SUPPORTED;
  *out = gpu->*field;
  return NVML_SUCCESS;
}
}  // namespace

NVML_SIM_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
                                                              unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_generation);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_width);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_max_generation);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_max_width);
}

// Each exported function of nvml.def has exactly the prototype gpusel's loader expects.
#define GPUSEL_NVML(name, required, ret, params) \
  static_assert(std::is_same_v<decltype(&::name), ret(*) params>, #name " prototype");
#include "../src/driver/nvml.def"
#undef GPUSEL_NVML
